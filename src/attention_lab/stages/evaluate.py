"""DVC stage `evaluate_<task>@<family>`: score one family on the test split -> metrics/<task>/<family>.json,
plots/<task>/<family>/*, predictions/<task>/<family>.json (per-example outputs of every seed, for the report's paired
tests) (+ MLflow metrics and artifacts on the family's training run). The metrics carry the family's study from
tuned/<family>.yaml (its trials and the untuned default's full-run value) for the report's tuning section."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import mlflow
import yaml
from omegaconf import DictConfig, OmegaConf

from attention_lab.core import tracking
from attention_lab.core.checkpoints import CheckpointError
from attention_lab.core.config import TUNED_DIR
from attention_lab.core.files import atomic_path, read_json, write_json
from attention_lab.core.paths import predictions_path, pretrained_dir, seed_dir
from attention_lab.core.report import trained_settings
from attention_lab.core.significance import seed_interval
from attention_lab.core.task import get_task
from attention_lab.stages.common import run_stage, stage_config


def summarize(cfg: DictConfig, per_seed: dict[str, dict], fraction: float) -> dict:
    """Mean test/* scores over seeds, for the task's headline metrics also their sd and 95% t-interval
    (`<metric>_sd`, `<metric>_ci95_low`, `<metric>_ci95_high`; absent with one seed), the mean train/* figures, and
    the per-seed scores."""
    first = per_seed[str(cfg.seeds[0])]
    summary = {k: statistics.fmean(per_seed[s][k] for s in per_seed) for k, v in first.items() if isinstance(v, float)}
    for key in get_task(cfg.task.name).headline:
        spread = seed_interval([per_seed[s][key] for s in per_seed])
        if spread["sd"] is not None:
            summary.update({f"{key}_sd": spread["sd"], f"{key}_ci95_low": spread["low"],
                            f"{key}_ci95_high": spread["high"]})
    trained = [read_json(seed_dir(cfg, s, fraction=fraction) / "train.json") for s in cfg.seeds]
    for key in ("params", "train_seconds", "train_tokens_per_s", "epochs", "steps", "train_documents"):
        if key in trained[0]:
            summary[f"train/{key}"] = statistics.fmean(t[key] for t in trained)
    summary["train/stopped_by"] = sorted({t.get("stopped_by", "unknown") for t in trained})  # over the seeds
    summary.update({k: v for k, v in first.items() if isinstance(v, str)}, seeds=list(cfg.seeds), per_seed=per_seed)
    trained_config = OmegaConf.to_container(OmegaConf.load(seed_dir(cfg, cfg.seeds[0], fraction=fraction) / "config.yaml"))
    summary["trained_config"] = trained_settings(trained_config)
    return summary


def log_runs(cfg: DictConfig, per_seed: dict[str, dict], fraction: float, pictures: Path | None) -> None:
    """The test scores (and pictures) into each seed's training run."""
    for seed in cfg.seeds:
        with tracking.reopen_run(cfg, read_json(seed_dir(cfg, seed, fraction=fraction) / "run.json")["run_id"]):
            mlflow.log_metrics({k: v for k, v in per_seed[str(seed)].items() if isinstance(v, float)})
            if pictures is not None:
                mlflow.log_artifacts(str(pictures), artifact_path="plots")


def main(argv: list[str]) -> None:
    cfg = stage_config(argv)
    root = Path(cfg.root)
    OmegaConf.set_struct(cfg, False)  # classify adds task.labels from the checkpoint
    fractions = list(cfg.train.get("label_fractions", [1.0]))  # classify: a run per fraction of the labels
    main_fraction = 1.0 if 1.0 in fractions else max(fractions)
    with atomic_path(root / cfg.paths.plots / cfg.family) as pictures:
        pictures.mkdir()
        per_seed, outputs = get_task(cfg.task.name).evaluate(cfg, pictures, main_fraction)
        summary = {"family": cfg.family, **summarize(cfg, per_seed, main_fraction)}
        if (tuned := root / TUNED_DIR / f"{cfg.family}.yaml").is_file():  # the study, for the report's tuning section
            summary["tuning"] = {k: v for k, v in yaml.safe_load(tuned.read_text(encoding="utf-8")).items()
                                 if k in ("study", "trials")}
        if cfg.get("pretrained"):  # where the encoder came from, and its own pretraining's figures, for the report
            summary["pretrain"] = read_json(pretrained_dir(cfg) / "pretrain.json")
        log_runs(cfg, per_seed, main_fraction, pictures)
        for fraction in fractions:
            if fraction != main_fraction:
                scores, held = get_task(cfg.task.name).evaluate(cfg, None, fraction)
                summary.setdefault("label_fractions", {})[f"{fraction:g}"] = summarize(cfg, scores, fraction)
                outputs.setdefault("label_fractions", {})[f"{fraction:g}"] = held["seeds"]  # for paired tests
                log_runs(cfg, scores, fraction, None)
        for name, result in [(f"labels {main_fraction:g}", summary), *summary.get("label_fractions", {}).items()]:
            print(f"{cfg.family} ({name}): " + ", ".join(
                f"{k}={v:.3f}" for k, v in result.items()
                if k.startswith("test/") and "_len_" not in k and isinstance(v, float)))
    write_json(predictions_path(cfg), outputs)
    write_json(root / cfg.paths.metrics / cfg.task.name / f"{cfg.family}.json", summary)


if __name__ == "__main__":
    run_stage("evaluate", main, sys.argv[1:], CheckpointError)
