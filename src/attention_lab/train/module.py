"""What every task's LightningModule shares: the model from conf/model, Adam with warm-up, then a
rate halved on each plateau of the monitored validation metric (or cosine decay), exact
resume (RNG state in the checkpoint, one per process under data parallelism) and the training clock
(seconds and tokens of the training epochs only, tokens summed over processes)."""

from __future__ import annotations

import math
import time

import lightning.pytorch as pl
import torch
from hydra.utils import instantiate
from lightning.pytorch.callbacks import EarlyStopping
from omegaconf import OmegaConf

from attention_lab.core.machine import cpu_model
from attention_lab.infer.tokenization import PAD


class NonFiniteLossError(FloatingPointError):
    """Training produced a NaN/inf loss: the run stops instead of saving a broken model."""


def validations(trainer: pl.Trainer) -> int:
    """Validations so far, counted at the end of one: epochs of all the training labels (a share f
    of them validates every 1/f epochs)."""
    return (trainer.current_epoch + 1) // max(1, trainer.check_val_every_n_epoch or 1)


def monitored(cfg) -> tuple[str, str]:
    """The validation metric a run stops on and keeps its checkpoint by, and its Lightning mode: the
    metric the task is tuned and judged on (tune.metric, tune.direction: classify val/accuracy, max;
    translate and caption val/loss, min)."""
    tune = cfg.get("tune") or {}
    return tune.get("metric") or "val/loss", "max" if tune.get("direction") == "maximize" else "min"


def improved(value: float, best: float, min_delta: float, mode: str) -> bool:
    """`value` beats `best` by more than min_delta in the direction of `mode` ("min" or "max")."""
    return value > best + min_delta if mode == "max" else value < best - min_delta


class EarlyStoppingAfter(EarlyStopping):
    """Lightning's EarlyStopping on `monitor` (train.module.monitored: the task's tune.metric,
    `mode` its direction) that neither counts nor stops before `start` validations: a run still on
    its initial plateau is not taken for converged (Luong et al. 2015 §4.1 start halving after epoch
    5)."""

    def __init__(
        self,
        patience: int,
        min_delta: float,
        start: int,
        monitor: str = "val/loss",
        mode: str = "min",
    ):
        # min_delta's sign: by mode
        super().__init__(monitor, patience=patience, min_delta=min_delta, mode=mode)
        self.start = start

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking or validations(trainer) < self.start:
            return
        super().on_validation_end(trainer, pl_module)

    # where it checks
    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if validations(trainer) < self.start:  # when every epoch validates
            return
        super().on_train_epoch_end(trainer, pl_module)


class PlateauStep(pl.Callback):
    """TaskModule.update_schedule after each validation, before a checkpoint is saved there
    (Lightning runs checkpoint callbacks after the others, and the module's own on_validation_end
    after every callback): a run resumed from a checkpoint taken at a validation (a share of the
    labels, pretraining) goes on at the rate it had."""

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if callable(update := getattr(pl_module, "update_schedule", None)):
            update()


