"""module.py (translate): the teacher-forcing schedules of scheduled sampling (Bengio et al.
2015)."""

import math

import pytest

from attention_lab.translate.module import teacher_forcing_ratio


def test_teacher_forcing_schedules_follow_bengio_2015():
    from omegaconf import OmegaConf

    tf = OmegaConf.create(
        {"schedule": "constant", "ratio": 0.8, "min_ratio": 0.5, "slope": 0.2, "k": 5.0}
    )
    assert [teacher_forcing_ratio(tf, i) for i in (0, 9)] == [0.8, 0.8]
    tf.schedule = "linear"  # max(ε, k − c·i)
    assert [round(teacher_forcing_ratio(tf, i), 6) for i in range(4)] == [0.8, 0.6, 0.5, 0.5]
    tf.schedule = "inverse_sigmoid"  # k / (k + exp(i / k))
    assert teacher_forcing_ratio(tf, 3) == pytest.approx(5 / (5 + math.exp(3 / 5)))
    tf.per = "update"  # the same curve over updates; i past 700·k stays finite
    assert teacher_forcing_ratio(tf, 10**9) == pytest.approx(0.0)
    tf.per = "batch"
    with pytest.raises(ValueError, match="train.teacher_forcing.per.*epoch, update"):
        teacher_forcing_ratio(tf, 0)
    tf.per, tf.schedule = "epoch", "cosine"
    with pytest.raises(
        ValueError, match="train.teacher_forcing.schedule.*constant, linear, inverse_sigmoid"
    ):
        teacher_forcing_ratio(tf, 0)
