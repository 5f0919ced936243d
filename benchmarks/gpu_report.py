"""benchmarks/gpu_check.py's gpu_check.json (from a GPU machine) -> the section `gpu` of reports/benchmarks.md (and its
key in benchmarks.json): the tiny pipeline through the switch, and the quick slices on the GPU beside the same
machine's CPU and this lab's committed CPU runs, the device named."""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from benchmarks.common import ROOT, num, table, write_marked_section

SECTION = "gpu"
SLICES = {"bahdanau": ("translate", None), "bert_minilm": ("classify", "0.1")}  # family: (task, label fraction)


def lab_cpu(family: str) -> dict | None:
    """This lab's committed quick run of the slice (metrics/<task>/<family>.json): mean updates/s and updates per
    run (three seeds side by side, one thread each, on the 2-core machine)."""
    task, fraction = SLICES[family]
    path = ROOT / "metrics" / task / f"{family}.json"
    if not path.is_file():
        return None
    m = json.loads(path.read_text(encoding="utf-8"))
    m = m.get("label_fractions", {}).get(fraction, {}) if fraction else m
    if not m.get("train/train_seconds"):
        return None
    return {"updates_per_s": m["train/steps"] / m["train/train_seconds"], "updates": m["train/steps"]}


def side(figures: dict | None) -> dict:
    """One side of a slice: its runs' mean updates/s, mean updates, mean best validation value, how they stopped."""
    runs = list(((figures or {}).get("runs") or {}).values())
    if not runs:
        return {}
    vals = [r["best_val"] for r in runs if r.get("best_val") is not None]
    return {"runs": len(runs), "updates_per_s": statistics.fmean(r["updates_per_s"] for r in runs),
            "updates": statistics.fmean(r["steps"] for r in runs), "metric": runs[0].get("metric"),
            "val": statistics.fmean(vals) if vals else None, "stopped_by": sorted({r["stopped_by"] for r in runs}),
            "accelerator": sorted({r["accelerator"] for r in runs}), "exit": figures.get("exit"),
            "peak_mib": figures.get("peak_gpu_memory_mib")}


def render(f: dict) -> list[str]:
    """The section's markdown lines."""
    m = f["machine"]
    gpu = m.get("gpu") or f"no GPU ({m['cpu']}: a trial of the script)"
    lines = [f"## GPU: the pipeline's trainer switch on {gpu}", "",
             (f"Produced by `bash benchmarks/gpu_check.sh` on a machine lent with {gpu} ({m['date']}), then "
              "`python -m benchmarks.gpu_report <its gpu_check.json>` here. params.yaml `trainer: gpu` "
              "(conf/trainer/gpu.yaml: one GPU, `deterministic: warn`, precision 32-true, cuDNN without TF32); "
              "docs/scaling.md says how to use it."), ""]
    lines += table(["machine", ""], [["GPU (nvidia-smi)", "; ".join(m.get("nvidia_smi") or []) or "—"],
                                     ["CPU", f"{m['cpu']}, {m['cores']} cores"],
                                     ["torch / CUDA / Python", f"{m['torch']} / {m.get('cuda')} / {m['python']}"],
                                     ["check's own time", f"{num(f.get('seconds'))} s of a {num(f['budget_s'], 0)} s budget"]])
    t = f.get("tiny") or {}
    lines += ["", f"### The tiny profile end to end, `attention-lab repro --trainer {t.get('trainer', 'gpu')}`", ""]
    if "error" in t or not t:
        lines.append(f"Did not run: {t.get('error', 'not in this check')}.")
    else:
        parity = t.get("onnx_parity") or {}
        lines += table(["figure", ""], [
            ["finished", f"{'yes' if t['done'] else 'no'} (exit {t['exit']}) in {num(t['seconds'])} s"],
            ["stages run", t["stages_run"]], ["chains side by side (`--jobs`)", t["jobs"]],
            ["training runs on the GPU (their config.yaml)", f"{t['runs_on_gpu']} of {len(t['runs'])}"],
            ["most processes on the GPU at once", t["most_gpu_processes"] or "— (nvidia-smi lists none here)"],
            ["peak GPU memory in use", f"{num(t['peak_gpu_memory_mib'], 0)} MiB"],
            ["ONNX exports (on the CPU) identical to torch", f"{sum(bool(v) for v in parity.values())} of {len(parity)}"]])
    s = f.get("slices") or {}
    lines += ["", f"### Quick-profile slices: the GPU beside the CPU ({s.get('profile', 'quick')} profile)", ""]
    rows = []
    for family, (task, fraction) in SLICES.items():
        one = s.get(family) or {}
        if not one or "skipped" in one or "gpu" not in one:
            rows.append([f"`{family}`", one.get("skipped", "did not run")] + ["—"] * 7)
            continue
        g, c, lab = side(one.get("gpu")), side(one.get("cpu")), lab_cpu(family)
        label = (f"`{family}`" + (f" at {float(fraction):.0%} labels" if fraction else "")
                 + f" (`{one['command'].split('stages.train ')[1]}`)")
        ratio = g["updates_per_s"] / c["updates_per_s"] if g and c else None
        rows.append([label, g.get("runs", "—"), f"{num(g.get('updates'), 0)} ({', '.join(g.get('stopped_by', []))})",
                     num(g.get("updates_per_s"), 2), f"{num(g.get('val'), 4)} {g.get('metric') or ''}".strip(),
                     num(c.get("updates_per_s"), 2), f"{num(ratio, 1)}×" if ratio else "—",
                     num((lab or {}).get("updates_per_s"), 2), num((lab or {}).get("updates"), 0)])
    lines += table(["slice", "runs side by side", "GPU updates a run (stopped by)", "GPU updates/s a run",
                    "GPU best validation (mean)", f"CPU updates/s a run ({m['cores']}-core machine, 1 thread, capped)",
                    "GPU / CPU", "lab CPU updates/s a run (committed quick run, 2 cores)", "lab CPU updates a run"], rows)
    warned = list(dict.fromkeys(w for part in (t, *(s.get(k) or {} for k in SLICES)) for w in part.get("warnings", [])))
    lines += ["", "Log lines about determinism and precision on the GPU: " + ("none." if not warned else "")]
    lines += [f"- `{w}`" for w in warned]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("figures", type=Path, help="gpu_check.json from the GPU machine")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks.md")
    args = parser.parse_args(argv)
    figures = json.loads(args.figures.read_text(encoding="utf-8"))
    write_marked_section(args.out, SECTION, render(figures), figures)
    print(f"gpu_report: section `{SECTION}` of {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
