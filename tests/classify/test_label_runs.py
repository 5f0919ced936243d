"""label_runs.py: classify's runs on shares of the training labels, their folders, schedules, MLflow
marks and train.json figures (what generic code used to spell out; tests/stages, tests/e2e run
them)."""

from pathlib import Path
from types import SimpleNamespace

from omegaconf import OmegaConf

from attention_lab.classify.label_runs import full_run, run_marks, runs, train_summary
from attention_lab.core.task import get_task


def config(fractions: list[float], seeds=(0, 1)):
    return OmegaConf.create(
        {
            "root": "/r",
            "family": "han",
            "seeds": list(seeds),
            "task": {"name": "classify"},
            "paths": {"models": "models"},
            "train": {"max_epochs": 4, "label_fractions": fractions},
        }
    )


def test_a_run_per_fraction_and_seed_with_the_schedule_of_all_labels():
    made = runs(config([0.1, 1.0]))
    checkpoints = Path("/r/models/han/checkpoints")
    assert [(r.seed, r.out, r.validate_every, r.variant) for r in made] == [
        (0, checkpoints / "labels10" / "seed0", 10, "0.1"),
        (1, checkpoints / "labels10" / "seed1", 10, "0.1"),
        (0, checkpoints / "seed0", 1, None),
        (1, checkpoints / "seed1", 1, None),
    ]
    assert dict(made[0].settings) == {"train.label_fraction": 0.1, "train.max_epochs": 40}
    assert dict(made[2].settings) == {"train.label_fraction": 1.0, "train.max_epochs": 4}


def test_without_all_labels_the_largest_share_is_the_main_row():
    assert [r.variant for r in runs(config([0.25, 0.5], seeds=[0]))] == ["0.25", None]


def test_a_tuning_trial_sees_every_label_whatever_the_fractions():
    run = full_run(config([0.1]), 3)
    assert run.out == Path("/r/models/han/checkpoints/seed3") and dict(run.settings) == {
        "train.label_fraction": 1.0
    }


def test_marks_and_figures_of_a_run_on_a_share():
    cfg = config([0.5])
    # pretraining: no share set
    assert run_marks(cfg) == ("", {}) and train_summary(cfg, None) == {}
    cfg.train.label_fraction = 0.5
    assert run_marks(cfg) == ("-labels50", {"label_fraction": "0.5"})
    assert train_summary(cfg, SimpleNamespace(splits={"train": [1, 2, 3]})) == {
        "label_fraction": 0.5,
        "train_documents": 3,
    }
    cfg.train.label_fraction = 1.0
    assert run_marks(cfg) == ("", {"label_fraction": "1.0"})


def test_the_task_declares_them():
    task = get_task("classify")
    assert task.variants == "label_fractions"
    assert [r.variant for r in task.runs(config([0.1, 1.0]))] == ["0.1", "0.1", None, None]
