"""The pipeline against its compute floor: per family and stage kind, FLOPs trained (step FLOPs ×
updates), the floor at the matmul peak of the machine that ran the logs (measured in this run, or by
benchmarks/speed.py on that CPU), the measured time and their ratio -> a section of reports/cost.md
and key `compute_floor` of reports/cost.json. Reads committed artifacts only: reports/cost.json,
reports/benchmarks.json, the families' records (metrics/, results/), tuned/, params.yaml.

    python benchmarks/compute_floor.py [--out reports/cost] [--side-by-side LOG,LOG]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attention_lab.core.machine import cpu_model
from benchmarks.common import ROOT, num, table, write_marked_section

SECTION = "compute_floor"
KINDS = {
    "tune": "tune",
    "pretrain": "pretrain",
    "train": "train",
    "finetune": "train",
    "evaluate": "evaluate",
    # a stage name's start -> its kind; any other stage is "shared" (prepare, report, ...)
    "export": "export",
}
ORDER = ("tune", "pretrain", "train", "evaluate", "export", "shared")
# a fresh clone runs every stage but tune_<task>@* (tuned/*.yaml are in git); tune_finetuned@*
# depends on models/pretrained, which is not, so it runs again
NOT_FRESH = ("tune_translate", "tune_classify", "tune_caption")
FULL, FRESH = "full re-run with tuning", "fresh clone"  # the labels of totals()


class ArtifactError(ValueError):
    """A committed artifact the floor reads is missing or malformed (the message names the file and
    field)."""


def read(path: Path, *keys: str):
    """path's JSON or YAML, with the nested field keys (a clear error naming both when missing)."""
    if not path.is_file():
        raise ArtifactError(f"{path}: not found")
    try:
        text = path.read_text(encoding="utf-8")
        data = yaml.safe_load(text) if path.suffix == ".yaml" else json.loads(text)
    except (ValueError, yaml.YAMLError) as err:
        raise ArtifactError(f"{path}: not {path.suffix[1:].upper()} ({err})") from err
    for i, k in enumerate(keys):
        if not isinstance(data, dict) or k not in data:
            raise ArtifactError(f"{path}: no field {'.'.join(keys[: i + 1])}")
        data = data[k]
    return data


