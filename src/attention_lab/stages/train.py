"""DVC stages `train_<task>@<family>` and `finetune_<task>@<family>`: train one family for every seed (and, in
classify, every fraction of the training labels in train.label_fractions) -> models/<family>/checkpoints/[labels<p>/]
seed<k>/{last,best}.ckpt, train.json, run.json. A pretrained family starts from models/pretrained/<family>.

Work happens in models/<family>/.partial-checkpoints/... (common.partial_dir) and is renamed into place when done, so a failed run leaves no
half-written output; rerunning resumes from the partial run's last.ckpt (same metrics as an uninterrupted run).

Side by side (`train.processes`: N): the runs (seeds, fractions) go to N spawned worker processes, one thread each.

Data parallel (`trainer=ddp`, conf/trainer/ddp.yaml): Lightning's "ddp" strategy starts this same command once more per
extra process (`python -m attention_lab.stages.train <the same arguments>`, LOCAL_RANK set), or torchrun / SLURM start
every process; each runs main() through the same seeds. Only the global rank 0 writes: the MLflow run (Lightning's
MLFlowLogger is a no-op elsewhere), run.json, config.yaml, the checkpoints, train.json and the final rename. Every
process takes part in each collective (fit, checkpoint saves, the token count), so none is left waiting.
"""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import lightning.pytorch as pl
from hydra.utils import instantiate
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint, Timer
from omegaconf import DictConfig, OmegaConf

from attention_lab.core import tracking
from attention_lab.core.checkpoints import CheckpointError, count_parameters, read_checkpoint
from attention_lab.core.config import ConfigError
from attention_lab.core.files import atomic_path, read_json, write_json, write_text
from attention_lab.core.module import EarlyStoppingAfter
from attention_lab.core.paths import partial_dir, seed_dir, trials_dir
from attention_lab.core.progress import progress_callback
from attention_lab.core.task import get_task
from attention_lab.stages.common import run_stage, stage_config


def trainer_arguments(cfg: DictConfig) -> dict:
    """cfg.trainer as Trainer keyword arguments; a `strategy` with a `_target_` (e.g. DDPStrategy with its process
    group backend) is instantiated."""
    options = OmegaConf.to_container(cfg.trainer, resolve=True)
    if isinstance(options.get("strategy"), dict):
        options["strategy"] = instantiate(options["strategy"])
    return options


def stopped_by(trainer: pl.Trainer, early: EarlyStopping) -> str:
    """What ended a finished fit: `early stopping` (val/loss did not improve by train.min_delta for train.patience
    validations), `time limit` (train.max_minutes), `update cap` (the Trainer's max_steps: pretrain.max_updates) or
    `epoch cap` (train.max_epochs)."""
    if early.stopped_epoch > 0:
        return "early stopping"
    timer = next((c for c in trainer.callbacks if isinstance(c, Timer)), None)
    if timer is not None and timer.time_remaining() is not None and timer.time_remaining() <= 0:
        return "time limit"
    if 0 < trainer.max_steps <= trainer.global_step:
        return "update cap"
    return "epoch cap"