class TaskModule(pl.LightningModule):
    """cfg (resolved dict) -> self.cfg and self.model = instantiate(cfg.model, vocab_size, pad_id,
    **model_kwargs)."""

    def __init__(self, cfg: dict, vocab_size: int, **model_kwargs):
        super().__init__()
        self.save_hyperparameters(logger=False)  # the stage logs the flattened config once per run
        self.cfg = OmegaConf.create(cfg)
        self.model = self.build_model(vocab_size, **model_kwargs)
        # tokens_seen: this process's, since fit began
        self.tokens_seen, self.train_seconds, self._t0 = 0, 0.0, None
        self.tokens_before = 0  # every process's tokens before a resumed run's checkpoint
        # the CPUs that trained this run, in order (one more each time it resumes on another)
        self.machines = [cpu_model()]
        # the validation metric the plateau schedule watches
        self.monitor, self.mode = monitored(self.cfg)
        # train.schedule "plateau": the rate's factor and the best value of the monitored metric so
        # far
        self.lr_scale, self.best_val = 1.0, (-math.inf if self.mode == "max" else math.inf)

    def build_model(self, vocab_size: int, **model_kwargs) -> torch.nn.Module:
        """The family's model from conf/model/<family>.yaml."""
        return instantiate(self.cfg.model, vocab_size=vocab_size, pad_id=PAD, **model_kwargs)

    def check_finite(self, loss: torch.Tensor) -> None:
        if not torch.isfinite(loss):
            raise NonFiniteLossError(
                f"non-finite training loss ({loss.item()}) at epoch {self.current_epoch}, "
                f"step {self.global_step}; lower train.lr or raise train.clip"
            )

    def on_train_start(self) -> None:
        # a run resumed inside an epoch (or at its end) gets no epoch start hook for it
        self.on_train_epoch_start()

    def on_train_epoch_start(self) -> None:
        # Lightning calls set_epoch on a loader's sampler, not on its batch sampler (our
        # BucketBatchSampler): without this every epoch would see the same batches in the same
        # order. Before the epoch's iterator is made.
        batches = getattr(self.trainer.train_dataloader, "batch_sampler", None)
        if callable(getattr(batches, "set_epoch", None)):
            batches.set_epoch(self.current_epoch)
        self._t0 = time.perf_counter()

    def on_train_epoch_end(self) -> None:
        self.train_seconds += time.perf_counter() - self._t0

    def configure_optimizers(self):
        """Adam with linear warm-up, then (train.schedule) `plateau`: the rate times train.decay
        after each validation that improves the monitored metric (val/loss; classify val/accuracy)
        by less than train.min_delta, the step before early stopping (Luong et al. 2015 §4.1
        halve the rate, Bahdanau et al. and Vaswani et al. stop on the validation set); or `cosine`:
        decay to 5% over the planned steps (max_epochs)."""
        t = self.cfg.train
        opt = torch.optim.Adam(self.parameters(), lr=t.lr, weight_decay=t.weight_decay)
        warmup, total = max(1, t.warmup_steps), max(2, int(self.trainer.estimated_stepping_batches))
        plateau = t.get("schedule", "cosine") == "plateau"

        def factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup * (self.lr_scale if plateau else 1.0)
            if plateau:
                return self.lr_scale
            progress = min(1.0, (step - warmup) / max(1, total - warmup))
            return 0.05 + 0.95 * 0.5 * (1.0 + math.cos(math.pi * progress))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    def update_schedule(self) -> None:
        """train.schedule `plateau`, after each validation (PlateauStep): from validation
        train.min_epochs on, one whose monitored metric (self.monitor: val/loss, or the task's
        tune.metric) does not beat the best by train.min_delta multiplies the rate by train.decay
        (from the next step). The same on every process (the value is averaged)."""
        t = self.cfg.train
        if (
            self.trainer.sanity_checking
            or t.get("schedule", "cosine") != "plateau"
            or validations(self.trainer) < t.get("min_epochs", 0)
        ):
            return
        value = self.trainer.callback_metrics.get(self.monitor)
        if value is None:
            return
        value = float(
            self.trainer.strategy.reduce(
                value.detach().to(self.trainer.strategy.root_device), reduce_op="mean"
            )
        )
        if improved(value, self.best_val, t.min_delta, self.mode):
            self.best_val = value
        else:
            self.lr_scale *= t.decay

    def total_tokens(self) -> int:
        """Tokens trained on by every process since the run began. A collective under data
        parallelism: every process calls it (Lightning saves checkpoints on every process, writing
        on rank 0 only)."""
        # its root device, not self.device: after fit the module is back on the CPU
        strategy = self.trainer.strategy
        mine = torch.tensor(
            float(self.tokens_seen), dtype=torch.float64, device=strategy.root_device
        )
        return self.tokens_before + int(strategy.reduce(mine, reduce_op="sum").item())

    # Exact resume: the global RNG (dropout) is saved with the checkpoint and restored on load;
    # under data parallelism every process's state (each drew its own masks), restored to the
    # process of the same rank.
    def on_save_checkpoint(self, checkpoint: dict) -> None:
        checkpoint["torch_rng_state"] = torch.get_rng_state()
        # dropout on a GPU draws from its own generator
        if torch.cuda.is_available() and self.device.type == "cuda":
            checkpoint["cuda_rng_state"] = torch.cuda.get_rng_state(self.device)
        if self.trainer.world_size > 1:
            states = self.trainer.strategy.all_gather(
                torch.get_rng_state().to(self.trainer.strategy.root_device)
            )
            # own storage, see below
            checkpoint["torch_rng_states"] = [state.cpu().clone() for state in states]
        checkpoint["tokens_seen"], checkpoint["train_seconds"] = (
            self.total_tokens(),
            self.train_seconds,
        )
        checkpoint["lr_scale"], checkpoint["best_val"] = self.lr_scale, self.best_val
        checkpoint["machines"] = self.machines

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        states = checkpoint.get("torch_rng_states")
        if (
            states is not None
            and self._trainer is not None
            and len(states) == self.trainer.world_size
        ):
            # a copy: torch.set_rng_state reads a view at a storage offset from its storage's start
            # (a segfault)
            torch.set_rng_state(states[self.trainer.global_rank].clone())
        elif "torch_rng_state" in checkpoint:
            torch.set_rng_state(checkpoint["torch_rng_state"])
        if "cuda_rng_state" in checkpoint and torch.cuda.is_available():
            torch.cuda.set_rng_state(checkpoint["cuda_rng_state"].cpu(), self.device)
        self.tokens_before, self.tokens_seen = checkpoint.get("tokens_seen", 0), 0
        self.train_seconds = checkpoint.get("train_seconds", 0.0)
        # a checkpoint from before machines were recorded: its CPU is not known
        before, here = checkpoint.get("machines", ["unknown"]), self.machines[-1]
        self.machines = before if here == before[-1] else [*before, here]
        self.lr_scale, self.best_val = (
            checkpoint.get("lr_scale", 1.0),
            checkpoint.get("best_val", self.best_val),
        )
