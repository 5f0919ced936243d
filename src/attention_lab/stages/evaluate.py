"""DVC stage `evaluate_<task>@<family>`: score one family on the test split, every run the task
lists (Task.runs) -> metrics/<task>/<family>.json (the test/* and train/* numbers: DVC's metrics),
results/<task>/<family>/ (details.json, the rest of the record: seeds, per-seed scores, the config
that trained, the study from tuned/<family>.yaml for the report's tuning section, validation curves;
the data plots curve_seed<k>.csv and by_length.csv; any page the task draws, classify's HTML),
plots/<task>/<family>/*.png (DVC's image plots), predictions/<task>/<family>.json (per-example
outputs of every seed, for the report's paired tests) (+ MLflow metrics and artifacts on the
family's training runs); a task's variants of the runs (classify: shares of the training labels)
get a section of their own (Task.variants)."""

from __future__ import annotations

import shutil
import statistics
import sys
from pathlib import Path

import mlflow
import yaml
from omegaconf import DictConfig, OmegaConf

from attention_lab.core import tracking
from attention_lab.core.files import atomic_path, read_json, write_json
from attention_lab.core.paths import (
    plots_dir,
    predictions_path,
    pretrain_run_path,
    pretrained_dir,
    tuned_path,
)
from attention_lab.core.task import Run, Task, get_task
from attention_lab.results import records
from attention_lab.results.plots import NO_ATTENTION, no_attention
from attention_lab.results.significance import seed_interval
from attention_lab.stages.common import run_stage, stage_config
from attention_lab.train.checkpoints import CheckpointError

TRAIN_KEYS = (
    "lr",
    "batch_size",
    "warmup_steps",
    "schedule",
    "decay",
    "min_epochs",
    "patience",
    "min_delta",
    "max_epochs",
    "weight_decay",
    "label_smoothing",
    "penalty",
    "penalty_warmup",
    "clip",
)
IMAGES = (".png",)  # what plots/<task>/<family>/ keeps (image plots); other files go to results/


def trained_settings(config: dict) -> dict[str, object]:
    """A run's resolved config (its config.yaml) -> the settings a reader compares:
    train.{TRAIN_KEYS}, the teacher forcing schedule and every model.* key (dotted)."""
    train, model = config.get("train", {}), config.get("model", {})
    out = {f"train.{k}": train[k] for k in TRAIN_KEYS if k in train}
    if "teacher_forcing" in train:
        out["train.teacher_forcing"] = train["teacher_forcing"].get("schedule")
    out.update({f"model.{k}": v for k, v in model.items() if k != "_target_"})
    return out


def summarize(cfg: DictConfig, task: Task, per_seed: dict[str, dict], runs: list[Run]) -> dict:
    """Mean test/* scores over the runs' seeds, for the task's headline metrics also their sd and
    95% t-interval (`<metric>_sd`, `<metric>_ci95_low`, `<metric>_ci95_high`; absent with one seed),
    the mean train/* figures, the per-seed scores and validation curves (`val_curves`: {seed:
    {curve: [[epoch, value], ...], stopped_by}} of the monitored metric `val_metric`, from
    train.json)."""
    first = per_seed[str(cfg.seeds[0])]
    summary = {
        k: statistics.fmean(per_seed[s][k] for s in per_seed)
        for k, v in first.items()
        if isinstance(v, float)
    }
    for key in task.headline:
        spread = seed_interval([per_seed[s][key] for s in per_seed])
        if spread["sd"] is not None:
            summary.update(
                {
                    f"{key}_sd": spread["sd"],
                    f"{key}_ci95_low": spread["low"],
                    f"{key}_ci95_high": spread["high"],
                }
            )
    trained = [read_json(run.out / "train.json") for run in runs]
    for key in (
        "params",
        "train_seconds",
        "train_tokens_per_s",
        "epochs",
        "steps",
        "train_documents",
    ):
        if key in trained[0]:
            summary[f"train/{key}"] = statistics.fmean(t[key] for t in trained)
    # over the seeds
    summary["train/stopped_by"] = sorted({t.get("stopped_by", "unknown") for t in trained})
    # per seed, the CPUs that trained it (figures repeat bit for bit on the same CPU model alone)
    summary["machines"] = {
        str(run.seed): t.get("machines", ["unknown"]) for run, t in zip(runs, trained)
    }
    # the monitored metric by epoch, per seed: the report's val_curves.png
    if all("val_curve" in t for t in trained):
        summary["val_curves"] = {
            str(run.seed): {"curve": t["val_curve"], "stopped_by": t.get("stopped_by")}
            for run, t in zip(runs, trained)
        }
        summary["val_metric"] = trained[0].get("best_val_metric")
    summary.update(
        {k: v for k, v in first.items() if isinstance(v, str)},
        seeds=[run.seed for run in runs],
        per_seed=per_seed,
    )
    trained_config = OmegaConf.to_container(OmegaConf.load(runs[0].out / "config.yaml"))
    summary["trained_config"] = trained_settings(trained_config)
    return summary


