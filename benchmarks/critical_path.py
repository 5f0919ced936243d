"""The pipeline past one machine, on paper: its critical path (its wall time on an unlimited cluster
of single-core nodes) and its wall time on 4, 16 and 64 such nodes -> a marked block of
docs/scaling.md. Reads committed files only: reports/cost.json, reports/benchmarks.json, params.yaml
and dvc.yaml (DVC's stage graph).

    python benchmarks/critical_path.py [--write | --check]   # no flag: print the block

The model. A stage's time is its machine seconds (benchmarks/compute_floor.py: each log's wall time
shared among its stages by their stage seconds, all attempts counted, stopped ones too) times the
cores of the logs' machine: the pool ran one single-thread run per core and the studies kept every
core busy, so that is the core time the stage took, a single-core node's time (where a core idled it
counts as work: the figures err long). A study is one run (its trials one after another); a train or
fine-tune stage's time is split evenly among its runs (compute_floor's `runs`: seeds × label
fractions, less seed 0 where the study's best trial gave it), which may run on separate nodes; any
other stage is one run; a stage not in the logs takes 0 s. A stage's runs start when every stage it
depends on has finished; on N nodes the runs are placed greedily, the longest remaining path first.
"""

from __future__ import annotations

import argparse
import heapq
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.common import ROOT, table
from benchmarks.compute_floor import ArtifactError, kind_of, machine_shares, read

NODES = (4, 16, 64)
START, END = "<!-- critical-path:start -->", "<!-- critical-path:end -->"
HEADING = "## Past one machine, on paper"


def stage_graph(root: Path) -> dict[str, set[str]]:
    """stage -> the stages it depends on, from DVC's graph of root's dvc.yaml."""
    from attention_lab.pipeline.provenance import _name, _repo

    with _repo(root) as repo:
        graph = repo.index.graph  # edges point from a stage to the stages it depends on
        return {_name(s): {_name(d) for d in graph.successors(s)} for s in graph.nodes}


def dvc_name(stage: str, tasks) -> str:
    """A logged stage's name as dvc.yaml spells it: older logs wrote `<kind>@<task>` for
    `<kind>_<task>`."""
    name, _, item = stage.partition("@")
    return f"{name}_{item}" if item in tasks else stage


def stage_runs(root: Path, graph: dict[str, set[str]]) -> dict:
    """stage -> [seconds of each run on a single-core node] (the module's model), and what the
    figures rest on."""
    from attention_lab.core.params import families, read_params
    from attention_lab.core.task import NAMES as TASKS
    from benchmarks.pipeline_cost import task_and_family

    cost_json = root / "reports" / "cost.json"
    cost = read(cost_json)
    if missing := [k for k in ("attempts", "logs", "cpu", "compute_floor") if k not in cost]:
        raise ArtifactError(f"{cost_json}: no field {missing[0]}")
    machine = read(root / "reports" / "benchmarks.json", "machine")
    if machine["cpu"] != cost["cpu"]:
        raise ArtifactError(
            f"reports/benchmarks.json: machine {machine['cpu']}, not the logs' {cost['cpu']}: their"
            " cores are not known"
        )
    side = [g for g in cost["compute_floor"]["side_by_side"] if set(g) <= set(cost["logs"])]
    shares = machine_shares(cost["attempts"], cost["logs"], side, cost.get("spans", {}))
    seconds: dict[str, float] = defaultdict(float)
    for a in cost["attempts"]:
        seconds[dvc_name(a["stage"], TASKS)] += a["seconds"] * shares.get(a["log"], 1.0)
    if unknown := sorted(set(seconds) - set(graph)):
        raise ArtifactError(f"{cost_json}: stages not in dvc.yaml: {', '.join(unknown)}")
    params = read_params(root)
    family_task = {f: t for t in TASKS if t in params for f in families(params, t)}
    rows = {(r["task"], r["family"], r["kind"]): r for r in cost["compute_floor"]["rows"]}
    runs, key = {}, {}
    for s in graph:
        task, fam = task_and_family(s, family_task)
        if "_replication" in s.partition("@")[0]:  # the replication's runs: no row of their own
            fam = f"{fam or s.rpartition('@')[2]} (replication)"
        key[s] = (task, fam or "(shared stages)", kind_of(s)[0])  # its row of compute_floor
        row = rows.get(key[s], {})
        n = max(1, row.get("runs") or 1) if key[s][2] == "train" else 1
        runs[s] = [machine["cores"] * seconds.get(s, 0.0) / n] * n
    return {
        "runs": runs,
        "key": key,
        "cores": machine["cores"],
        "cpu": cost["cpu"],
        "measured_s": sum(seconds.values()),
        "unlogged": sorted(s for s in graph if s not in seconds),
        "short": sorted(
            s for s in graph if rows.get(key[s], {}).get("note", "").startswith("under its floor")
        ),
    }


def users(deps: dict[str, set[str]]) -> dict[str, list[str]]:
    """stage -> the stages that depend on it, by name."""
    out: dict[str, list[str]] = {s: [] for s in deps}
    for s in sorted(deps):
        for d in deps[s]:
            out[d].append(s)
    return out


def tails(runs: dict[str, list[float]], deps: dict[str, set[str]]) -> dict[str, float]:
    """stage -> the longest path from its end to the pipeline's (its slowest run stands for the
    stage)."""
    after, tail = users(deps), {}

    def of(s: str) -> float:
        if s not in tail:
            tail[s] = max((max(runs[c]) + of(c) for c in after[s]), default=0.0)
        return tail[s]

    for s in deps:
        of(s)
    return tail


