"""DVC stages `tune_<task>@<family>`: one Optuna study per family under the task's budget (params.yaml `<task>.tune`,
search space conf/tune/<family>.yaml) -> tuned/<family>.yaml, which the family's train stage merges.

Resumable: re-running continues the study in tuned/<family>.journal (or tune.storage); several processes running this
stage at once share the study's trials.
"""

from __future__ import annotations

import sys

import yaml

from attention_lab.core.files import write_text
from attention_lab.core.paths import tuned_path
from attention_lab.core.task import get_task
from attention_lab.stages.common import run_stage, stage_config
from attention_lab.train import pool
from attention_lab.train.tuning import tune


def study(argv: list[str]) -> dict:
    """This worker's share of the family's study (tune), on the pool: its trials train there, one at a time."""
    cfg = stage_config(argv, tuned=False)  # the search starts from the family's own settings
    return tune(cfg, get_task(cfg.task.name))


def main(argv: list[str]) -> None:
    cfg = stage_config(argv, tuned=False)
    result, = pool.run_all(study, [(argv,)], pool.needs(cfg.trainer))
    head = (f"# Written by the tune stage of {cfg.family} (do not edit): the best trial's values, merged by its train "
            "stage.\n")
    write_text(tuned_path(cfg), head + yaml.safe_dump(result, sort_keys=False))
    print(f"tune@{cfg.family}: {result['study']}")


if __name__ == "__main__":
    run_stage("tune", main, sys.argv[1:])
