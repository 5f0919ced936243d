"""A family's evaluation record: DVC's metrics file joined with results/<task>/<family>/."""

# The evaluate stage keeps a record in two places: metrics/<task>/<family>.json, the numbers DVC
# declares as metrics (test/* and train/*, in the task's variants section too), and
# results/<task>/<family>/: details.json (seeds, per-seed scores, the config that trained, the
# study, validation curves, sacreBLEU signatures, what stopped the runs, the pretraining), the data
# plots drawn from them (curve_seed<k>.csv, by_length.csv) and any page a task draws (classify's
# HTML). read() and load() join the two files into the record every reader sees.

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from omegaconf import DictConfig

from attention_lab.core.files import read_json
from attention_lab.core.paths import METRICS, REPLICATION, RESULTS, metrics_dir, root_dir
from attention_lab.results.metrics import bucket_key, bucket_label

DETAILS = "details.json"
BY_LENGTH = "by_length.csv"
METRIC_PREFIXES = ("test/", "train/")
MONITORED = "val/loss"  # a record's val_metric when it names none (older train.json)


def curve_file(seed: int | str) -> str:
    """The data plot of one seed's validation curve: curve_seed<k>.csv."""
    return f"curve_seed{seed}.csv"


def length_metric(key: str) -> str:
    """The by-length data plot's column for a task's ranking metric: test/bleu -> bleu."""
    return key.removeprefix("test/")


def results_dir(cfg: DictConfig, family: str | None = None) -> Path:
    """results/<task>/<family>, or results/replication/<task>/<family> for the replication."""
    base = root_dir(cfg) / RESULTS / (REPLICATION if cfg.get("replication") else "")
    return base / cfg.task.name / (family or cfg.family)


def metrics_path(cfg: DictConfig, family: str | None = None) -> Path:
    """metrics/<task>/<family>.json (under metrics/replication/ for the replication)."""
    return metrics_dir(cfg) / cfg.task.name / f"{family or cfg.family}.json"


def is_metric(key: str, value) -> bool:
    """Whether a record's entry is a DVC metric: a test/* or train/* number."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and key.startswith(METRIC_PREFIXES)


def split(record: dict, variants: str) -> tuple[dict, dict]:
    """(metrics, details): the test/train numbers (also in the `variants` section), and the rest."""
    metrics, details = {}, {}
    for key, value in record.items():
        if key == variants and isinstance(value, dict):
            parts = {name: split(block, variants) for name, block in value.items()}
            metrics[key] = {name: m for name, (m, _) in parts.items()}
            details[key] = {name: d for name, (_, d) in parts.items()}
        elif is_metric(key, value):
            metrics[key] = value
        else:
            details[key] = value
    return metrics, details


def join(metrics: dict, details: dict, where: str = "record") -> dict:
    """The record split() cut in two, keys sorted as written; an entry in both is an error."""
    out = dict(details)
    for key, value in metrics.items():
        if key not in out:
            out[key] = value
        elif isinstance(value, dict) and isinstance(out[key], dict):
            out[key] = join(value, out[key], f"{where}: {key}")
        else:
            raise ValueError(
                f"{where}: `{key}` is both a metric and a detail (run the "
                "evaluate stage again to write them apart)"
            )
    return dict(sorted(out.items()))


def load(metrics: Path, details: Path) -> dict:
    """A family's record from its metrics file and its details.json."""
    for path in (metrics, details):
        if not path.is_file():
            raise FileNotFoundError(
                f"{path}: missing; the evaluate stage writes {metrics} and "
                f"{details} together (`dvc repro` the family's evaluate stage)"
            )
    found = {path: read_json(path) for path in (metrics, details)}
    for path, value in found.items():
        if not isinstance(value, dict):
            raise TypeError(f"{path}: expected a JSON object (written by the evaluate stage)")
    return join(found[metrics], found[details], f"{metrics} and {details}")


def read(cfg: DictConfig, family: str | None = None) -> dict:
    """The record of `family` (default: the config's) under the config's paths."""
    return load(metrics_path(cfg, family), results_dir(cfg, family) / DETAILS)


def read_at(root: Path, task: str, family: str, replication: bool = False) -> dict:
    """The record of `family` in the project at `root` (default paths), without a config."""
    where = (REPLICATION,) if replication else ()
    return load(
        root.joinpath(METRICS, *where, task, f"{family}.json"),
        root.joinpath(RESULTS, *where, task, family, DETAILS),
    )


def exists_at(root: Path, task: str, family: str) -> bool:
    """Whether the project at `root` has the family's metrics file (its evaluate stage ran)."""
    return root.joinpath(METRICS, task, f"{family}.json").is_file()


def write_csv(path: Path, header: list[str], rows: Iterable[list]) -> None:
    """A data plot's CSV: a header, then its rows (floats with every digit Python writes)."""
    with path.open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def data_plots(folder: Path, record: dict, buckets, metric: str) -> list[str]:
    """Write the curve and by-length CSVs of a record into `folder`; the names written."""
    written = []
    for seed, curve in (record.get("val_curves") or {}).items():  # rows: epoch, value, metric
        metric_name = record.get("val_metric") or MONITORED
        rows = [[epoch, value, metric_name] for epoch, value in curve["curve"]]
        write_csv(folder / curve_file(seed), ["epoch", "value", "metric"], rows)
        written.append(curve_file(seed))
    seeds = [str(s) for s in record.get("seeds", [])]
    per_seed = record.get("per_seed") or {}
    rows = []  # per bucket: its shortest length, its label, the mean over seeds, each seed's
    for bucket in buckets:
        key = f"test/{metric}_len_{bucket_key(bucket)}"
        if key in record and all(key in per_seed.get(s, {}) for s in seeds):
            scores = [per_seed[s][key] for s in seeds]
            rows.append([int(bucket[0]), bucket_label(bucket), record[key], *scores])
    if rows:
        header = ["length", "bucket", metric, *(f"seed_{s}" for s in seeds)]
        write_csv(folder / BY_LENGTH, header, rows)
        written.append(BY_LENGTH)
    return written