def log_runs(
    cfg: DictConfig, per_seed: dict[str, dict], runs: list[Run], pictures: Path | None
) -> None:
    """The test scores (and pictures) into each run's MLflow training run (or its stand-in)."""
    for run in runs:
        with tracking.reopen_run(cfg, run.out):
            mlflow.log_metrics(
                {k: v for k, v in per_seed[str(run.seed)].items() if isinstance(v, float)}
            )
            if pictures is not None:
                mlflow.log_artifacts(str(pictures), artifact_path="plots")


def file_pictures(images: Path, pages: Path, family: str) -> None:
    """Keep a hook's images in `images`, move its other files to `pages`, or say it drew none."""
    # DVC loads every file of plots/<task>/<family>/ as an image plot; git keeps no empty folder
    for path in sorted(images.iterdir()):
        if path.suffix not in IMAGES:
            shutil.move(path, pages / path.name)
    if not any(images.iterdir()):
        no_attention(family, images / NO_ATTENTION)


def main(argv: list[str]) -> None:
    cfg = stage_config(argv)
    OmegaConf.set_struct(cfg, False)  # classify adds task.labels from the checkpoint
    task = get_task(cfg.task.name)
    # None: the family's main runs; then the task's variants, in order
    variants: dict[str | None, list[Run]] = {}
    for run in task.runs(cfg):
        variants.setdefault(run.variant, []).append(run)
    main_runs = variants.pop(None)
    with atomic_path(plots_dir(cfg)) as pictures, atomic_path(records.results_dir(cfg)) as pages:
        pictures.mkdir()
        pages.mkdir()
        per_seed, outputs = task.evaluate(cfg, pictures, main_runs)
        log_runs(cfg, per_seed, main_runs, pictures)  # what the hook drew, HTML pages included
        file_pictures(pictures, pages, cfg.family)
        summary = {"family": cfg.family, **summarize(cfg, task, per_seed, main_runs)}
        if (tuned := tuned_path(cfg)).is_file():  # the study, for the report's tuning section
            summary["tuning"] = {
                k: v
                for k, v in yaml.safe_load(tuned.read_text(encoding="utf-8")).items()
                if k in ("study", "trials")
            }
        # where the encoder came from, and its own pretraining's figures, for the report
        if cfg.get("pretrained"):
            summary["pretrain"] = {
                **read_json(pretrained_dir(cfg) / "pretrain.json"),
                **read_json(pretrain_run_path(cfg)),
            }
        for variant, runs in variants.items():
            scores, held = task.evaluate(cfg, None, runs)
            summary.setdefault(task.variants, {})[variant] = summarize(cfg, task, scores, runs)
            outputs.setdefault(task.variants, {})[variant] = held["seeds"]  # for paired tests
            log_runs(cfg, scores, runs, None)
        for name, result in [(None, summary), *summary.get(task.variants, {}).items()]:
            print(
                f"{cfg.family}{f' ({name})' if name else ''}: "
                + ", ".join(
                    f"{k}={v:.3f}"
                    for k, v in result.items()
                    if k.startswith("test/") and "_len_" not in k and isinstance(v, float)
                )
            )
        metrics, details = records.split(summary, task.variants)
        write_json(pages / records.DETAILS, details)
        metric = records.length_metric(next(iter(task.headline)))
        records.data_plots(pages, summary, cfg.task.buckets, metric)
    write_json(predictions_path(cfg), outputs)
    write_json(records.metrics_path(cfg), metrics)


if __name__ == "__main__":
    run_stage("evaluate", main, sys.argv[1:], CheckpointError)
