"""Section 3: the project's LightningModule under lightning.pytorch.Trainer vs a plain PyTorch loop, same steps."""

from __future__ import annotations

import copy
import time
import warnings
from pathlib import Path

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from benchmarks.common import median, num, spread, table
from benchmarks.train_speed import determinism, family_config, module_and_batches


class StepClock(pl.Callback):
    """perf_counter at the start of every training batch and at the end of the last."""

    def __init__(self):
        self.starts, self.end = [], None

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.starts.append(time.perf_counter())

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.end = time.perf_counter()


def per_step(starts: list[float], end: float, warmup: int) -> float:
    """Seconds per step from the start of step `warmup` to the end of the last step."""
    return (end - starts[warmup]) / (len(starts) - warmup)


def with_lightning(cfg, template, batches: list[dict], warmup: int) -> tuple[float, float]:
    """(seconds per step after warm-up, fit() wall seconds) of Trainer.fit on a copy of template, one epoch."""
    module = copy.deepcopy(template)
    clock = StepClock()
    options = {k: v for k, v in cfg.trainer.items() if k not in ("log_every_n_steps", "enable_model_summary")}
    trainer = pl.Trainer(**options, max_epochs=1, max_steps=len(batches), logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, limit_val_batches=0,
                         num_sanity_val_steps=0, gradient_clip_val=cfg.train.clip, callbacks=[clock])
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no val_dataloader", "few workers"
        trainer.fit(module, train_dataloaders=DataLoader(batches, batch_size=None))
    return per_step(clock.starts, clock.end, warmup), time.perf_counter() - t0


def by_hand(cfg, template, batches: list[dict], warmup: int) -> float:
    """Seconds per step after warm-up of a hand loop on a copy of template (training_step, backward, clip, Adam)."""
    module = copy.deepcopy(template)
    module.train()
    opt = torch.optim.Adam(module.parameters(), lr=cfg.train.lr, weight_decay=cfg.train.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0)
    starts = []
    with warnings.catch_warnings(), determinism(cfg):
        warnings.simplefilter("ignore")  # self.log() without a Trainer: a warning, nothing logged
        for i, batch in enumerate(DataLoader(batches, batch_size=None)):
            starts.append(time.perf_counter())
            opt.zero_grad(set_to_none=True)
            module.training_step(batch, i).backward()
            torch.nn.utils.clip_grad_norm_(module.parameters(), cfg.train.clip)
            opt.step()
            sched.step()
    return per_step(starts, time.perf_counter(), warmup)


def run(models: Path, data: Path, family: str, sizes: dict) -> dict:
    """Interleaved repeats of both; the median seconds per step of each and their ratio."""
    cfg = family_config(family, "translate", models, data)
    template, pool = module_and_batches(cfg, sizes["lightning_batches"])
    batches = [pool[i % len(pool)] for i in range(sizes["lightning_steps"])]
    light, plain, fits = [], [], []
    for _ in range(sizes["lightning_repeats"]):
        step, fit = with_lightning(cfg, template, batches, sizes["lightning_warmup"])
        light.append(step)
        fits.append(fit)
        plain.append(by_hand(cfg, template, batches, sizes["lightning_warmup"]))
    return {"family": family, "steps": len(batches), "warmup": sizes["lightning_warmup"], "distinct": len(pool),
            "repeats": sizes["lightning_repeats"], "lightning_ms": 1000 * median(light),
            "plain_ms": 1000 * median(plain), "ratio": median(light) / median(plain), "fit_s": median(fits),
            "lightning_all_ms": [1000 * x for x in light], "plain_all_ms": [1000 * x for x in plain],
            "batch_size": cfg.train.batch_size, "deterministic": bool(cfg.trainer.get("deterministic", False)),
            "threads": torch.get_num_threads(), "lightning": pl.__version__}


def render(r: dict) -> list[str]:
    lines = ["## 3. Lightning vs a plain PyTorch loop", "",
             (f"`TranslationModule` of `{r['family']}` built as the train stage builds it, {r['steps']} steps over "
              f"{r['distinct']} distinct training batches (batch size {r['batch_size']}) in one epoch: "
              f"`lightning.pytorch.Trainer` {r['lightning']} (the pipeline's `conf/trainer` settings, no logger, no "
              "checkpointing, no progress bar, no validation, gradient clipping as in training) against a hand loop "
              "calling the same `training_step`, backward, clipping, Adam and a scheduler step. Time per step from "
              f"step {r['warmup']} to the end (a callback stamps Lightning's batches); median of {r['repeats']} "
              f"interleaved repeat(s). {r['threads']} torch thread(s), deterministic algorithms "
              f"{'on' if r['deterministic'] else 'off'} in both."), ""]
    lines += table(["loop", "ms per step (median)", "range"],
                   [["Lightning `Trainer.fit`", num(r["lightning_ms"], 2), spread(r["lightning_all_ms"])],
                    ["plain PyTorch", num(r["plain_ms"], 2), spread(r["plain_all_ms"])]])
    return lines + ["", (f"**Ratio Lightning / plain: {r['ratio']:.3f}** (target ≤ 1.10: "
                         f"{'met' if r['ratio'] <= 1.10 else 'not met'}). A whole `fit()` call, Trainer setup "
                         f"included, took {r['fit_s']:.2f} s (median)."), ""]
