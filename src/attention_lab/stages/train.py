"""DVC stages `train_<task>@<family>` and `finetune_<task>@<family>`: train one family's runs as its task lists them
(Task.runs: one per seed by default; a task may add variants, in a folder of their own, e.g. classify/label_runs.py) ->
models/<family>/checkpoints/[<folder>/]seed<k>/{last,best}.ckpt, train.json, run.json; a pretrained family starts
from models/pretrained/<family>. The training itself is train/training.py's; `train.processes: N` trains the runs in
N spawned worker processes, and `trainer=ddp` runs every process through the same runs (docs/design.md)."""

from __future__ import annotations

import shutil
import sys

from attention_lab.core.config import ConfigError
from attention_lab.core.task import Run, get_task
from attention_lab.stages.common import run_stage, stage_config
from attention_lab.train.checkpoints import CheckpointError
from attention_lab.train.training import publish, run_partial, train_run


def side_by_side(argv: list[str], run: Run) -> dict | None:
    """train_run in a worker process of train.processes (the stage's config, rebuilt from its arguments)."""
    cfg = stage_config(argv)
    return train_run(cfg, get_task(cfg.task.name), run)


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
    task = get_task(cfg.task.name)
    runs = task.runs(cfg)
    processes = min(cfg.train.processes, len(runs))
    if processes > 1 and cfg.trainer.get("strategy") not in (None, "auto"):
        raise ConfigError(f"train.processes = {cfg.train.processes} trains runs side by side on one machine; with a "
                          "data-parallel trainer set train.processes=1")
    if processes <= 1:
        summaries = (train_run(cfg, task, run) for run in runs)
    else:  # independent runs side by side, each deterministic on its one thread
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context

        pool = ProcessPoolExecutor(processes, mp_context=get_context("spawn"), initializer=one_thread)
        with pool:
            summaries = list(pool.map(side_by_side, [argv] * len(runs), runs))
    done = [(run, summary) for run, summary in zip(runs, summaries) if summary is not None]
    for run, summary in done:  # the other processes of a data-parallel run print and publish nothing
        print(summary)
    for run, _ in done:  # all or none: a stop before the end keeps every finished run for the next try
        publish(run_partial(cfg, run), run.out)
    for run, _ in done:
        shutil.rmtree(run_partial(cfg, run))


if __name__ == "__main__":  # also what Lightning's ddp launcher runs for every extra process
    run_stage("train", main, sys.argv[1:], CheckpointError)
