"""The markdown of benchmarks/compute_floor.py's section of reports/cost.md: the rows, the totals and their notes."""

from __future__ import annotations

from benchmarks.common import num, table

FULL, FRESH = "full re-run with tuning", "fresh clone"  # the labels of compute_floor.totals


def minutes(s: float | None) -> str:
    return num(None if s is None else s / 60)


def ratio(a: float | None, b: float | None) -> str:
    """a ÷ b as '4.2×'; '—' without a figure or for a floor under a second (§4 counts next to none of its work)."""
    return f"{a / b:.1f}×" if a is not None and b is not None and b >= 1 else "—"


def markdown(result: dict) -> list[str]:
    """The section's lines: the rows, the totals (fresh clone last) and what the figures leave out."""
    pk, used = result["peak"], result["floor_peak"]
    lanes = "; ".join(" and ".join(g) for g in [*result["side_by_side"], *result.get("overlapping", [])])
    lines = ["## Against the compute floor", "",
             (f"Written by `python benchmarks/compute_floor.py` ({result['date']}) from the stage times above "
              "(reports/cost.json), a training step's FLOPs (reports/benchmarks.json §4: `FlopCounterMode`, matmuls, "
              "convolutions and attention), each run's `train/steps` × seeds (metrics/<task>/<family>.json, label "
              "fractions included), each study's trials (tuned/<family>.yaml) and the pretraining's steps. **FLOPs "
              "trained** = step FLOPs × updates, every run. **Floor** = FLOPs ÷ the peak of the machine that ran the "
              f"logs ({used['logs_cpu']}): **{used['gflops']:.1f} GFLOP/s**, from {used['source']}, the best "
              "measurement of that CPU. Peak: a float32 `torch.mm` of n×n on every core; this run measured "
              f"{pk['gflops']:.1f} GFLOP/s ({pk['n']}×{pk['n']}, {pk['threads']} threads, best of {pk['repeats']}, "
              f"median {pk['median_gflops']:.1f}, load average {pk['load_before']:.2f} before) on {result['cpu']}; "
              f"§4 measured {num(used['bench_gflops'])} on {used['bench_cpu']}. **Machine minutes**: each log's "
              "wall time (first line to last) shared among its stages by their stage minutes, so two chains side by "
              "side each get half, and logs that ran at the same time share the union of their spans" +
              (f" (logs side by side, one wall time: {lanes})" if lanes else "") + "; "
              "**ratio** = machine minutes ÷ floor: processes side by side count in its favour. Stage minutes are "
              "each stage's own wall time, attempts stopped and resumed included (in brackets: the run paid them). "
              "Evaluation, export and the shared stages train nothing: their time counts in the totals, with no "
              "floor."), ""]
    lines += table(["task", "family", "stage", "runs", "updates", "GFLOP / update", "PFLOP", "floor min",
                    "stage min (stopped)", "machine min", "ratio", "note"],
                   [[r["task"], r["family"], r["kind"], num(r["runs"], 0), num(r["updates"], 0),
                     num(r["gflop_per_update"], 2), num(r["flops"] and r["flops"] / 1e15, 3), minutes(r["floor_s"]),
                     f"{minutes(r['stage_s'])} ({minutes(r['stopped_s'])})" if r["stage_s"] is not None else "—",
                     minutes(r["machine_s"]), ratio(r["machine_s"], r["floor_s"]),
                     r["note"] or ("seed 0 from the study" if r["reused_seed0"] else "")] for r in result["rows"]])
    fresh = (f"a fresh clone (every stage but {', '.join(f'`{s}@*`' for s in result['not_fresh'])}, whose "
             "tuned/*.yaml are in git)")
    lines += ["", (f"Per task, the full re-run with tuning (every row: the run these logs record) and {fresh}:"
                   if any(t["label"] == FULL for t in result["totals"]) else
                   f"Per task, and in total {fresh}: these logs ran no study"), ""]
    lines += table(["total", "PFLOP", "floor min", "stage min (stopped)", "stage min ÷ floor", "machine min", "ratio"],
                   [[f"**{t['label']}**" if t["label"] in (FULL, FRESH) else t["label"], num(t["flops"] / 1e15, 3),
                     minutes(t["floor_s"]), f"{minutes(t['stage_s'])} ({minutes(t['stopped_s'])})",
                     ratio(t["stage_s"], t["floor_s"]), minutes(t["machine_s"]), ratio(t["machine_s"], t["floor_s"])]
                    for t in result["totals"]])
    return lines + notes(result)


def notes(result: dict) -> list[str]:
    """What the totals leave out or assume: seed 0 from the studies, the studies' widths, logs side by side, gaps."""
    s0, fresh = result["fresh_seed0"], result["totals"][-1]
    floor0 = s0["flops"] / (result["floor_peak"]["gflops"] * 1e9)
    lines = [""]
    if s0["families"]:
        lines.append(f"- Seed 0 from the study: where these logs ran a family's study, its train stage took seed 0's "
                     "run from the best trial (docs/pipeline.md, \"The first seed is the best tuning trial\"), so those "
                     "updates count in tune, not in train (assumed whenever the study finished in these logs). A "
                     f"fresh clone runs none of those studies and trains seed 0 of {len(s0['families'])} families "
                     f"again: {s0['updates']:,.0f} updates, {s0['flops'] / 1e15:.3f} PFLOP, {floor0 / 60:.1f} floor "
                     f"min, not in the fresh clone's row above; with them its floor is "
                     f"{(fresh['floor_s'] + floor0) / 60:.1f} min.")
    lines += [("- A study's FLOPs are its trials' updates at the chosen configuration's step FLOPs: trials that "
               "searched widths (hidden_dim, attn_dim, …) had other step FLOPs, which tuned/*.yaml does not record."),
              ("- A log's span ends at its file's modification time (reports/cost.json `spans`), so logs whose spans "
               "overlap share one wall time. A log read before spans were kept (2026-11-29) has none and counts its "
               "whole wall time unless named with `--side-by-side`."),
              "- A stage these logs only skipped (DVC found its outputs current) counts no FLOPs and no time."]
    for t in (t for t in result["totals"] if t["label"] in (FULL, FRESH)):
        if t["no_floor"] or t["not_logged"]:
            lines.append(f"- {t['label']}: no floor for {', '.join(t['no_floor']) or 'none'} (their time counts, "
                         f"their FLOPs do not); not in the logs: {', '.join(t['not_logged']) or 'none'}.")
    return lines