def train_one(cfg: DictConfig, seed: int, out: Path, partial: Path, callbacks: tuple[pl.Callback, ...] = (),
              build=None, stage: str = "train", tags: dict | None = None, name: str | None = None,
              **trainer_options) -> dict | None:
    """Train (or resume) one (family, seed) run in `partial`, then move it to `out`; returns the training summary on
    the global rank 0 and None on the other processes of a data-parallel run (which write nothing).

    `build(cfg, seed) -> (module, datamodule)` defaults to the task's `build` hook (core.task); tags and name go to the
    MLflow run (a tuning trial nests under its study's run).
    """
    OmegaConf.set_struct(cfg, False)
    cfg.seed = seed
    tracking.experiment_id(cfg)  # an unreachable tracking server fails here, before anything is trained or written
    pl.seed_everything(seed, workers=True)
    module, dm = (build or get_task(cfg.task.name).build)(cfg, seed)

    run_file, config_file = partial / "run.json", partial / "config.yaml"
    config_text = run_config(cfg, seed)
    # every process decides the same: rank 0 only deletes or writes these files after deciding, and a process that
    # looks later sees either the same crashed run or no last.ckpt
    resume = (partial / "last.ckpt").is_file() and run_file.is_file()
    try:
        same = config_file.read_text(encoding="utf-8") == config_text
    except FileNotFoundError:  # none yet, or rank 0 just removed a stale one
        same = False
    logger = tracking.lightning_logger(cfg, run_id=read_json(run_file)["run_id"] if resume and same else None,
                                       stage=stage, tags=tags, name=name)  # lazy: the run starts on first use
    ckpt = ModelCheckpoint(dirpath=partial, filename="best", monitor="val/loss", mode="min", save_last=True,
                           save_top_k=1, auto_insert_metric_name=False, enable_version_counter=False)
    trainer = pl.Trainer(**trainer_arguments(cfg), max_epochs=cfg.train.max_epochs,
                         max_time={"minutes": cfg.train.max_minutes}, gradient_clip_val=cfg.train.clip,
                         logger=logger, default_root_dir=partial, enable_progress_bar=sys.stdout.isatty(),
                         use_distributed_sampler=False,  # the datamodules shard each global batch themselves
                         callbacks=[ckpt, early := EarlyStoppingAfter(cfg.train.patience, cfg.train.min_delta,
                                                                     cfg.train.get("min_epochs", 0)),
                                    progress_callback(stage, cfg.family, seed),
                                    *callbacks], **trainer_options)
    if stage == "tune" and trainer.world_size > 1:
        raise ConfigError("tuning runs one process per trial (Optuna's pruning callback and study loop are not "
                          "data parallel): tune with trainer=cpu or trainer=gpu and scale out with parallel workers")
    if trainer.is_global_zero:  # the ranks are known once the Trainer exists (env of Lightning, torchrun or SLURM)
        partial.mkdir(parents=True, exist_ok=True)
        if resume and not same:  # a crashed run of other settings (params changed since): start over
            print(f"not resuming {partial}: its config.yaml differs from this run's")
            for stale in ("last.ckpt", "best.ckpt", "run.json", config_file.name):
                (partial / stale).unlink(missing_ok=True)
        if resume and same:
            print(f"resuming {cfg.family} seed {seed} from {partial / 'last.ckpt'}")
        else:
            write_json(run_file, {"run_id": logger.run_id})
            logger.log_hyperparams(tracking.flatten(cfg))
            write_text(config_file, config_text)
            logger.experiment.log_artifact(logger.run_id, str(partial / "config.yaml"))
    resume = resume and same
    if resume:  # Lightning's own load names no file and reads flipped bytes without complaint
        try:
            read_checkpoint(partial / "last.ckpt")
        except CheckpointError as err:
            raise CheckpointError(f"{err}; or delete {partial} to train this run from the start") from err

    trainer.fit(module, dm, ckpt_path=str(partial / "last.ckpt") if resume else None)
    if not ckpt.best_model_path:  # stopped by the time budget before any validation (the same on every process)
        trainer.save_checkpoint(partial / "best.ckpt")
    tokens = module.total_tokens()  # a collective: every process counts its share
    if not trainer.is_global_zero:
        return None

    summary = {"family": cfg.family, "seed": seed, "params": count_parameters(module.model),
               "epochs": trainer.current_epoch, "steps": trainer.global_step, "stopped_by": stopped_by(trainer, early),
               "train_seconds": round(module.train_seconds, 2),
               "train_tokens_per_s": round(tokens / max(module.train_seconds, 1e-9), 1),
               "best_val_loss": float(ckpt.best_model_score) if ckpt.best_model_score is not None else None}
    if "label_fraction" in cfg.train:
        summary.update(label_fraction=cfg.train.label_fraction, train_documents=len(dm.splits["train"]))
    if trainer.world_size > 1:
        summary.update(processes=trainer.world_size, global_batch_size=cfg.train.batch_size * trainer.world_size)
    summary["last_val"] = {k: round(float(v), 5) for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
    write_json(partial / "train.json", summary)
    logger.log_metrics({"train_seconds": summary["train_seconds"],
                        "train_tokens_per_s": summary["train_tokens_per_s"], "params": summary["params"]})
    logger.finalize("FINISHED")
    if out.exists():
        shutil.rmtree(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial.rename(out)
    return summary


def run_config(cfg: DictConfig, seed: int) -> str:
    """The resolved config of cfg's run at `seed`, as its config.yaml records it."""
    run_cfg = cfg.copy()
    OmegaConf.set_struct(run_cfg, False)
    run_cfg.seed = seed
    return OmegaConf.to_yaml(run_cfg, resolve=True)


def run_key(cfg: DictConfig, seed: int) -> str:
    """What decides a run's every figure on a given machine: its config at `seed`, the prepared data, the package's
    code and the intra-op threads (their sums' order); two runs with one key are the same run (tests/stages)."""
    import torch

    what = [run_config(cfg, seed), tracking.data_hash(cfg), tracking.code_hash(), str(torch.get_num_threads())]
    return hashlib.sha256("\0".join(what).encode()).hexdigest()


def train_run(cfg: DictConfig, fraction: float, seed: int) -> dict | None:
    """One (label fraction, seed) run of the family (on all labels, the tune stage's best trial when it was this very
    run: reuse_tuned_run)."""
    run_cfg = cfg.copy()
    OmegaConf.set_struct(run_cfg, False)
    if "label_fractions" in cfg.train:  # tasks with labels to hold back (classify)
        run_cfg.train.label_fraction = fraction
    # a fraction f of the labels: 1/f times the epochs, validated every 1/f epochs, so the schedule (steps,
    # validations, early-stopping patience) is the same as on all labels
    every = max(1, round(1 / fraction))
    run_cfg.train.max_epochs = cfg.train.max_epochs * every
    out = seed_dir(cfg, seed, fraction=fraction)
    if fraction == 1 and (summary := reuse_tuned_run(run_cfg, seed, out)) is not None:
        return summary
    return train_one(run_cfg, seed, out, partial_dir(out, seed_dir(cfg, seed).parent), check_val_every_n_epoch=every)


def reuse_tuned_run(cfg: DictConfig, seed: int, out: Path) -> dict | None:
    """The tune stage's best trial (kept in tuned/.trials/<family>) as this run when it is this very run (the same
    run_key: config and seed, data, code, threads), so it is not trained twice: its checkpoints and train.json are
    copied to `out`, and a training run in MLflow gets its params and curves (tags `tuning_trial`,
    `tuning_run_id`); None when no kept trial is this run."""
    key = None
    for kept in sorted(trials_dir(cfg).glob("trial*/reuse.json")):
        key = key or run_key(cfg, seed)
        if read_json(kept)["key"] == key:
            break
    else:
        return None
    kept, trial = kept.parent, read_json(kept)["trial"]
    source = read_json(kept / "run.json")["run_id"]
    OmegaConf.set_struct(cfg, False)
    cfg.seed = seed
    run_id = tracking.copy_run(cfg, source, tags={"tuning_trial": str(trial), "tuning_run_id": source})
    with atomic_path(out) as tmp:
        shutil.copytree(kept, tmp, ignore=shutil.ignore_patterns("reuse.json"))
        write_json(tmp / "run.json", {"run_id": run_id})
    print(f"{cfg.family} seed {seed}: tuning trial {trial} was this very run (config, data, code, threads); taken, "
          f"not trained again (MLflow run {run_id}, from {source})")
    return read_json(out / "train.json")


def side_by_side(argv: list[str], fraction: float, seed: int) -> dict | None:
    """train_run in a worker process of train.processes (the stage's config, rebuilt from its arguments)."""
    return train_run(stage_config(argv), fraction, seed)


def one_thread() -> None:
    """A worker of train.processes: one intra-op thread (two processes on two cores beat one on both: their kernels
    are too small to share a core's worth of work), and killed with its parent (Linux), so a killed stage leaves no
    worker writing into a partial run that its re-run resumes."""
    import ctypes
    import signal

    import torch

    torch.set_num_threads(1)
    if sys.platform == "linux":
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def main(argv: list[str]) -> None:
    cfg = stage_config(argv)
    runs = [(fraction, seed) for fraction in cfg.train.get("label_fractions", [1.0]) for seed in cfg.seeds]
    processes = min(cfg.train.processes, len(runs))
    if processes > 1 and cfg.trainer.get("strategy") not in (None, "auto"):
        raise ConfigError(f"train.processes = {cfg.train.processes} trains runs side by side on one machine; with a "
                          "data-parallel trainer set train.processes=1")
    if processes <= 1:
        summaries = (train_run(cfg, fraction, seed) for fraction, seed in runs)
    else:  # independent runs side by side, each deterministic on its one thread
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        pool = ProcessPoolExecutor(processes, mp_context=get_context("spawn"), initializer=one_thread)
        with pool:
            summaries = list(pool.map(side_by_side, *zip(*[(argv, f, s) for f, s in runs], strict=True)))
    for summary in summaries:
        if summary is not None:  # the other processes of a data-parallel run print nothing
            print(summary)


if __name__ == "__main__":  # also what Lightning's ddp launcher runs for every extra process
    run_stage("train", main, sys.argv[1:], CheckpointError)
