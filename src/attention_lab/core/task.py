"""The task registry: each task declares itself once, as `TASK = Task(...)` in attention_lab/<name>/task.py, and the
stages reach a task only through `get_task(name)`. Adding a task: a folder attention_lab/<name>/ with its task.py, a name
in NAMES, conf/task/<name>.yaml, conf/data/<name>/, and a section in params.yaml; no stage changes.

Hooks are plain functions of the task's own modules; task.py imports them lazily (`lazy`), so a stage imports only
what its hook needs (prepare never imports Lightning).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

NAMES = ("translate", "classify", "caption")  # the tasks, in the order params.yaml lists them


@dataclass(frozen=True)
class Task:
    """One task's identity and its stage hooks (cfg is the family's composed config, see core.config.load_config)."""

    name: str
    headline: dict[str, str]  # test metrics summarised over seeds and compared (first: the ranking one) -> label
    speed_column: str         # the report's name for train/train_tokens_per_s
    splits: Callable          # prepare: cfg -> {split: rows} (or {split: (rows, images)} with images=True)
    stats: Callable           # prepare: (rows, buckets) -> summary dict for stats.json
    tokenizer: Callable       # tokenize: (cfg, train rows) -> (tokenizers.Tokenizer, stats dict)
    build: Callable           # train: (cfg, seed) -> (LightningModule, LightningDataModule)
    evaluate: Callable        # evaluate: (cfg, pictures dir | None, label fraction) -> (per-seed scores, outputs)
    export: Callable          # export: (cfg, model, trained cfg, out dir, tokenizer path) -> parity dict
    page: Callable            # report: (cfg, results, assets dir, ranking section lines) -> Markdown page
    table: Callable           # README and report: (results, cfg) -> Markdown results table
    ablation_columns: tuple = ()  # reports/ablations.md: (column, test metric, digits), the first one decides a row
    images: bool = False      # prepare also writes <split>.npy (row i of the JSONL = image i)


def lazy(path: str) -> Callable:
    """'module:function' -> a function that imports the module on first call (keeps stage imports light)."""
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
