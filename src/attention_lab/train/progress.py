"""Where a long run is, when nobody watches a terminal: one line per validated epoch in a log file
or CI."""

from __future__ import annotations

import sys
import time

import lightning.pytorch as pl
from lightning.pytorch.callbacks import RichProgressBar


class EpochLine(pl.Callback):
    """`<stage> <family> seed <k>: epoch e/E <metric> x, <elapsed> s, at most <left> s left` after
    every validation (the monitored metric: val/loss, classify val/accuracy; rank 0 only; `update
    u/U` for a run capped in updates); the estimate assumes the remaining epochs (updates) take as
    long as the finished ones did (early stopping may end sooner)."""

    def __init__(self, stage: str, family: str, seed: int, metric: str = "val/loss"):
        self.what, self.metric, self._t0 = f"{stage} {family} seed {seed}", metric, None

    def on_train_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        self._t0 = time.perf_counter()

    def on_validation_epoch_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if trainer.sanity_checking or not trainer.is_global_zero or self._t0 is None:
            return
        unit, done, total = "epoch", trainer.current_epoch + 1, trainer.max_epochs
        if trainer.max_steps > 0:  # pretrain.max_updates
            unit, done, total = "update", max(trainer.global_step, 1), trainer.max_steps
        elapsed = time.perf_counter() - self._t0
        value = trainer.callback_metrics.get(self.metric)
        shown = f"{self.metric} {float(value):.4f}" if value is not None else f"{self.metric} —"
        print(
            f"{self.what}: {unit} {done}/{total} {shown}, {elapsed:.0f} s, at most "
            f"{elapsed / done * max(total - done, 0):.0f} s left",
            flush=True,
        )


def progress_callback(stage: str, family: str, seed: int, metric: str = "val/loss") -> pl.Callback:
    """Rich's progress bar on a terminal, else one EpochLine per validation (a bar writes nothing
    useful to a log)."""
    return RichProgressBar() if sys.stdout.isatty() else EpochLine(stage, family, seed, metric)
