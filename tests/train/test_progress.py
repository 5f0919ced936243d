"""progress.py: EpochLine's one line per validation (epochs or updates, the monitored metric, the
time estimate) and progress_callback's choice between it and Rich's bar. A whole train stage's
lines: tests/stages/test_train.py."""

from __future__ import annotations

import os
import re
import sys
import time
from types import SimpleNamespace

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import RichProgressBar

from attention_lab.train.progress import EpochLine, progress_callback

LINE = re.compile(
    r"^(?P<what>.+): (?P<unit>epoch|update) (?P<done>\d+)/(?P<total>\d+) (?P<shown>.+), "
    r"(?P<elapsed>\d+) s, at most (?P<left>\d+) s left$"
)


class Rising(pl.LightningModule):
    """Logs val/loss = 1 + 0.1 × validations so far (and no val/accuracy)."""

    def __init__(self):
        super().__init__()
        self.w, self.validations = torch.nn.Parameter(torch.zeros(1)), 0

    def training_step(self, batch, batch_idx):
        return (self.w * batch[0]).sum()

    def validation_step(self, batch, batch_idx):
        self.log("val/loss", 1.0 + 0.1 * (self.validations + 1))

    def on_validation_epoch_end(self):
        if not self.trainer.sanity_checking:
            self.validations += 1

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(tmp_path, line: EpochLine, **schedule) -> None:
    """Rising on 4 batches an epoch, validated on 4, with `line` among the callbacks."""
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.ones(8, 1)), batch_size=2
    )
    trainer = pl.Trainer(
        callbacks=[line],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=tmp_path,
        accelerator="cpu",
        **schedule,
    )
    trainer.fit(Rising(), data, data)


def printed(capsys) -> list[dict]:
    """EpochLine's lines on stdout so far, each in LINE's form, as LINE's groups."""
    out = [line for line in capsys.readouterr().out.splitlines() if " seed " in line]
    assert all(LINE.match(line) for line in out), out
    return [LINE.match(line).groupdict() for line in out]


def test_one_line_per_validated_epoch_none_for_the_sanity_check(tmp_path, capsys, one_torch_thread):
    """3 epochs (after a sanity check): `train bahdanau seed 2: epoch e/3 val/loss x` with the
    epoch's value, and the last line has nothing left."""
    fit(tmp_path, EpochLine("train", "bahdanau", 2), max_epochs=3, num_sanity_val_steps=2)
    lines = printed(capsys)
    assert [(d["what"], d["unit"], d["done"], d["total"]) for d in lines] == [
        ("train bahdanau seed 2", "epoch", str(e), "3") for e in (1, 2, 3)
    ]
    assert [d["shown"] for d in lines] == ["val/loss 1.1000", "val/loss 1.2000", "val/loss 1.3000"]
    assert lines[-1]["left"] == "0"


def test_a_run_capped_in_updates_counts_updates(tmp_path, capsys, one_torch_thread):
    """max_steps (pretrain.max_updates), validated every 3 updates across epochs of 4: `update 3/9`,
    6/9, 9/9."""
    fit(
        tmp_path,
        EpochLine("pretrain", "bert", 0),
        max_steps=9,
        val_check_interval=3,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
    )
    lines = printed(capsys)
    assert [(d["what"], d["unit"], d["done"], d["total"]) for d in lines] == [
        ("pretrain bert seed 0", "update", str(u), "9") for u in (3, 6, 9)
    ]


def test_a_metric_not_logged_shows_a_dash(tmp_path, capsys, one_torch_thread):
    """The monitored metric (classify: val/accuracy) absent from the logged metrics: `val/accuracy
    —`, no error."""
    fit(
        tmp_path,
        EpochLine("train", "han", 1, metric="val/accuracy"),
        max_epochs=1,
        num_sanity_val_steps=0,
    )
    assert [d["shown"] for d in printed(capsys)] == ["val/accuracy —"]


def trainer_at(epoch: int, max_epochs: int, **state) -> SimpleNamespace:
    """The Trainer attributes EpochLine reads, at the end of epoch `epoch` (0-based) of a run with
    no update cap."""
    return SimpleNamespace(
        **{
            "sanity_checking": False,
            "is_global_zero": True,
            "current_epoch": epoch,
            "max_epochs": max_epochs,
            "max_steps": -1,
            "global_step": 0,
            "callback_metrics": {"val/loss": torch.tensor(0.5)},
            **state,
        }
    )


def test_the_estimate_assumes_the_remaining_epochs_take_as_long(capsys):
    """1000 s after the start, 2 of 5 epochs done: 1000 / 2 × 3 = 1500 s left."""
    line = EpochLine("tune", "transformer", 0)
    line._t0 = time.perf_counter() - 1000  # the clock on_train_start would have started 1000 s ago
    line.on_validation_epoch_end(trainer_at(1, 5), None)
    [d] = printed(capsys)
    assert (d["done"], d["total"], d["shown"], d["elapsed"], d["left"]) == (
        "2",
        "5",
        "val/loss 0.5000",
        "1000",
        "1500",
    )


def test_no_line_on_other_ranks_or_before_training_starts(capsys):
    """Rank > 0 of a data-parallel run, and a validation before on_train_start (trainer.validate),
    print nothing; an update cap before the first update counts as update 1."""
    line = EpochLine("train", "bahdanau", 0)
    line.on_validation_epoch_end(trainer_at(0, 3), None)  # not started
    line.on_train_start(trainer_at(0, 3), None)
    line.on_validation_epoch_end(trainer_at(0, 3, is_global_zero=False), None)
    line.on_validation_epoch_end(trainer_at(0, 3, sanity_checking=True), None)
    assert printed(capsys) == []
    line.on_validation_epoch_end(trainer_at(0, 3, max_steps=20, global_step=0), None)
    assert [(d["unit"], d["done"], d["total"]) for d in printed(capsys)] == [("update", "1", "20")]


def test_progress_callback_is_a_bar_on_a_terminal_else_epoch_lines(monkeypatch):
    """stdout a terminal (a pty): RichProgressBar; a pipe or file (pytest's capture): EpochLine with
    the metric."""
    callback = progress_callback("train", "han", 3, "val/accuracy")
    assert isinstance(callback, EpochLine)
    assert (callback.what, callback.metric) == ("train han seed 3", "val/accuracy")
    controller, terminal = os.openpty()
    with open(terminal, "w") as tty:
        monkeypatch.setattr(sys, "stdout", tty)
        assert isinstance(progress_callback("train", "han", 3), RichProgressBar)
    os.close(controller)
