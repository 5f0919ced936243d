"""What the pipeline cost: every stage's wall time, read from the logs of `attention-lab repro`
(lines `HH:MM:SS [label] text`, one label per chain), added up per family and per task ->
reports/cost.md and reports/cost.json.

    python benchmarks/pipeline_cost.py logs/caption.log [more logs ...]

Logs named in an earlier reports/cost.json and not given again are kept (--fresh forgets them): a
run in pieces, one log a piece (name them apart), adds up over the sessions that ran it. Then
benchmarks/compute_floor.py writes its section (the pipeline against its compute floor) from these
stage times, unless --no-floor.

A stage starts at DVC's "Running stage '<name>'" line and ends at its chain's last line before the
next stage; it finished when DVC updated the lock file, else it was stopped (killed or failed: its
time still counts, as the run paid it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention_lab.core.machine import cpu_model
from benchmarks.common import ROOT, num, table

LINE = re.compile(r"^(\d\d):(\d\d):(\d\d) \[([^\]]+)\] ?(.*)$")
START = re.compile(r"Running stage '([^']+)'")
SKIPPED = re.compile(r"Stage '([^']+)' didn't change, skipping")
DONE = "Updating lock file"


@dataclass
class Attempt:
    """One stage's run in one log: its seconds, and whether DVC recorded it."""

    stage: str
    log: str
    seconds: float
    finished: bool


def read_log(path: Path) -> tuple[list[Attempt], float, list[str]]:
    """The stage attempts of one log, its wall time (first to last line; times past midnight roll
    over) and the stages DVC skipped in it (their outputs were current)."""
    attempts, open_, skipped = [], {}, []  # open_: label -> [stage, start, last, finished]
    day, previous, first, last = 0, None, None, None
    for raw in path.read_text(encoding="utf-8", errors="replace").splitlines():
        m = LINE.match(raw)
        if not m:
            continue
        h, mi, s, label, text = m.groups()
        t = int(h) * 3600 + int(mi) * 60 + int(s)
        if previous is not None and t + day * 86400 < previous - 43200:
            day += 1
        t = previous = t + day * 86400
        first = t if first is None else first
        last = t
        if started := START.search(text):
            if label in open_:
                attempts.append(_close(open_.pop(label), path))
            open_[label] = [started.group(1), t, t, False]
        else:
            skipped += SKIPPED.findall(text)
            # any other line of the chain, a skipped stage's too, extends its running stage
            if label in open_:
                open_[label][2] = t
                open_[label][3] |= DONE in text
    attempts += [_close(o, path) for o in open_.values()]
    return attempts, float((last or 0) - (first or 0)), skipped


def _close(o: list, path: Path) -> Attempt:
    return Attempt(stage=o[0], log=path.name, seconds=float(o[2] - o[1]), finished=o[3])


def task_and_family(stage: str, family_task: dict[str, str]) -> tuple[str, str]:
    """(task, family or '') of a stage name: `<kind>@<family>`, `<kind>_<task>` (`<kind>@<task>` in
    older logs) or a stage of no task."""
    item = stage.partition("@")[2] or next(
        (t for t in set(family_task.values()) if stage.endswith(f"_{t}")), ""
    )
    if item in family_task:
        return family_task[item], item
    return (item, "") if item else ("all", "")


