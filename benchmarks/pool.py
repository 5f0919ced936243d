"""One pool of runs against chains × workers: two families' train stages side by side (as `attention-lab repro` runs
two chains), each training its three seeds in worker processes (train.processes: 3), with and without the pool of
slots (train/slots.py, ATTENTION_LAB_SLOTS = the cores) -> a section of reports/benchmarks.md (and benchmarks.json).

    python benchmarks/pool.py                    # classify, bigru_max and self_attentive, 2 epochs, 2 rounds
    python benchmarks/pool.py --epochs 1 --rounds 1

A copy of the project (quick profile, classify only) is prepared and tokenized once; each round runs every arm once,
in turn, on the same data, and each arm's wall time is from the two stages' start to the last one's end. The runs
and their figures are the same in every arm (one thread each); only how many train at once differs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python benchmarks/pool.py` finds the package

from benchmarks.common import ROOT, machine, table, write_marked_section

SECTION = "pool"  # its key in benchmarks.json and its markers in benchmarks.md (speed.py keeps both)
ARMS = {"6 processes (2 stages × 3 workers)": {},
        "one pool of 2 slots": {"ATTENTION_LAB_SLOTS": "2"}}


def copy_project(dest: Path) -> None:
    """What the stages need (no data, models, .git)."""
    for name in ("conf", "src", "dvc.yaml", "params.yaml", "pyproject.toml"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, dest / name)


def stage(dest: Path, module: str, *args: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", f"attention_lab.stages.{module}", "task=classify", *args],
                            cwd=dest, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen) -> None:
    _, err = proc.communicate()
    if proc.returncode:
        raise SystemExit(f"a stage failed ({proc.returncode}):\n{err[-3000:]}")


def arm(dest: Path, families: list[str], epochs: int, extra_env: dict) -> float:
    """Wall seconds of the families' train stages side by side (the models folder cleared first)."""
    shutil.rmtree(dest / "models", ignore_errors=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(dest / "src"), **extra_env,
           "MLFLOW_TRACKING_URI": f"sqlite:///{dest / 'mlflow.db'}", "TMPDIR": str(dest / "tmp")}
    start = time.perf_counter()
    procs = [stage(dest, "train", f"family={f}", f"train.max_epochs={epochs}", "train.processes=3", env=env)
             for f in families]
    for proc in procs:
        finish(proc)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="bigru_max,self_attentive")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks.md")
    args = parser.parse_args(argv)
    families = args.families.split(",")
    with tempfile.TemporaryDirectory(prefix="pool-") as tmp:
        dest = Path(tmp)
        copy_project(dest)
        (dest / "tmp").mkdir()
        env = {**os.environ, "PYTHONPATH": str(dest / "src"), "MLFLOW_TRACKING_URI": f"sqlite:///{dest / 'mlflow.db'}"}
        for module in ("prepare", "tokenizer"):
            finish(stage(dest, module, env=env))
        before = os.getloadavg()[0]
        walls = {name: [] for name in ARMS}
        for _ in range(args.rounds):
            for name, extra in ARMS.items():
                walls[name].append(arm(dest, families, args.epochs, extra))
                print(f"{name}: {walls[name][-1]:.1f} s", flush=True)
    first = next(iter(ARMS))
    rows = [[name, f"{min(w):.1f}", f"{statistics.median(w):.1f}", f"{max(w):.1f}",
             f"{statistics.median(walls[first]) / statistics.median(w):.2f}×"] for name, w in walls.items()]
    figures = {"machine": machine(), "families": families, "epochs": args.epochs, "rounds": args.rounds,
               "seconds": walls, "load_before": round(before, 2)}
    lines = ["## One pool of runs", "",
             (f"`python benchmarks/pool.py` ({machine()['cpu']}, {os.cpu_count()} cores, load average "
             f"{before:.2f} before): the classify train stages of {', '.join(f'`{f}`' for f in families)} side by "
             f"side, {args.epochs} epochs, three seeds each in worker processes (`train.processes: 3`), one thread "
             f"each; {args.rounds} rounds, the arms in turn. Wall seconds from the stages' start to the last one's "
             "end:"), "",
             *table(["arm", "min", "median", "max", "speed-up"], rows)]
    write_marked_section(args.out, SECTION, lines, figures)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