def matmul_peak(n: int = 2048, repeats: int = 20) -> dict:
    """The machine's float32 peak: best of `repeats` torch.mm of two n × n matrices on every
    core."""
    import torch

    from benchmarks.common import torch_threads

    a, b = torch.randn(n, n), torch.randn(n, n)  # float32
    load = os.getloadavg()[0]
    with torch_threads(os.cpu_count()):
        torch.mm(a, b)
        seconds = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            torch.mm(a, b)
            seconds.append(time.perf_counter() - t0)
        threads = torch.get_num_threads()
    return {
        "gflops": 2 * n**3 / min(seconds) / 1e9,
        "n": n,
        "repeats": repeats,
        "threads": threads,
        "dtype": "float32",
        "median_gflops": 2 * n**3 / sorted(seconds)[len(seconds) // 2] / 1e9,
        # load average over the last minute: other processes lower the peak
        "load_before": load,
    }


def kind_of(stage: str) -> tuple[str, bool]:
    """(kind, whether a fresh clone runs it) of a stage name `<name>@<item>`."""
    name = stage.partition("@")[0]
    kind = next((k for start, k in KINDS.items() if name.startswith(start)), "shared")
    return kind, name not in NOT_FRESH


def step_gflop(bench: dict, metrics: dict) -> dict:
    """family -> GFLOP of one training step from benchmarks.json's section 4, or a str saying why it
    is missing (absent, or measured on another model or batch size than the one trained)."""
    rows = {r["family"]: r for r in bench.get("rows", [])}
    out = {}
    for fam, m in metrics.items():
        r, size = (
            rows.get(fam),
            (m.get("train/params"), m.get("trained_config", {}).get("train.batch_size")),
        )
        if r is None:
            out[fam] = "not in reports/benchmarks.json §4"
        elif (r["params"], r["batch_size"]) != size:
            out[fam] = (
                f"§4 measured {r['params']:,} params at batch {r['batch_size']}, trained {size}"
            )
        else:
            out[fam] = r["mflop_per_step"] / 1e3
    return out


def training_work(kind: str, m: dict, tuned: dict, reused: bool) -> tuple[int, float] | str:
    """(runs, updates) a family's stage of `kind` trained, or a str: why it trains nothing. m: its
    record (results.records); tuned: its tuned/<family>.yaml; reused: its train stage took seed 0
    from the study."""
    if kind == "tune":
        trials = tuned.get("trials") or []
        return len(trials), float(sum(t["updates"] for t in trials))
    if kind == "pretrain":
        p = m.get("pretrain", {})
        return (
            (1, float(p["steps"]))
            if "steps" in p
            else f"not training ({p.get('source', 'no pretrain')})"
        )
    if kind == "train":
        # every seed of the full run and of each fraction
        groups = [m, *m.get("label_fractions", {}).values()]
        runs, updates = (
            sum(len(g["seeds"]) for g in groups),
            sum(g["train/steps"] * len(g["seeds"]) for g in groups),
        )
        best = best_trial_updates(tuned) if reused else 0.0
        return runs - (best > 0), updates - best
    return "not training"


def best_trial_updates(tuned: dict) -> float:
    """Updates of the study's best complete trial: the train stage's seed-0 run when it reuses it; 0
    if none."""
    best = tuned.get("study", {}).get("best_trial")
    done = [t for t in tuned.get("trials") or [] if t["trial"] == best and t["state"] == "complete"]
    return float(done[0]["updates"]) if done else 0.0


def inputs(root: Path, cost_json: Path) -> dict:
    """The committed artifacts the floor reads: params' families, cost_json, benchmarks.json §4,
    metrics, tuned."""
    from attention_lab.core.params import families, pretrained_families, read_params
    from attention_lab.core.task import NAMES as TASKS

    params = read_params(root)
    family_task = {f: t for t in TASKS if t in params for f in families(params, t)}
    cost = {key: read(cost_json, key) for key in ("attempts", "logs", "cpu")}
    # spans (since 2026-11-29) and skipped stages may be absent
    optional = json.loads(cost_json.read_text())
    bench = root / "reports" / "benchmarks.json"
    return {
        "family_task": family_task,
        "pretrained": {f for t in TASKS if t in params for f in pretrained_families(params, t)},
        "attempts": cost["attempts"],
        "logs": cost["logs"],
        "logs_cpu": cost["cpu"],
        "spans": optional.get("spans", {}),
        "skipped": skipped_only(optional.get("skipped", {}), cost["attempts"]),
        "bench": read(bench, "results", "flops"),
        "bench_cpu": read(bench, "machine", "cpu"),
        "metrics": {f: runs_of(root, t, f) for f, t in family_task.items()},
        "tuned": {f: trials_of(root / "tuned" / f"{f}.yaml") for f in family_task},
    }


def skipped_only(skipped: dict[str, list[str]], attempts: list[dict]) -> list[str]:
    """The stages the logs only skipped (DVC found their outputs current) and never ran."""
    ran = {a["stage"] for a in attempts}
    return sorted({stage for stages in skipped.values() for stage in stages} - ran)


def runs_of(root: Path, task: str, family: str) -> dict:
    """A family's record with what training_work reads: seeds, train/steps, per label share."""
    from attention_lab.results import records

    try:
        m = records.read_at(root, task, family)
    except (OSError, TypeError, ValueError) as err:
        raise ArtifactError(str(err)) from err
    for where, g in [
        ("", m),
        *((f"label_fractions.{k}.", v) for k, v in m.get("label_fractions", {}).items()),
    ]:
        if missing := [key for key in ("seeds", "train/steps") if key not in g]:
            raise ArtifactError(f"{task}/{family}'s record: no field {where}{missing[0]}")
    return m


def trials_of(path: Path) -> dict:
    """A tuned/<family>.yaml whose trials each say their number, state and updates."""
    tuned = read(path)
    for t in tuned.get("trials") or []:
        if missing := [key for key in ("trial", "state", "updates") if key not in t]:
            raise ArtifactError(f"{path}: trial {t.get('trial', '?')} has no field {missing[0]}")
    return tuned


def overlapping(spans: dict[str, list[float]]) -> list[tuple[list[str], float]]:
    """Logs whose spans (start, end) overlap, grouped, each group with the length of its spans'
    union."""
    groups: list[tuple[list[str], float]] = []
    end = None
    for start, stop, log in sorted((s, e, log) for log, (s, e) in spans.items()):
        if end is not None and start < end:
            names, wall = groups[-1]
            groups[-1] = ([*names, log], wall + max(0.0, stop - end))
            end = max(end, stop)
        else:
            groups.append(([log], stop - start))
            end = stop
    return groups


def log_groups(
    logs: dict, side_by_side: list[list[str]], spans: dict[str, list[float]] | None
) -> list:
    """(logs, wall seconds) of every group: logs named side by side (started together: the longest
    one's wall time), else logs whose spans overlap (the union of their spans), else a log alone
    (its own wall time)."""
    named = {log for g in side_by_side for log in g}
    timed = {log: span for log, span in (spans or {}).items() if log in logs and log not in named}
    groups = [(g, max(logs[x] for x in g)) for g in side_by_side] + overlapping(timed)
    return groups + [([log], logs[log]) for log in logs if log not in named and log not in timed]


def overlapping_logs(inp: dict) -> list[list[str]]:
    """The groups of two or more logs joined by their spans (not named side by side)."""
    groups = log_groups(inp["logs"], inp["side_by_side"], inp.get("spans"))
    return [g for g, _ in groups if len(g) > 1 and g not in inp["side_by_side"]]


def machine_shares(
    attempts: list[dict],
    logs: dict,
    side_by_side: list[list[str]],
    spans: dict[str, list[float]] | None = None,
) -> dict:
    """log -> machine seconds per stage second: the wall time of the log's group (log_groups) over
    the stage seconds in the group, so stages side by side share it."""
    if unknown := [log for g in side_by_side for log in g if log not in logs]:
        raise ArtifactError(
            f"--side-by-side: no log {', '.join(unknown)} in reports/cost.json `logs`"
        )
    groups = log_groups(logs, side_by_side, spans)
    staged = defaultdict(float)
    for a in attempts:
        staged[a["log"]] += a["seconds"]
    shares = {}
    for g, wall in groups:
        busy = sum(staged[x] for x in g)
        shares |= {x: wall / busy if busy else 1.0 for x in g}
    return shares


def measured(
    attempts: list[dict],
    logs: dict,
    family_task: dict,
    side_by_side: list[list[str]] = (),
    spans: dict[str, list[float]] | None = None,
) -> dict:
    """(task, family, kind) -> stage seconds (all attempts), stopped seconds, machine seconds
    (machine_shares), whether an attempt finished, stage names."""
    from benchmarks.pipeline_cost import task_and_family

    shares = machine_shares(attempts, logs, list(side_by_side), spans)
    out = {}
    for a in attempts:
        task, fam = task_and_family(a["stage"], family_task)
        kind = kind_of(a["stage"])[0]
        r = out.setdefault(
            (task, fam or "(shared stages)", kind),
            {"stage_s": 0.0, "stopped_s": 0.0, "machine_s": 0.0, "stages": [], "finished": False},
        )
        r["stage_s"] += a["seconds"]
        r["stopped_s"] += 0.0 if a["finished"] else a["seconds"]
        r["machine_s"] += a["seconds"] * shares.get(a["log"], 1.0)
        r["finished"] |= a["finished"]
        r["stages"] += [a["stage"]] if a["stage"] not in r["stages"] else []
    return out


def floor_rows(inp: dict, peak_gflops: float) -> list[dict]:
    """One row per (task, family, kind): runs, updates, GFLOP / update, FLOPs, floor seconds at
    peak_gflops, measured seconds (None where not in the logs), a note where a figure is missing or
    the stage trains nothing."""
    ft, pre = inp["family_task"], inp["pretrained"]
    logged = measured(
        inp["attempts"], inp["logs"], ft, inp.get("side_by_side", []), inp.get("spans")
    )
    from benchmarks.pipeline_cost import task_and_family

    # (task, family, kind)
    skipped = {(*task_and_family(s, ft), kind_of(s)[0]) for s in inp.get("skipped", [])}
    gflop = step_gflop(inp["bench"], inp["metrics"])
    keys = (
        set(logged)
        | {(t, f, k) for f, t in ft.items() for k in ("tune", "train")}
        | {(ft[f], f, "pretrain") for f in pre}
    )
    tasks, fams = list(dict.fromkeys(ft.values())), ["(shared stages)", *ft]
    rank = lambda names, x: names.index(x) if x in names else len(names)
    rows = []
    for task, fam, kind in sorted(
        keys, key=lambda k: (rank(tasks, k[0]), rank(fams, k[1]), ORDER.index(k[2]))
    ):
        log = logged.get((task, fam, kind))
        row = {
            "task": task,
            "family": fam,
            "kind": kind,
            "runs": None,
            "updates": None,
            "gflop_per_update": None,
            "flops": None,
            "floor_s": None,
            "note": "not training",
            "reused_seed0": 0.0,
            "skipped": False,
            "fresh": kind_of(log["stages"][0])[1] if log else kind != "tune" or fam in pre,
            **{k: (log[k] if log else None) for k in ("stage_s", "stopped_s", "machine_s")},
        }
        if fam in ft:
            tune = logged.get((task, fam, "tune"))
            # seed 0 = the best trial's run
            reused = kind == "train" and bool(tune and tune["finished"] and log)
            step = (
                gflop.get(f"pretrain@{fam}", "pretraining step not in reports/benchmarks.json §4")
                if kind == "pretrain"
                else gflop[fam]
            )
            # no work: no floor, like a stage of no runs
            if not log and (task, fam, kind) in skipped:
                row |= {
                    "runs": 0,
                    "updates": 0.0,
                    "flops": 0.0,
                    "floor_s": 0.0,
                    "skipped": True,
                    "note": "skipped: DVC found its outputs current",
                }
            else:
                row |= figures(
                    training_work(kind, inp["metrics"][fam], inp["tuned"][fam], reused),
                    step,
                    peak_gflops,
                )
            row["reused_seed0"] = best_trial_updates(inp["tuned"][fam]) if reused else 0.0
        if row["floor_s"] and row["machine_s"] is not None and row["machine_s"] < row["floor_s"]:
            row["note"] = (
                "under its floor, which no machine can be: the logs miss part of this work, or its"
                " share of a wall time it shared is counted short"
            )
        rows.append(row)
    return rows


def figures(work: tuple[int, float] | str, step: float | str, peak_gflops: float) -> dict:
    """A row's runs, updates, FLOPs and floor from its work (training_work) and step GFLOP (or why
    either is missing)."""
    if isinstance(work, str):
        return {"note": work}
    runs, updates = work
    if not runs:
        return {"runs": 0, "updates": 0.0, "flops": 0.0, "floor_s": 0.0, "note": "no runs"}
    if isinstance(step, str):
        return {"runs": runs, "updates": updates, "note": f"step FLOPs missing: {step}"}
    flops = step * 1e9 * updates
    return {
        "runs": runs,
        "updates": updates,
        "gflop_per_update": step,
        "flops": flops,
        "floor_s": flops / (peak_gflops * 1e9),
        "note": "§4 counts next to none of its work" if flops < peak_gflops * 1e9 else "",
    }


def total(rows: list[dict], label: str) -> dict:
    """Rows added up: FLOPs, floor and measured seconds, both ratios; which rows lack a floor or a
    measured time."""
    t = {
        "label": label,
        **{
            k: sum(r[k] or 0.0 for r in rows)
            for k in ("flops", "floor_s", "stage_s", "stopped_s", "machine_s")
        },
        "no_floor": [
            f"{r['kind']}@{r['family']}"
            for r in rows
            if r["runs"] is not None and r["floor_s"] is None
        ],
        "not_logged": [
            f"{r['kind']}@{r['family']}" for r in rows if r["stage_s"] is None and not r["skipped"]
        ],
    }
    t["ratio"] = t["machine_s"] / t["floor_s"] if t["floor_s"] else None
    t["stage_ratio"] = t["stage_s"] / t["floor_s"] if t["floor_s"] else None
    return t


def totals(rows: list[dict]) -> list[dict]:
    """Per task, then the full re-run with tuning (every row; only where the logs ran a study of
    `NOT_FRESH`) and, last, the fresh clone (its stages' rows)."""
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    studies = any(r["stage_s"] is not None for r in rows if not r["fresh"])
    return [
        *(total([r for r in rows if r["task"] == t], t) for t in tasks),
        *([total(rows, FULL)] if studies else []),
        total([r for r in rows if r["fresh"]], FRESH),
    ]


def fresh_seed0(rows: list[dict]) -> dict:
    """Seed-0 runs these logs took from studies a fresh clone does not run (it trains them again):
    updates, FLOPs."""
    tuned_elsewhere = {
        (r["task"], r["family"]) for r in rows if r["kind"] == "tune" and not r["fresh"]
    }
    runs = [
        r
        for r in rows
        if r["kind"] == "train"
        and r["reused_seed0"]
        and (r["task"], r["family"]) in tuned_elsewhere
    ]
    flops = sum(
        r["reused_seed0"] * r["gflop_per_update"] * 1e9
        for r in runs
        if r["gflop_per_update"] is not None
    )
    return {
        "families": [r["family"] for r in runs],
        "updates": sum(r["reused_seed0"] for r in runs),
        "flops": flops,
    }


def floor_peak(inp: dict, peak: dict, here: str) -> dict:
    """The peak the floor divides by: the best measurement of the logs' CPU, this run's (on CPU
    `here`) or §4's of reports/benchmarks.json; this run's, said so, when neither ran on the logs'
    CPU."""
    found = [
        (g, src)
        for g, src, cpu in (
            (peak["gflops"], "this run", here),
            (inp["bench"].get("peak_gflops"), "reports/benchmarks.json §4", inp["bench_cpu"]),
        )
        if g and cpu == inp["logs_cpu"]
    ]
    gflops, source = (
        max(found) if found else (peak["gflops"], "this run, on another CPU than the logs'")
    )
    return {
        "gflops": gflops,
        "source": source,
        "logs_cpu": inp["logs_cpu"],
        "bench_cpu": inp["bench_cpu"],
        "bench_gflops": inp["bench"].get("peak_gflops"),
    }


def compute(
    root: Path = ROOT,
    cost_json: Path | None = None,
    peak: dict | None = None,
    side_by_side: list[list[str]] = (),
) -> dict:
    """The section's figures from root's committed artifacts (stage times: cost_json, else root's
    reports/cost.json), with the peak measured now (unless given); side_by_side: groups of logs that
    ran at the same time."""
    inp = {
        **inputs(root, cost_json or root / "reports" / "cost.json"),
        "side_by_side": list(side_by_side),
    }
    here, peak = cpu_model(), peak or matmul_peak()
    used = floor_peak(inp, peak, here)
    rows = floor_rows(inp, used["gflops"])
    return {
        "date": dt.date.today().isoformat(),
        "cpu": here,
        "peak": peak,
        "floor_peak": used,
        "side_by_side": inp["side_by_side"],
        "overlapping": overlapping_logs(inp),
        "not_fresh": list(NOT_FRESH),
        "rows": rows,
        "totals": totals(rows),
        "fresh_seed0": fresh_seed0(rows),
    }


def refresh(
    out: Path,
    root: Path = ROOT,
    side_by_side: list[list[str]] | None = None,
    peak: dict | None = None,
) -> dict:
    """Write the section of <out>.md and the key of <out>.json from <out>.json's stage times;
    side_by_side None: the groups of the earlier key whose logs <out>.json still has."""
    cost_json = out.with_suffix(".json")
    cost = json.loads(cost_json.read_text()) if cost_json.is_file() else {}
    if side_by_side is None:
        side_by_side = [
            g
            for g in cost.get(SECTION, {}).get("side_by_side", [])
            if set(g) <= set(cost.get("logs", {}))
        ]
    result = compute(root, cost_json, peak, side_by_side)
    write_marked_section(out.with_suffix(".md"), SECTION, markdown(result), result)
    return result


# The section's markdown: the rows, the totals and their notes


def minutes(s: float | None) -> str:
    return num(None if s is None else s / 60)


def ratio(a: float | None, b: float | None) -> str:
    """a ÷ b as '4.2×'; '—' without a figure or for a floor under a second (§4 counts next to none
    of its work)."""
    return f"{a / b:.1f}×" if a is not None and b is not None and b >= 1 else "—"


def markdown(result: dict) -> list[str]:
    """The section's lines: the rows, the totals (fresh clone last) and what the figures leave
    out."""
    pk, used = result["peak"], result["floor_peak"]
    lanes = "; ".join(
        " and ".join(g) for g in [*result["side_by_side"], *result.get("overlapping", [])]
    )
    lines = [
        "## Against the compute floor",
        "",
        (
            f"Written by `python benchmarks/compute_floor.py` ({result['date']}) from the stage"
            " times above (reports/cost.json), a training step's FLOPs (reports/benchmarks.json"
            " §4: `FlopCounterMode`, matmuls, convolutions and attention), each run's"
            " `train/steps` × seeds (metrics/<task>/<family>.json, label fractions included), each"
            " study's trials (tuned/<family>.yaml) and the pretraining's steps. **FLOPs trained**"
            " = step FLOPs × updates, every run. **Floor** = FLOPs ÷ the peak of the machine that"
            f" ran the logs ({used['logs_cpu']}): **{used['gflops']:.1f} GFLOP/s**, from"
            f" {used['source']}, the best measurement of that CPU. Peak: a float32 `torch.mm` of"
            f" n×n on every core; this run measured {pk['gflops']:.1f} GFLOP/s"
            f" ({pk['n']}×{pk['n']}, {pk['threads']} threads, best of {pk['repeats']}, median"
            f" {pk['median_gflops']:.1f}, load average {pk['load_before']:.2f} before) on"
            f" {result['cpu']}; §4 measured {num(used['bench_gflops'])} on {used['bench_cpu']}."
            " **Machine minutes**: each log's wall time (first line to last) shared among its"
            " stages by their stage minutes, so two chains side by side each get half, and logs"
            " that ran at the same time share the union of their spans"
            + (f" (logs side by side, one wall time: {lanes})" if lanes else "")
            + "; **ratio** = machine minutes ÷ floor: processes side by side count in its favour."
            " Stage minutes are each stage's own wall time, attempts stopped and resumed included"
            " (in brackets: the run paid them). Evaluation, export and the shared stages train"
            " nothing: their time counts in the totals, with no floor."
        ),
        "",
    ]
    lines += table(
        [
            "task",
            "family",
            "stage",
            "runs",
            "updates",
            "GFLOP / update",
            "PFLOP",
            "floor min",
            "stage min (stopped)",
            "machine min",
            "ratio",
            "note",
        ],
        [
            [
                r["task"],
                r["family"],
                r["kind"],
                num(r["runs"], 0),
                num(r["updates"], 0),
                num(r["gflop_per_update"], 2),
                num(r["flops"] and r["flops"] / 1e15, 3),
                minutes(r["floor_s"]),
                f"{minutes(r['stage_s'])} ({minutes(r['stopped_s'])})"
                if r["stage_s"] is not None
                else "—",
                minutes(r["machine_s"]),
                ratio(r["machine_s"], r["floor_s"]),
                r["note"] or ("seed 0 from the study" if r["reused_seed0"] else ""),
            ]
            for r in result["rows"]
        ],
    )
    fresh = (
        f"a fresh clone (every stage but {', '.join(f'`{s}@*`' for s in result['not_fresh'])},"
        " whose tuned/*.yaml are in git)"
    )
    lines += [
        "",
        (
            "Per task, the full re-run with tuning (every row: the run these logs record) and"
            f" {fresh}:"
            if any(t["label"] == FULL for t in result["totals"])
            else f"Per task, and in total {fresh}: these logs ran no study"
        ),
        "",
    ]
    lines += table(
        [
            "total",
            "PFLOP",
            "floor min",
            "stage min (stopped)",
            "stage min ÷ floor",
            "machine min",
            "ratio",
        ],
        [
            [
                f"**{t['label']}**" if t["label"] in (FULL, FRESH) else t["label"],
                num(t["flops"] / 1e15, 3),
                minutes(t["floor_s"]),
                f"{minutes(t['stage_s'])} ({minutes(t['stopped_s'])})",
                ratio(t["stage_s"], t["floor_s"]),
                minutes(t["machine_s"]),
                ratio(t["machine_s"], t["floor_s"]),
            ]
            for t in result["totals"]
        ],
    )
    return lines + notes(result)


def notes(result: dict) -> list[str]:
    """What the totals leave out or assume: seed 0 from the studies, the studies' widths, logs side
    by side, gaps."""
    s0, fresh = result["fresh_seed0"], result["totals"][-1]
    floor0 = s0["flops"] / (result["floor_peak"]["gflops"] * 1e9)
    lines = [""]
    if s0["families"]:
        lines.append(
            "- Seed 0 from the study: where these logs ran a family's study, its train stage took"
            " seed 0's run from the best trial (docs/pipeline.md, \"The first seed is the best"
            ' tuning trial"), so those updates count in tune, not in train (assumed whenever the'
            " study finished in these logs). A fresh clone runs none of those studies and trains"
            f" seed 0 of {len(s0['families'])} families again: {s0['updates']:,.0f} updates,"
            f" {s0['flops'] / 1e15:.3f} PFLOP, {floor0 / 60:.1f} floor min, not in the fresh"
            f" clone's row above; with them its floor is {(fresh['floor_s'] + floor0) / 60:.1f}"
            " min."
        )
    lines += [
        (
            "- A study's FLOPs are its trials' updates at the chosen configuration's step FLOPs:"
            " trials that searched widths (hidden_dim, attn_dim, …) had other step FLOPs, which"
            " tuned/*.yaml does not record."
        ),
        (
            "- A log's span ends at its file's modification time (reports/cost.json `spans`), so"
            " logs whose spans overlap share one wall time. A log read before spans were kept"
            " (2026-11-29) has none and counts its whole wall time unless named with"
            " `--side-by-side`."
        ),
        (
            "- A stage these logs only skipped (DVC found its outputs current) counts no FLOPs and"
            " no time."
        ),
    ]
    for t in (t for t in result["totals"] if t["label"] in (FULL, FRESH)):
        if t["no_floor"] or t["not_logged"]:
            lines.append(
                f"- {t['label']}: no floor for {', '.join(t['no_floor']) or 'none'} (their time"
                " counts, their FLOPs do not); not in the logs:"
                f" {', '.join(t['not_logged']) or 'none'}."
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "reports" / "cost",
        help="writes a section of <out>.md and "
        "a key of <out>.json (reads the stage times of <out>.json)",
    )
    ap.add_argument(
        "--root",
        type=Path,
        default=ROOT,
        help="the project whose metrics/, results/, tuned/, reports/ it reads",
    )
    ap.add_argument(
        "--side-by-side",
        action="append",
        metavar="LOG,LOG",
        help=(
            "logs (names in <out>.json) that ran at the same time, started together: their machine"
            " time is the longest one's wall time, not the sum (repeatable; default: the groups"
            " named before)"
        ),
    )
    args = ap.parse_args(argv)
    try:
        groups = None if args.side_by_side is None else [g.split(",") for g in args.side_by_side]
        result = refresh(args.out, args.root, groups)
    except ArtifactError as err:
        ap.error(str(err))
    fresh = result["totals"][-1]
    print(
        f"wrote section {SECTION} of {args.out.with_suffix('.md')} and .json: fresh clone "
        f"{fresh['ratio'] or float('nan'):.1f}× its floor"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
