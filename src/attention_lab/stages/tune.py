"""DVC stages `tune_<task>@<family>`: one Optuna study per family under the task's budget
(params.yaml `<task>.tune`, search space conf/tune/<family>.yaml) -> tuned/<family>.yaml, which the
family's train stage merges.

Resumable: re-running continues the study in tuned/<family>.journal (or tune.storage); several
processes running this stage at once share the study's trials. On the pool (RAY_ADDRESS) each trial
is a task, tune.in_flight at once, and this process alone writes the journal (train/tuning.py's
trials_on_pool).
"""

from __future__ import annotations

import functools
import sys

import yaml

from attention_lab.core.files import write_text
from attention_lab.core.paths import tuned_path
from attention_lab.core.task import get_task
from attention_lab.stages.common import run_stage, stage_config
from attention_lab.train import pool
from attention_lab.train.tuning import pool_trial, tune


def trial(argv: list[str], host: str, port: int, name: str, space: dict, parent: str) -> int | None:
    """One trial of the family's study, on the pool (pool_trial; the stage's config, rebuilt in the
    worker)."""
    cfg = stage_config(argv, tuned=False)  # the search starts from the family's own settings
    return pool_trial(cfg, get_task(cfg.task.name), host, port, name, space, parent)


def main(argv: list[str]) -> None:
    cfg = stage_config(argv, tuned=False)
    result = tune(cfg, get_task(cfg.task.name), functools.partial(trial, argv), pool.needs(cfg))
    head = (
        f"# Written by the tune stage of {cfg.family} (do not edit): the best trial's values,"
        " merged by its train stage.\n"
    )
    write_text(tuned_path(cfg), head + yaml.safe_dump(result, sort_keys=False))
    print(f"tune@{cfg.family}: {result['study']}")


if __name__ == "__main__":
    run_stage("tune", main, sys.argv[1:])