def critical_path(
    runs: dict[str, list[float]], deps: dict[str, set[str]]
) -> tuple[float, list[str]]:
    """(seconds, stages) of the longest chain, each stage its slowest run: the wall time on
    unlimited nodes."""
    after, tail = users(deps), tails(runs, deps)
    path = lambda s: max(runs[s]) + tail[s]  # the longest chain from the stage's start
    chain = [max(sorted(s for s in deps if not deps[s]), key=path)]
    while after[chain[-1]]:
        chain.append(max(after[chain[-1]], key=path))
    return path(chain[0]), chain


def schedule(runs: dict[str, list[float]], deps: dict[str, set[str]], nodes: int) -> float:
    """Wall seconds on `nodes` single-core nodes: greedy list scheduling, longest remaining path
    first."""
    after, tail = users(deps), tails(runs, deps)
    waiting = {s: len(ds) for s, ds in deps.items()}
    left = {s: len(r) for s, r in runs.items()}
    ready: list = []

    def release(s: str) -> None:
        for i, sec in enumerate(runs[s]):
            heapq.heappush(ready, (-(sec + tail[s]), s, i, sec))

    for s in sorted(s for s, n in waiting.items() if not n):
        release(s)
    busy: list = []  # (end, stage, run) of the runs under way
    now, free = 0.0, nodes
    while ready or busy:
        while free and ready:
            _, s, i, sec = heapq.heappop(ready)
            heapq.heappush(busy, (now + sec, s, i))
            free -= 1
        now = busy[0][0]
        while busy and busy[0][0] == now:
            _, s, _ = heapq.heappop(busy)
            free += 1
            left[s] -= 1
            if not left[s]:
                for c in after[s]:
                    waiting[c] -= 1
                    if not waiting[c]:
                        release(c)
    return now


def compute(root: Path = ROOT) -> dict:
    """The block's figures from root's committed files."""
    graph = stage_graph(root)
    inp = stage_runs(root, graph)
    length, chain = critical_path(inp["runs"], graph)
    return {
        **inp,
        "total_s": sum(sum(r) for r in inp["runs"].values()),
        "critical_s": length,
        "chain": [(s, max(inp["runs"][s])) for s in chain],
        "walls": {n: schedule(inp["runs"], graph, n) for n in NODES},
    }


def hours(s: float) -> str:
    return f"{s / 3600:,.2f}"


def markdown(r: dict) -> list[str]:
    """The block's lines: what the figures rest on, the table, the chain on the critical path."""
    one, cp = r["total_s"], r["critical_s"]

    def bound(n: int) -> str:
        return (
            f"critical path, {hours(cp)} h"
            if cp >= one / n
            else f"machine time ÷ {n}, {hours(one / n)} h"
        )

    rows = [
        [
            f"the logs' machine ({r['cores']} cores, measured)",
            hours(r["measured_s"]),
            f"{one / r['measured_s']:.1f}×",
            "its measured wall time",
        ],
        ["1", hours(one), "1.0×", "machine time"],
        *([str(n), hours(w), f"{one / w:.1f}×", bound(n)] for n, w in r["walls"].items()),
        ["unlimited", hours(cp), f"{one / cp:.1f}×", "critical path"],
    ]
    lines = [
        (
            "Written by `python benchmarks/critical_path.py --write` from reports/cost.json,"
            " dvc.yaml's stage graph and reports/benchmarks.json. Model (the script's docstring):"
            f" a run on a single-core node takes its stage's machine seconds × the {r['cores']}"
            f" cores of the logs' machine ({r['cpu']}; its core time there, every core busy), a"
            " train stage's split evenly among its runs (seed 0 from the study), a study one run"
            " of its trials in a row; a stage's runs start when the stages it depends on have"
            " finished, longest remaining path first. 0 s, not in the logs:"
            f" {', '.join(r['unlogged']) or 'none'}; low, logged short of their compute floor"
            f" (reports/cost.md): {', '.join(r['short']) or 'none'}."
        ),
        "",
    ]
    lines += table(["nodes", "wall time (h)", "vs 1 node", "bound by"], rows)
    chain = " → ".join(f"`{s}` {sec / 60:,.1f}" for s, sec in r["chain"])
    return lines + [
        "",
        f"The critical path, {hours(cp)} h (minutes per stage, its slowest run): {chain}.",
    ]


def block(lines: list[str]) -> str:
    return "\n".join([START, *lines, END])


def written(md: Path) -> str | None:
    """The block md holds now, markers included; None without the markers."""
    m = re.search(
        rf"{re.escape(START)}.*?{re.escape(END)}", md.read_text(encoding="utf-8"), re.DOTALL
    )
    return m.group(0) if m else None


def write(md: Path, lines: list[str]) -> None:
    """Replace md's block, or append a section with it."""
    text, old, new = md.read_text(encoding="utf-8"), written(md), block(lines)
    md.write_text(
        text.replace(old, new) if old else f"{text.rstrip()}\n\n{HEADING}\n\n{new}\n",
        encoding="utf-8",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    how = ap.add_mutually_exclusive_group()
    how.add_argument(
        "--write", action="store_true", help="replace the block of docs/scaling.md (or append it)"
    )
    how.add_argument(
        "--check", action="store_true", help="exit 1 when docs/scaling.md's block differs"
    )
    ap.add_argument(
        "--root", type=Path, default=ROOT, help="the project whose committed files it reads"
    )
    args = ap.parse_args(argv)
    try:
        lines = markdown(compute(args.root))
    except ArtifactError as err:
        ap.error(str(err))
    md = args.root / "docs" / "scaling.md"
    if args.check:
        if written(md) != block(lines):
            print(
                f"{md}: the critical-path block differs from reports/cost.json's figures: run "
                "`python benchmarks/critical_path.py --write`"
            )
            return 1
        return 0
    if args.write:
        write(md, lines)
        print(f"wrote the critical-path block of {md}")
    else:
        print(block(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
