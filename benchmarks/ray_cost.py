"""What the Ray pool (train/pool.py) costs on this machine: starting its instance, a stage
connecting to it, and each run's task (a no-op, a task that rebuilds the stage's config as every
run's task does, and a trial's opening of its study through the tune stage's gRPC storage proxy) ->
the section `ray` of reports/benchmarks.md and its key in benchmarks.json. `python
benchmarks/ray_cost.py [--repeats 5]`."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# `python benchmarks/ray_cost.py` finds the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, command, machine, median, num, table, write_marked_section

SECTION = "ray"
ARGV = ["task=translate", "family=bahdanau"]  # the stage config a run's task rebuilds
CONNECT = (
    "import sys, time; t = time.perf_counter(); import ray; ray.init(address=sys.argv[1], "
    "logging_level='ERROR'); print(time.perf_counter() - t)"
)


def noop() -> None:
    """A task that does nothing: the pool's own cost per run."""


def config_of(argv: list[str]) -> str:
    """What a run's task does before it trains: the stage's config, rebuilt from its arguments."""
    from attention_lab.stages.common import stage_config

    return stage_config(argv).family


def open_study(host: str, port: int, name: str) -> int:
    """What a trial's task does before it trains: its study, through the tune stage's gRPC storage
    proxy."""
    import optuna

    proxy = optuna.storages.GrpcStorageProxy(host=host, port=port)
    proxy.wait_server_ready(timeout=60)
    try:
        return len(optuna.load_study(study_name=name, storage=proxy).get_trials(deepcopy=False))
    finally:
        proxy.close()


def timed(fn, *args) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def measure(repeats: int) -> dict:
    """Seconds of each step, `repeats` times (the first task of an instance, which starts its
    worker, apart)."""
    import optuna
    from optuna.storages._grpc.server import make_server

    from attention_lab.train import pool
    from attention_lab.train.tuning import free_port

    def one(fn, *args):
        return pool.run_all(fn, [args], {"num_cpus": 1})

    figures: dict[str, list[float]] = {
        k: [] for k in ("start", "stop", "connect", "first", "noop", "config", "study")
    }
    with tempfile.TemporaryDirectory() as scratch:
        journal = optuna.storages.JournalStorage(
            optuna.storages.journal.JournalFileBackend(f"{scratch}/j.log")
        )
        study = optuna.create_study(study_name="bench", storage=journal)
        # a study of a quick-profile size
        study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=30)
        for _ in range(repeats):
            began = time.perf_counter()
            with pool.local_instance(2) as address:
                figures["start"].append(time.perf_counter() - began)
                os.environ[pool.ADDRESS] = address
                try:
                    figures["connect"].append(
                        float(
                            subprocess.run(
                                [sys.executable, "-c", CONNECT, address],
                                env={**os.environ, **pool.LOCAL},
                                check=True,
                                capture_output=True,
                                text=True,
                            ).stdout.split()[-1]
                        )
                    )
                    figures["first"].append(timed(one, noop))
                    figures["noop"].append(median([timed(one, noop) for _ in range(5)]))
                    figures["config"].append(
                        median([timed(one, config_of, ARGV) for _ in range(3)])
                    )
                    host = pool.host()
                    server = make_server(journal, host, port := free_port(host))
                    server.start()
                    try:
                        figures["study"].append(
                            median([timed(one, open_study, host, port, "bench") for _ in range(3)])
                        )
                    finally:
                        server.stop(grace=None)
                finally:
                    del os.environ[pool.ADDRESS]
                stopping = time.perf_counter()
            figures["stop"].append(time.perf_counter() - stopping)
    return figures


def report(figures: dict, repeats: int, quoted: str) -> tuple[list[str], dict]:
    about = machine()
    rows = [
        ["start this machine's instance (`attention-lab repro`, once per pipeline)", "start"],
        ["stop it", "stop"],
        ["a stage process importing Ray and connecting to it (once per stage)", "connect"],
        ["the first task of an instance (it starts a worker process)", "first"],
        ["a run's task doing nothing (the pool's own cost per run)", "noop"],
        ["a run's task rebuilding the stage's config (what every run's task does first)", "config"],
        ["a trial's task opening its study through the gRPC proxy (30 trials)", "study"],
    ]
    import ray

    intro = (
        f"`{quoted}` ({about['cpu']}, {about['cores']} cores; ray {ray.__version__}): seconds of"
        f" each step, {repeats} instances of 2 CPUs started in turn (a task's figure is the median"
        " of its repeats within an instance)."
    )
    lines = [
        "## The Ray pool's own cost",
        "",
        intro,
        "",
        *table(
            ["step", "min", "median", "max"],
            [
                [
                    label,
                    num(min(figures[k]), 3),
                    num(median(figures[k]), 3),
                    num(max(figures[k]), 3),
                ]
                for label, k in rows
            ],
        ),
    ]
    return lines, {"machine": about, "repeats": repeats, "seconds": figures}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks.md")
    args = ap.parse_args(argv)
    lines, summary = report(measure(args.repeats), args.repeats, command(__file__, argv))
    write_marked_section(args.out, SECTION, lines, summary)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