def summarise(logs: list[Path], earlier: dict | None = None) -> dict:
    """Per task: the logs' stage seconds added up, per family (its chain) and for the shared stages;
    with the attempts and wall times of `earlier` (a cost.json) from the logs not given again (a run
    in pieces, one log a piece). A log's span (seconds since the epoch, first line to last) ends at
    its file's modification time, so logs that ran at the same time can be told apart from pieces
    run one after another (benchmarks/compute_floor.py); per log, the stages DVC skipped as
    unchanged."""
    from attention_lab.core.params import families, read_params
    from attention_lab.core.task import NAMES as TASKS

    params = read_params(ROOT)
    family_task = {f: t for t in TASKS if t in params for f in families(params, t)}
    given = {log.name for log in logs}
    earlier = earlier or {"logs": {}, "attempts": []}
    attempts = [Attempt(**a) for a in earlier["attempts"] if a["log"] not in given]
    walls = {name: s for name, s in earlier["logs"].items() if name not in given}
    spans = {name: span for name, span in earlier.get("spans", {}).items() if name not in given}
    skipped = {
        name: stages for name, stages in earlier.get("skipped", {}).items() if name not in given
    }
    for log in logs:
        found, walls[log.name], skipped[log.name] = read_log(log)
        attempts += found
        end = log.stat().st_mtime  # the log's last line was written then
        spans[log.name] = [end - walls[log.name], end]
    tasks: dict = defaultdict(
        lambda: {"seconds": 0.0, "families": defaultdict(float), "stages": 0, "stopped": 0}
    )
    for a in attempts:
        task, family = task_and_family(a.stage, family_task)
        t = tasks[task]
        t["seconds"] += a.seconds
        t["families"][family or "(shared stages)"] += a.seconds
        t["stages"] += a.finished
        t["stopped"] += not a.finished
    order = ["(shared stages)", *family_task]  # the families in params.yaml's order
    return {
        "date": dt.date.today().isoformat(),
        "cpu": cpu_model(),
        "logs": walls,
        "spans": spans,
        "skipped": skipped,
        "tasks": {
            k: {
                **v,
                "families": dict(sorted(v["families"].items(), key=lambda kv: order.index(kv[0]))),
            }
            for k, v in tasks.items()
        },
        "attempts": [asdict(a) for a in attempts],
    }


def markdown(summary: dict) -> list[str]:
    lines = [
        "# What the pipeline cost",
        "",
        (
            "Stage wall times from the logs of `attention-lab repro`"
            f" ({', '.join(summary['logs'])}), added up by `python benchmarks/pipeline_cost.py`;"
            f" {summary['date']}, {summary['cpu']}. A chain's stage runs on one thread, a training"
            " stage's seeds side by side, so one stage's wall time is about the machine's time"
            " while two chains share it."
        ),
        "",
    ]
    rows = [
        [task, num(t["seconds"] / 60), t["stages"], t["stopped"]]
        for task, t in summary["tasks"].items()
    ]
    lines += table(
        ["task", "stage minutes, added up", "stages finished", "stopped and resumed"], rows
    )
    lines += ["", "Logs, first line to last:", ""]
    lines += table(
        ["log", "wall minutes"], [[name, num(s / 60)] for name, s in summary["logs"].items()]
    )
    for task, t in summary["tasks"].items():
        lines += ["", f"## {task}", ""]
        lines += table(
            ["family", "stage minutes"], [[f, num(s / 60)] for f, s in t["families"].items()]
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "logs", nargs="+", type=Path, help="logs of `attention-lab repro` (or lines of its shape)"
    )
    ap.add_argument(
        "--out", type=Path, default=ROOT / "reports" / "cost", help="writes <out>.md and <out>.json"
    )
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="forget the logs of an earlier <out>.json (default: keep "
        "those not given again, so a run in pieces adds up)",
    )
    ap.add_argument(
        "--no-floor",
        action="store_true",
        help="write no compute-floor section (benchmarks/compute_floor.py)",
    )
    args = ap.parse_args(argv)
    if missing := [str(p) for p in args.logs if not p.is_file()]:
        ap.error(f"no such log: {', '.join(missing)}")
    earlier = args.out.with_suffix(".json")
    earlier = json.loads(earlier.read_text()) if earlier.is_file() else {}
    summary = summarise(args.logs, None if args.fresh or not earlier else earlier)
    if empty := [
        str(p) for p in args.logs if not any(a["log"] == p.name for a in summary["attempts"])
    ]:
        ap.error(
            f"no stage of `attention-lab repro` in {', '.join(empty)} "
            "(expected lines `HH:MM:SS [label] Running stage '<name>':`)"
        )
    args.out.with_suffix(".md").write_text("\n".join(markdown(summary)) + "\n", encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out.with_suffix('.md')} and .json")
    if not args.no_floor:
        floor(args.out, earlier.get("compute_floor", {}).get("side_by_side", []))
    return 0


def floor(out: Path, side_by_side: list[list[str]]) -> None:
    """benchmarks/compute_floor.py's section of out.md from its stage times (the groups of logs side
    by side named before, those still there), or why not."""
    from benchmarks import compute_floor

    logs = json.loads(out.with_suffix(".json").read_text())["logs"]
    try:
        compute_floor.refresh(out, side_by_side=[g for g in side_by_side if set(g) <= set(logs)])
    except compute_floor.ArtifactError as err:
        print(f"no compute-floor section: {err}")


if __name__ == "__main__":
    raise SystemExit(main())
