"""classify/module.py: the penalty coefficient's warm-up (train.penalty_warmup) for families that
return Lin et al.'s ‖AAᵀ − I‖²_F penalty."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from attention_lab.classify.module import ClassificationModule
from attention_lab.stages.common import stage_config


def module(*overrides: str) -> ClassificationModule:
    cfg = stage_config(["task=classify", "family=self_attentive", *overrides], tuned=False)
    return ClassificationModule(
        OmegaConf.to_container(cfg, resolve=True), vocab_size=50, num_classes=3
    )


def at_update(m: ClassificationModule, step: int) -> ClassificationModule:
    m._trainer = SimpleNamespace(global_step=step)  # what LightningModule.global_step reads
    return m


def test_the_penalty_ramps_linearly_from_zero_over_its_warm_up():
    m = module("train.penalty_warmup=100", "train.penalty=1.0")
    assert [at_update(m, s).penalty_coefficient() for s in (0, 25, 50, 100, 1000)] == [
        0.0,
        0.25,
        0.5,
        1.0,
        1.0,
    ]
    # none: the paper's constant coefficient
    m = module("train.penalty_warmup=0", "train.penalty=0.5")
    assert [at_update(m, s).penalty_coefficient() for s in (0, 1000)] == [0.5, 0.5]


def test_self_attentive_warms_its_penalty_up_and_other_settings_keep_the_paper_s(monkeypatch):
    """params.yaml sets the warm-up for self_attentive alone; the loss adds the ramped coefficient ×
    the penalty."""
    assert (
        stage_config(["task=classify", "family=self_attentive"], tuned=False).train.penalty_warmup
        > 0
    )
    assert stage_config(["task=classify", "family=han"], tuned=False).train.penalty_warmup == 0
    m = module("train.penalty_warmup=10")
    logits, penalty = torch.randn(2, 3), torch.tensor([2.0, 3.0])
    monkeypatch.setattr(m.model, "forward", lambda *inputs: {"logits": logits, "penalty": penalty})
    batch = {"label": torch.tensor([0, 2])}
    monkeypatch.setattr("attention_lab.classify.module.model_inputs", lambda model, batch: ())
    ce = F.cross_entropy(logits, batch["label"]).item()
    assert at_update(m, 0).loss(batch)[0].item() == pytest.approx(ce)
    assert at_update(m, 5).loss(batch)[0].item() == pytest.approx(ce + 0.5 * 2.5)
    assert at_update(m, 50).loss(batch)[0].item() == pytest.approx(ce + 2.5)
