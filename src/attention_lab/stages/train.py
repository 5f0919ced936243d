"""DVC stages `train_<task>@<family>` and `finetune_<task>@<family>`: train one family's runs as its
task lists them (Task.runs: one per seed by default; a task may add variants, in a folder of their
own, e.g. classify/label_runs.py) ->
models/<family>/checkpoints/[<folder>/]seed<k>/{last,best}.ckpt, train.json, run.json; a pretrained
family starts from models/pretrained/<family>. The training itself is train/training.py's; each run
is a task of the pool (train/pool.py), and `trainer=ddp` runs every process through the same runs
(docs/design.md)."""

from __future__ import annotations

import shutil
import sys

from attention_lab.core.config import ConfigError
from attention_lab.core.task import Run, get_task
from attention_lab.stages.common import run_stage, stage_config
from attention_lab.train import pool
from attention_lab.train.checkpoints import CheckpointError
from attention_lab.train.training import publish, run_partial, train_run


def side_by_side(argv: list[str], run: Run) -> dict | None:
    """train_run on the pool (the stage's config, rebuilt from its arguments in the worker)."""
    cfg = stage_config(argv)
    return train_run(cfg, get_task(cfg.task.name), run)


def main(argv: list[str]) -> None:
    cfg = stage_config(argv)
    task = get_task(cfg.task.name)
    runs = task.runs(cfg)
    need, processes = pool.needs(cfg), min(cfg.train.processes, len(runs))
    # data parallel: Lightning's processes train each run, one run at a time
    if need is None and processes > 1:
        raise ConfigError(
            f"train.processes = {cfg.train.processes} trains runs side by side on one machine; with"
            " a data-parallel trainer set train.processes=1"
        )
    # every run a task of the pool, each deterministic on its one thread
    with pool.for_stage(processes):
        summaries = pool.run_all(side_by_side, [(argv, run) for run in runs], need)
    done = [(run, summary) for run, summary in zip(runs, summaries) if summary is not None]
    # the other processes of a data-parallel run print and publish nothing
    for run, summary in done:
        print(summary)
    # all or none: a stop before the end keeps every finished run for the next try
    for run, _ in done:
        publish(run_partial(cfg, run), run.out)
    for run, _ in done:
        shutil.rmtree(run_partial(cfg, run))


if __name__ == "__main__":  # also what Lightning's ddp launcher runs for every extra process
    run_stage("train", main, sys.argv[1:], CheckpointError)
