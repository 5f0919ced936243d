"""The task registry: each task declares itself once, as `TASK = Task(...)` in
attention_lab/<name>/task.py, and the stages reach a task only through `get_task(name)`. Hooks are
plain functions of the task's own modules, imported lazily (`lazy`); the run hooks (`runs`,
`full_run`, `run_marks`, `train_summary`) default to one run per seed on all the data. Adding a
task: docs/design.md, "Adding a family or a task"."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from attention_lab.core.paths import seed_dir

NAMES = ("translate", "classify", "caption")  # the tasks, in the order params.yaml lists them


@dataclass(frozen=True)
class Run:
    """One training run of a family, as a task's `runs` hook lists them: the train stage trains it
    (train.training), the evaluate stage scores it."""

    seed: int
    # where it lands: models/<family>/checkpoints/[<folder>/]seed<k>
    out: Path
    # (dotted config key, value) this run sets, in order
    settings: tuple[tuple[str, object], ...] = ()
    # epochs between validations (check_val_every_n_epoch)
    validate_every: int = 1
    variant: str | None = (
        None  # None: one of the family's main runs; else the key its seeds are reported under, in
    )
    # the metrics' and predictions' Task.variants section (classify: the
    # share, "0.1")


def one_run_per_seed(cfg) -> list[Run]:
    """The default `runs` hook: the family's full run at every seed."""
    return [one_full_run(cfg, seed) for seed in cfg.seeds]


def one_full_run(cfg, seed: int) -> Run:
    """The default `full_run` hook: the family's run on all the data at `seed`, in
    models/<family>/checkpoints/seed<k>."""
    return Run(seed, seed_dir(cfg, seed))


def no_marks(cfg) -> tuple[str, dict[str, str]]:
    """The default `run_marks` hook: no suffix to a run's MLflow name, no tags of its own."""
    return "", {}


def no_summary(cfg, datamodule) -> dict:
    """The default `train_summary` hook: nothing of the task's own in train.json."""
    return {}


@dataclass(frozen=True)
class Task:
    """One task's identity and its stage hooks (cfg is the family's composed config, see
    core.config.load_config)."""

    name: str
    # test metrics summarised over seeds and compared (first: the ranking one) -> label
    headline: dict[str, str]
    speed_column: str  # the report's name for train/train_tokens_per_s
    # prepare: cfg -> {split: rows} (or {split: (rows, images)} with images=True)
    splits: Callable
    stats: Callable  # prepare: (rows, buckets) -> summary dict for stats.json
    tokenizer: Callable  # tokenize: (cfg, train rows) -> (tokenizers.Tokenizer, stats dict)
    build: Callable  # train: (cfg, seed) -> (LightningModule, LightningDataModule)
    # evaluate: (cfg, pictures dir | None, [Run]) -> (per-seed scores, outputs)
    evaluate: Callable
    # export: (cfg, model, trained cfg, out dir, tokenizer path) -> parity dict
    export: Callable
    # report: (cfg, results, assets dir, ranking section lines) -> Markdown page
    page: Callable
    table: Callable  # README and report: (results, cfg) -> Markdown results table
    # reports/ablations.md: (column, test metric, digits), the first one decides a row
    ablation_columns: tuple = ()
    # reports/ablations.md: changed key -> what the ablation asks
    ablation_names: dict = field(default_factory=dict)
    images: bool = False  # prepare also writes <split>.npy (row i of the JSONL = image i)
    runs: Callable = one_run_per_seed  # train, evaluate: cfg -> [Run], in training order
    # tune: (cfg, seed) -> the Run on all the data (what a tuning trial is)
    full_run: Callable = one_full_run
    # MLflow: run cfg -> (run-name suffix, tags) of the task's own
    run_marks: Callable = no_marks
    # train: (run cfg, datamodule) -> train.json figures of the task's own
    train_summary: Callable = no_summary
    # evaluate: the metrics' and predictions' section for Run.variant's runs
    variants: str = "variants"


def lazy(path: str) -> Callable:
    """'module:function' -> a function that imports the module on first call (keeps stage imports
    light)."""
    module, name = path.split(":")

    def call(*args, **kwargs):
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__, call.__qualname__, call.__doc__ = name, path, f"{path} (imported on first call)"
    return call


@cache
def get_task(name: str) -> Task:
    """The Task declared in attention_lab/<name>/task.py."""
    if name not in NAMES:
        raise KeyError(f"unknown task {name!r}; choose one of {', '.join(NAMES)}")
    return importlib.import_module(f"attention_lab.{name}.task").TASK
