"""training.py: train_one's exact resume (and not resuming a crashed run of other settings), its reshuffled epochs
and what its summary says stopped training. Run through the train stage where a whole run is needed (tests/stages/
test_train.py's `run`); the tune stage's best trial taken as a run: tests/stages/test_tune.py."""

import shutil

import lightning.pytorch as pl
import pytest
import torch

from attention_lab.core import training
from attention_lab.core.files import read_json
from attention_lab.core.paths import partial_dir, seed_dir
from attention_lab.stages import prepare, tokenizer
from attention_lab.stages.common import stage_config
from tests.stages.test_train import SMALL, run


@pytest.fixture
def prepared(project):
    prepare.main(["data.n_train=200", "data.n_valid=30"])
    tokenizer.main(["data.n_train=200", "tokenize.vocab_size=200"])
    return project


class Crash(pl.Callback):
    """Kills training as the second epoch starts, after the first epoch's checkpoint was written."""

    def on_train_epoch_start(self, trainer, module):
        if trainer.current_epoch == 1:
            raise RuntimeError("simulated crash")


def test_resume_from_last_checkpoint_matches_uninterrupted(prepared):
    straight = run(2)
    cfg = stage_config(["family=bahdanau", *SMALL, "train.max_epochs=2"])
    out = seed_dir(cfg, 0)
    shutil.rmtree(out)
    with pytest.raises(RuntimeError, match="simulated crash"):
        training.train_one(cfg.copy(), 0, out, partial_dir(out, out.parent), callbacks=(Crash(),))
    partial = partial_dir(out, out.parent)
    assert (partial / "last.ckpt").is_file() and not out.exists()  # nothing half-written in place
    resumed = run(2)
    assert resumed["best_val_loss"] == straight["best_val_loss"]
    assert resumed["steps"] == straight["steps"]
    assert not partial.exists()


def test_a_crashed_run_of_other_settings_is_not_resumed(prepared, capsys):
    cfg = stage_config(["family=bahdanau", *SMALL, "train.max_epochs=2", "train.lr=0.01"])
    out = seed_dir(cfg, 0)
    with pytest.raises(RuntimeError, match="simulated crash"):
        training.train_one(cfg.copy(), 0, out, partial_dir(out, out.parent), callbacks=(Crash(),))
    crashed_run = read_json(partial_dir(out, out.parent) / "run.json")["run_id"]
    straight = run(2)  # the default lr: a fresh run, not the crashed one's second epoch
    assert "not resuming" in capsys.readouterr().out
    assert read_json(out / "run.json")["run_id"] != crashed_run and straight["epochs"] == 2


class FirstBatches(pl.Callback):
    """Records each training epoch's first batch."""

    def __init__(self):
        self.first = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if batch_idx == 0:
            self.first.append(batch["src"].clone())


def test_every_epoch_reshuffles_the_batches(prepared):
    cfg = stage_config(["family=bahdanau", *SMALL, "train.max_epochs=2"])
    out = seed_dir(cfg, 0)
    seen = FirstBatches()
    training.train_one(cfg.copy(), 0, out, partial_dir(out, out.parent), callbacks=(seen,))
    assert len(seen.first) == 2 and not torch.equal(seen.first[0], seen.first[1])


def test_the_summary_says_what_stopped_training(prepared):
    """train.json's stopped_by: the epoch cap when every epoch ran; early stopping when val/loss stopped improving for
    train.patience validations (a zero learning rate after warm-up never improves on the first validation)."""
    assert run(2)["stopped_by"] == "epoch cap"
    stopped = run(6, "train.patience=1", "train.lr=1e-9", "train.warmup_steps=1", "train.min_epochs=0")
    assert stopped["stopped_by"] == "early stopping" and stopped["epochs"] < 6


def test_a_run_s_settings_go_on_a_copy_of_the_family_s_config_in_order():
    from omegaconf import OmegaConf

    from attention_lab.core.task import Run

    cfg = OmegaConf.create({"train": {"max_epochs": 4}})
    OmegaConf.set_struct(cfg, True)
    run = Run(0, "out", settings=(("train.share", 0.5), ("train.max_epochs", 8), ("train.share", 0.25)))
    run_cfg = training.run_settings(cfg, run)
    assert OmegaConf.to_container(run_cfg) == {"train": {"max_epochs": 8, "share": 0.25}}
    assert OmegaConf.to_container(cfg) == {"train": {"max_epochs": 4}}
