"""The pool every run trains on: Ray tasks, each asking for one CPU (and `pool.gpu_share` of a GPU
on a GPU trainer), on the cluster RAY_ADDRESS names. `attention-lab repro` starts a Ray instance on
this machine, listening on the loopback alone, and names it to its stages; a stage run by hand
without RAY_ADDRESS trains its runs in its own process, or on a Ray instance of its own for
`train.processes` > 1."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

ADDRESS = "RAY_ADDRESS"  # Ray's own variable: where `ray.init` connects
# a one-machine instance: every Ray server on 127.0.0.1 alone
LOCAL = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_USAGE_STATS_ENABLED": "0",
    # Ray's default, 15, starves the runs beside any other busy process
    "RAY_worker_niceness": "0",
}
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
FORWARD = ("PYTHONPATH", "MLFLOW_TRACKING_URI")  # the stage's, for its runs wherever they train
# in a pool worker: the running task's id (its retried attempt keeps it)
TASK = "ATTENTION_LAB_POOL_TASK"


@contextmanager
def local_instance(cpus: int, gpus: int | None = None) -> Iterator[str]:
    """A Ray instance of this machine for the block (`cpus` runs at once, and the GPUs it finds, or
    `gpus` logical ones): its address."""
    os.environ.update(LOCAL)  # before Ray's first import, which reads them
    import ray
    from ray._private import ray_constants

    if ray_constants.ENABLE_RAY_CLUSTER:
        raise RuntimeError(
            "Ray was imported before the pool set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: its servers"
            " would listen on every interface"
        )
    # a new instance, not one running
    context = ray.init(
        address="local",
        num_cpus=cpus,
        num_gpus=gpus,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        logging_level="ERROR",
    )
    try:
        yield context.address_info["gcs_address"]
    finally:
        ray.shutdown()


@contextmanager
def for_stage(processes: int) -> Iterator[None]:
    """The pool of a stage's runs: RAY_ADDRESS's when set; else, for `processes` > 1 runs side by
    side, a Ray instance of that many CPUs on this machine for the stage alone; else none (its runs
    train here, in order)."""
    if os.environ.get(ADDRESS) or processes <= 1:
        yield
        return
    with local_instance(processes) as address:
        os.environ[ADDRESS] = address
        try:
            yield
        finally:
            del os.environ[ADDRESS]


def needs(cfg) -> dict | None:
    """What one run asks the pool for: one CPU, and on a GPU trainer `pool.gpu_share` of a GPU (Ray
    sets the task's CUDA_VISIBLE_DEVICES); None for a data-parallel trainer, whose processes
    Lightning starts (torchrun, SLURM)."""
    if cfg.trainer.get("strategy") not in (None, "auto"):
        return None
    if cfg.trainer.get("accelerator") in ("gpu", "cuda"):
        return {"num_cpus": 1, "num_gpus": cfg.pool.gpu_share}
    return {"num_cpus": 1}


def _in_worker(root: str, fn: Callable, args: tuple):
    """fn(*args) in a pool worker: in the workspace `root`, on one intra-op thread (each run
    deterministic on it)."""
    import ray
    import torch

    os.chdir(root)
    torch.set_num_threads(1)
    os.environ[TASK] = f"ray-task:{ray.get_runtime_context().get_task_id()}"
    name = getattr(fn, "func", fn).__qualname__  # a functools.partial's function
    print(f"pool: {name} on node {ray.get_runtime_context().get_node_id()[:12]}", flush=True)
    return fn(*args)


def on_pool(need: dict | None) -> bool:
    """Do runs asking for `need` go to the pool (RAY_ADDRESS names one and need is not None)?"""
    return need is not None and bool(os.environ.get(ADDRESS))


def start(fn: Callable, args: tuple, need: dict, root: Path | None = None):
    """fn(*args) as a task of the pool RAY_ADDRESS names, in the workspace `root` (default: here):
    its ObjectRef. A run whose worker or node is lost is retried once, on any node (it resumes from
    its last checkpoint)."""
    import ray

    if not ray.is_initialized():
        ray.init(address=os.environ[ADDRESS], logging_level="ERROR", log_to_driver=True)
    env = {**{k: os.environ[k] for k in FORWARD if k in os.environ}, **ONE_THREAD}
    task = ray.remote(_in_worker).options(**need, max_retries=1, runtime_env={"env_vars": env})
    return task.remote(str((root or Path.cwd()).resolve()), fn, tuple(args))


def ready(task) -> bool:
    """Has the task started by start() ended?"""
    import ray

    return bool(ray.wait([task], timeout=0)[0])


def next_done(started: list) -> tuple[object, list]:
    """The result of the first of `started` to finish, and those still running."""
    import ray

    done, running = ray.wait(started, num_returns=1)
    return ray.get(done[0]), running


def host() -> str:
    """The address of this node as the pool's other nodes reach it (127.0.0.1 on this machine's own
    instance)."""
    import ray

    return ray.util.get_node_ip_address()


def run_all(
    fn: Callable, calls: Sequence[tuple], need: dict | None, root: Path | None = None
) -> list:
    """[fn(*args) for args in calls]: on the pool when on_pool(need) (side by side, as its free CPUs
    allow), else here, in order."""
    if not on_pool(need):
        return [fn(*args) for args in calls]
    import ray

    return ray.get([start(fn, tuple(args), need, root) for args in calls])
