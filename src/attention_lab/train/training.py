"""Training machinery that the train stage (stages/train.py) and tuning (train/tuning.py) share:
`train_one` trains (or resumes) one run, `train_run` does one of a task's runs (core.task.Run: its
config, its folder, and the tune stage's best trial taken instead when it was this very run),
`run_key` says what makes two runs the same, and `keep_for_reuse` / `reuse_tuned_run` write and read
a kept trial's reuse.json. How a run resumes after a stop, and data parallel: docs/design.md, "Why
the modules are as they are"."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import lightning.pytorch as pl
from hydra.utils import instantiate
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint, Timer
from omegaconf import DictConfig, OmegaConf

from attention_lab.core import tracking
from attention_lab.core.config import ConfigError
from attention_lab.core.files import atomic_path, read_json, write_json, write_text
from attention_lab.core.paths import partial_dir, seed_dir, trials_dir
from attention_lab.core.task import Run, Task
from attention_lab.train.checkpoints import CheckpointError, count_parameters, read_checkpoint
from attention_lab.train.module import EarlyStoppingAfter, PlateauStep, monitored
from attention_lab.train.progress import progress_callback

REUSE_FILE = "reuse.json"  # in a kept tuning trial's folder: {"trial": number, "key": its run_key}


def trainer_arguments(cfg: DictConfig) -> dict:
    """cfg.trainer as Trainer keyword arguments; a `strategy` with a `_target_` (e.g. DDPStrategy
    with its process group backend) is instantiated."""
    options = OmegaConf.to_container(cfg.trainer, resolve=True)
    if isinstance(options.get("strategy"), dict):
        options["strategy"] = instantiate(options["strategy"])
    return options


def stopped_by(trainer: pl.Trainer, early: EarlyStopping) -> str:
    """What ended a finished fit: `early stopping` (the monitored metric, train.module.monitored,
    did not improve by train.min_delta for train.patience validations), `time limit`
    (train.max_minutes), `update cap` (the Trainer's max_steps: pretrain.max_updates) or `epoch cap`
    (train.max_epochs)."""
    if early.stopped_epoch > 0:
        return "early stopping"
    timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
    if timer is not None and timer.time_remaining() is not None and timer.time_remaining() <= 0:
        return "time limit"
    if 0 < trainer.max_steps <= trainer.global_step:
        return "update cap"
    return "epoch cap"


class ValCurve(pl.Callback):
    """The monitored validation metric after every validation, `[[epoch, value], ...]` (epochs
    counted from 1), for train.json's `val_curve`; kept in the checkpoint so a resumed run's curve
    is whole. Reads what was logged only."""

    def __init__(self, monitor: str):
        self.monitor, self.curve = monitor, []

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        value = trainer.callback_metrics.get(self.monitor)
        if not trainer.sanity_checking and value is not None:
            self.curve.append([trainer.current_epoch + 1, round(float(value), 5)])

    def state_dict(self) -> dict:
        return {"curve": self.curve}

    def load_state_dict(self, state_dict: dict) -> None:
        self.curve = [list(point) for point in state_dict.get("curve", [])]


def train_one(
    cfg: DictConfig,
    task: Task,
    seed: int,
    out: Path,
    partial: Path,
    callbacks: tuple[pl.Callback, ...] = (),
    build=None,
    stage: str = "train",
    tags: dict | None = None,
    name: str | None = None,
    move: bool = True,
    **trainer_options,
) -> dict | None:
    """Train (or resume, or take as finished: docs/design.md) one (family, seed) run in `partial`,
    then move it to `out` (move=False: leave it finished in `partial`, for `publish`); returns the
    training summary on the global rank 0 and None on the other processes of a data-parallel run
    (which write nothing).

    `build(cfg, seed) -> (module, datamodule)` defaults to the task's `build` hook (core.task); tags
    and name go to the MLflow run (a tuning trial nests under its study's run).
    """
    OmegaConf.set_struct(cfg, False)
    cfg.seed = seed
    # an unreachable tracking server fails here, before anything is trained or written
    tracking.experiment_id(cfg)
    run_file, config_file = partial / "run.json", partial / "config.yaml"
    key = run_key(cfg, seed, stage)
    # every process decides the same: rank 0 only deletes or writes these files after deciding, and
    # a process that looks later sees either the same stopped run or no last.ckpt
    same = holds(partial, key)
    if finished(partial, key):  # finished before the stop: taken as it is
        if not is_global_zero():
            return None
        print(f"{cfg.family} seed {seed}: finished before the stop, kept ({partial})")
        if move:
            place(partial, out)
        return read_json((out if move else partial) / "train.json")
    resume = same and (partial / "last.ckpt").is_file()
    pl.seed_everything(seed, workers=True)
    module, dm = (build or task.build)(cfg, seed)
    config_text = run_config(cfg, seed)
    logger = tracking.lightning_logger(
        cfg,
        task,
        run_id=read_json(run_file)["run_id"] if resume else None,
        # lazy: the run starts on first use
        stage=stage,
        tags=tags,
        name=name,
    )
    # the task's tune.metric: stop on it and keep its best checkpoint (best.ckpt)
    monitor, mode = monitored(cfg)
    ckpt = ModelCheckpoint(
        dirpath=partial,
        filename="best",
        monitor=monitor,
        mode=mode,
        save_last=True,
        save_top_k=1,
        auto_insert_metric_name=False,
        enable_version_counter=False,
    )
    trainer = pl.Trainer(
        **trainer_arguments(cfg),
        max_epochs=cfg.train.max_epochs,
        max_time={"minutes": cfg.train.max_minutes},
        gradient_clip_val=cfg.train.clip,
        logger=logger,
        default_root_dir=partial,
        enable_progress_bar=sys.stdout.isatty(),
        # the datamodules shard each global batch themselves
        use_distributed_sampler=False,
        callbacks=[
            ckpt,
            early := EarlyStoppingAfter(
                cfg.train.patience,
                cfg.train.min_delta,
                cfg.train.get("min_epochs", 0),
                monitor,
                mode,
            ),
            PlateauStep(),
            progress_callback(stage, cfg.family, seed, monitor),
            curve := ValCurve(monitor),
            *callbacks,
        ],
        **trainer_options,
    )
    if stage == "tune" and trainer.world_size > 1:
        raise ConfigError(
            "tuning runs one process per trial (Optuna's pruning callback and study loop are not"
            " data parallel): tune with trainer=cpu or trainer=gpu and scale out with parallel"
            " workers"
        )
    # the ranks are known once the Trainer exists (env of Lightning, torchrun or SLURM)
    if trainer.is_global_zero:
        # a stopped run of other settings, data or code (or threads): start over
        if partial.is_dir() and not resume:
            if run_file.is_file():
                print(
                    f"not resuming {partial}: "
                    + (
                        "stopped before its first checkpoint"
                        if same
                        else (
                            "another run stopped there (its config, data, code or threads differ"
                            " from this run's)"
                        )
                    )
                )
            shutil.rmtree(partial)
        partial.mkdir(parents=True, exist_ok=True)
        if resume:
            print(f"resuming {cfg.family} seed {seed} from {partial / 'last.ckpt'}")
        else:
            logger.log_hyperparams(tracking.flatten(cfg))
            write_text(config_file, config_text)
            logger.experiment.log_artifact(logger.run_id, str(partial / "config.yaml"))
            # last: it marks the partial run as this one
            write_json(run_file, {"run_id": logger.run_id, "key": key})
    if resume:  # Lightning's own load names no file and reads flipped bytes without complaint
        try:
            read_checkpoint(partial / "last.ckpt")
        except CheckpointError as err:
            raise CheckpointError(
                f"{err}; or delete {partial} to train this run from the start"
            ) from err

    trainer.fit(module, dm, ckpt_path=str(partial / "last.ckpt") if resume else None)
    # stopped by the time budget before any validation (the same on every process)
    if not ckpt.best_model_path:
        trainer.save_checkpoint(partial / "best.ckpt")
    tokens = module.total_tokens()  # a collective: every process counts its share
    if not trainer.is_global_zero:
        return None

    # best.ckpt's value of the monitored metric
    summary = {
        "family": cfg.family,
        "seed": seed,
        "params": count_parameters(module.model),
        "epochs": trainer.current_epoch,
        "steps": trainer.global_step,
        "stopped_by": stopped_by(trainer, early),
        "train_seconds": round(module.train_seconds, 2),
        "train_tokens_per_s": round(tokens / max(module.train_seconds, 1e-9), 1),
        "best_val": float(ckpt.best_model_score) if ckpt.best_model_score is not None else None,
        "best_val_metric": monitor,
        "machines": module.machines,
    }
    summary.update(task.train_summary(cfg, dm))  # the task's own figures (classify: its labels)
    if trainer.world_size > 1:
        summary.update(
            processes=trainer.world_size,
            global_batch_size=cfg.train.batch_size * trainer.world_size,
        )
    summary["last_val"] = {
        k: round(float(v), 5) for k, v in trainer.callback_metrics.items() if k.startswith("val/")
    }
    # the monitored metric by epoch, every validation: the report's curves
    summary["val_curve"] = curve.curve
    write_json(partial / "train.json", summary)
    logger.log_metrics(
        {
            "train_seconds": summary["train_seconds"],
            "train_tokens_per_s": summary["train_tokens_per_s"],
            "params": summary["params"],
        }
    )
    logger.finalize("FINISHED")
    if move:
        place(partial, out)
    return summary


def holds(partial: Path, key: str) -> bool:
    """`partial` holds a run (stopped or finished) whose run_key is `key`."""
    try:
        return read_json(partial / "run.json").get("key") == key
    except (FileNotFoundError, ValueError):  # none yet, or rank 0 just removed a stale one
        return False


def finished(partial: Path, key: str) -> bool:
    """`partial` holds the finished run whose run_key is `key` (its train.json written)."""
    return holds(partial, key) and (partial / "train.json").is_file()


def is_global_zero() -> bool:
    """This process is the global rank 0 (or the only one), by the launcher's environment
    (Lightning, torchrun, SLURM), before any Trainer exists."""
    from lightning.fabric.utilities.rank_zero import rank_zero_only

    return rank_zero_only.rank == 0


def place(partial: Path, out: Path) -> None:
    """A finished run's folder moved from `partial` onto `out`."""
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial.rename(out)


def publish(partial: Path, out: Path) -> None:
    """A finished run (train_one with move=False) hard-linked from `partial` into `out`, which
    appears whole; `partial` stays until the caller has published all its runs (a stop in between
    loses none: DVC clears the stage's output on its next run, not the partial folders)."""
    with atomic_path(out) as tmp:
        shutil.copytree(partial, tmp, copy_function=os.link)


def run_config(cfg: DictConfig, seed: int) -> str:
    """The resolved config of cfg's run at `seed`, as its config.yaml records it."""
    run_cfg = cfg.copy()
    OmegaConf.set_struct(run_cfg, False)
    run_cfg.seed = seed
    return OmegaConf.to_yaml(run_cfg, resolve=True)


def run_key(cfg: DictConfig, seed: int, stage: str = "train") -> str:
    """What decides a run's every figure on a given machine: its config at `seed`, the prepared
    data, the code that trains it (the `stage` command's files: a tuning trial is trained by the
    train stage's code) and the intra-op threads (their sums' order); two runs with one key are the
    same run (tests/stages)."""
    import torch

    code = tracking.code_hash(cfg, "pretrain" if stage == "pretrain" else "train")
    what = [run_config(cfg, seed), tracking.data_hash(cfg), code, str(torch.get_num_threads())]
    return hashlib.sha256("\0".join(what).encode()).hexdigest()


def run_settings(cfg: DictConfig, run: Run) -> DictConfig:
    """cfg with the run's own settings (Run.settings: e.g. classify's share of the labels and its
    epochs)."""
    run_cfg = cfg.copy()
    OmegaConf.set_struct(run_cfg, False)
    for key, value in run.settings:
        OmegaConf.update(run_cfg, key, value)
    return run_cfg


def run_partial(cfg: DictConfig, run: Run) -> Path:
    """Where one of the task's runs works, and waits finished until the stage publishes it
    (paths.partial_dir)."""
    return partial_dir(run.out, seed_dir(cfg, run.seed).parent)


def train_run(cfg: DictConfig, task: Task, run: Run) -> dict | None:
    """One of the task's runs of the family (Task.runs), left finished in run_partial for `publish`
    (the stage's last step); the tune stage's best trial when it was this very run
    (reuse_tuned_run)."""
    run_cfg = run_settings(cfg, run)
    if (summary := reuse_tuned_run(run_cfg, task, run.seed, run_partial(cfg, run))) is not None:
        return summary
    return train_one(
        run_cfg,
        task,
        run.seed,
        run.out,
        run_partial(cfg, run),
        move=False,
        check_val_every_n_epoch=run.validate_every,
    )


def keep_for_reuse(out: Path, trial: int, cfg: DictConfig, seed: int) -> None:
    """Mark a complete tuning trial's run in `out` (cfg at `seed`) as one the train stage may take
    (reuse_tuned_run)."""
    write_json(out / REUSE_FILE, {"trial": trial, "key": run_key(cfg, seed)})


def reuse_tuned_run(cfg: DictConfig, task: Task, seed: int, out: Path) -> dict | None:
    """The tune stage's best trial (kept in tuned/.trials/<family>, keep_for_reuse) as this run when
    it is this very run (the same run_key: config and seed, data, code, threads), so it is not
    trained twice: its checkpoints and train.json are copied to `out` (the run's partial folder),
    and a training run in MLflow gets its params and curves (tags `tuning_trial`, `tuning_run_id`);
    None when no kept trial is this run."""
    key = None
    for kept in sorted(trials_dir(cfg).glob(f"trial*/{REUSE_FILE}")):
        key = key or run_key(cfg, seed)
        if read_json(kept)["key"] == key:
            break
    else:
        return None
    if finished(out, key):  # taken before a stop: train_one keeps it
        return None
    kept, trial = kept.parent, read_json(kept)["trial"]
    source = read_json(kept / "run.json")["run_id"]
    OmegaConf.set_struct(cfg, False)
    cfg.seed = seed
    run_id = tracking.copy_run(
        cfg, task, source, tags={"tuning_trial": str(trial), "tuning_run_id": source}
    )
    with atomic_path(out) as tmp:
        shutil.copytree(kept, tmp, ignore=shutil.ignore_patterns(REUSE_FILE))
        write_json(tmp / "run.json", {"run_id": run_id, "key": key})
    print(
        f"{cfg.family} seed {seed}: tuning trial {trial} was this very run (config, data, code,"
        f" threads); taken, not trained again (MLflow run {run_id}, from {source})"
    )
    return read_json(out / "train.json")
