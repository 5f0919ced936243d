"""Speed benchmarks of the exported and trained families -> reports/benchmarks.md (and the figures as .json).

    python benchmarks/speed.py --models models                                   # every measured section
    python benchmarks/speed.py --models /work/run/models --data /work/run/data   # another checkout's models and data
    python benchmarks/speed.py --models models --sections ort,flops --quick      # tiny sizes, about a minute
    python benchmarks/speed.py --sections settings --families bahdanau,han --steps 2   # a fast check of section 6

Sections: ort (1: onnxruntime vs eager torch greedy decoding, session options), flops (4: achieved FLOP/s per family),
settings (6: today's settings against the new ones, the machine's training throughput per family). Sections 2
(our Transformer vs torch.nn.Transformer), 3 (Lightning vs a plain loop) and 5 (dynamic int8 quantisation) are
retired studies: a rewrite keeps them as the earlier run wrote them (docs/benchmarks.md, "Retired studies"). Every
figure is measured by the run; timings share the CPU with whatever else runs, so take the final figures on a quiet
machine.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `python benchmarks/speed.py` finds the package

from benchmarks.common import (
    MARKED,
    ROOT,
    command,
    find_families,
    keep_marked_sections,
    machine,
    shown_path,
    table,
)

SECTIONS = ("ort", "transformer", "lightning", "flops", "quant", "settings")  # the report's sections 1-6, in order
RETIRED = ("transformer", "lightning", "quant")  # studies done: kept as measured (docs/benchmarks.md, Retired studies)
MEASURED = tuple(s for s in SECTIONS if s not in RETIRED)
FULL = {"sentences": 256, "batch1": 100, "sweep": 40, "repeats": 2, "batch": 32,
        "flop_batches": 4, "flop_warmup": 2, "flop_repeats": 3, "mm_n": 2048, "mm_repeats": 5,
        "flop_tasks": ("translate", "classify", "caption"),
        "side_steps": 20, "side_warmup": 3, "side_repeats": 3, "side_timeout": 1800}
QUICK = {**FULL, "sentences": 8, "batch1": 3, "sweep": 3, "repeats": 1, "flop_batches": 1, "flop_warmup": 1,
         "flop_repeats": 1, "mm_n": 256, "mm_repeats": 3, "side_steps": 2, "side_warmup": 1, "side_repeats": 1}


def jsonable(obj):
    """Results -> JSON types (tuple keys joined with '/')."""
    if isinstance(obj, dict):
        return {"/".join(map(str, k)) if isinstance(k, tuple) else str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    return obj if isinstance(obj, str | int | float | bool | type(None)) else str(obj)


def header(args, info: dict, sizes: dict, load: tuple[float, float, float], seconds: float) -> list[str]:
    mode = "quick (tiny sizes: figures only show the benchmark runs)" if args.quick else "full"
    rows = [["CPU", f"{info['cpu']}, {info['cores']} cores"], ["torch", info["torch"]],
            ["onnxruntime", info["onnxruntime"]], ["Python", info["python"]],
            ["torch threads (training sections)", args.threads], ["OMP_NUM_THREADS", info["OMP_NUM_THREADS"]],
            ["load average at start (1, 5, 15 min)", ", ".join(f"{x:.2f}" for x in load)],
            ["models", f"`{shown_path(args.models, '--models')}`"],
            ["data", f"`{shown_path(args.data, '--data')}`"], ["mode", mode],
            ["sections", ", ".join(args.sections)], ["date", args.date], ["run time", f"{seconds:.0f} s"]]
    intro = f"Produced by `{args.command}` (`benchmarks/speed.py`); every figure below comes from that run"
    intro += ", except in the sections marked as kept from an earlier one." if args.kept else "."
    return ["# Speed benchmarks", "", intro, ""] + table(["machine", ""], rows) + [""]


def earlier_sections(md: Path) -> tuple[dict[str, list[str]], dict]:
    """The numbered sections of an earlier report (name -> its lines) and its figures (.json results), to keep."""
    if not md.is_file():
        return {}, {}
    old = MARKED.sub("", md.read_text(encoding="utf-8"))
    command = re.search(r"^Produced by `([^`]+)`", old, re.MULTILINE)
    date = re.search(r"^\| date \| ([^|]+) \|", old, re.MULTILINE)
    cpu = re.search(r"^\| CPU \| ([^|]+) \|", old, re.MULTILINE)  # the kept figures are that machine's
    note = (f"_Kept from an earlier run: `{command.group(1) if command else 'benchmarks/speed.py'}`"
            f"{f', {date.group(1).strip()}' if date else ''}{f', on {cpu.group(1).strip()}' if cpu else ''}._")
    sections = {}
    for number, body in re.findall(r"^## (\d)\. (.*?)(?=^## |\Z)", old, re.MULTILINE | re.DOTALL):
        lines = f"## {number}. {body}".rstrip().splitlines()
        if not any(line.startswith("_Kept from an earlier run") for line in lines):
            lines[1:1] = ["", note]
        sections[SECTIONS[int(number) - 1]] = lines + [""]
    js = md.with_suffix(".json")
    return sections, json.loads(js.read_text(encoding="utf-8")).get("results", {}) if js.is_file() else {}


def targets(results: dict) -> list[str]:
    """The issue's targets against the measured values."""
    rows = []
    if "ort" in results and not results["ort"]["rows"]:
        rows.append(["onnxruntime ≥ 2× eager torch, batch-1 greedy, every translate family",
                     "not measured: no translate family with a checkpoint and an export", "—"])
    if results.get("ort", {}).get("rows"):
        worst = min(results["ort"]["rows"], key=lambda r: r["speedup_b1"])
        met = all(r["speedup_b1"] >= 2 for r in results["ort"]["rows"])
        rows.append(["onnxruntime ≥ 2× eager torch, batch-1 greedy, every translate family",
                     f"lowest {worst['speedup_b1']:.2f}× ({worst['family']})", "met" if met else "**not met**"])
    if "transformer" in results:
        r = results["transformer"]["ratio"]
        rows.append(["our Transformer / torch.nn.Transformer training step ≤ 1.0", f"{r:.3f}",
                     "met" if r <= 1 else "**not met**"])
    if "lightning" in results:
        r = results["lightning"]["ratio"]
        rows.append(["Lightning / plain loop per step ≤ 1.10", f"{r:.3f}", "met" if r <= 1.10 else "**not met**"])
    return (["## Targets", ""] + table(["target", "measured", ""], rows) + [""]) if rows else []


def split_sections(body: list[str]) -> list[list[str]]:
    """This run's body, one list of lines per numbered section."""
    parts: list[list[str]] = []
    for line in body:
        if re.match(r"## \d\. ", line):
            parts.append([])
        parts[-1].append(line)
    return parts


def main(argv: list[str] | None = None) -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=ROOT / "models", help="folder of <family>/{onnx,checkpoints}")
    parser.add_argument("--data", type=Path, default=None, help="folder with prepared/ and tokenized/ (default: "
                        "the data/ beside --models)")
    parser.add_argument("--sections", default=",".join(MEASURED), help=f"comma-separated subset of {MEASURED}")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (about a minute): checks the benchmark runs")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="torch threads for training")
    parser.add_argument("--before", default=None, help="git revision (or folder with params.yaml and conf/) of "
                        "section 6's 'before' settings (default: the commit that last changed dvc.lock, the "
                        "committed full run)")
    parser.add_argument("--families", default=None, help="comma-separated families of section 6 (default: every "
                        "family of every task in params.yaml)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps per process in section 6")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks.md")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if retired := [s for s in args.sections if s in RETIRED]:
        parser.error(f"section(s) {retired} are retired studies, kept as measured (docs/benchmarks.md, Retired "
                     "studies)")
    if unknown := sorted(set(args.sections) - set(SECTIONS)):
        parser.error(f"unknown section(s) {unknown}; choose from {', '.join(MEASURED)}")
    args.command = command(__file__, args.argv)
    args.date = datetime.date.today().isoformat()
    args.data = args.data or args.models.resolve().parent / "data"
    sizes = {**(QUICK if args.quick else FULL), **({"side_steps": args.steps} if args.steps else {})}
    torch.set_num_threads(args.threads)
    load, info, t0 = os.getloadavg(), machine(), time.perf_counter()
    families = find_families(args.models)
    results, body = {}, []

    from benchmarks import ort_vs_torch, train_speed

    if "ort" in args.sections:
        results["ort"] = ort_vs_torch.run(families, args.data, sizes)
        body += ort_vs_torch.render(results["ort"], sizes)
    if "flops" in args.sections:
        results["flops"] = train_speed.flop_rates(families, args.models, args.data, sizes)
        body += train_speed.render_flops(results["flops"])
    if "settings" in args.sections:
        from benchmarks.common import last_run_revision

        only = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else None
        results["settings"] = train_speed.settings_rates(args.before or last_run_revision(), only, args.models, sizes)
        body += train_speed.render_settings(results["settings"])

    seconds = time.perf_counter() - t0
    kept_text, kept_results = earlier_sections(args.out)
    args.kept = [s for s in SECTIONS if s not in args.sections and s in kept_text]
    if args.kept:  # the report's sections in order, the measured ones from this run
        mine = {s: lines for s, lines in zip((s for s in SECTIONS if s in args.sections), split_sections(body))}
        body = [line for s in SECTIONS for line in mine.get(s, kept_text.get(s, []))]
    figures = {**{s: kept_results[s] for s in args.kept if s in kept_results}, **results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(header(args, info, sizes, load, seconds) + targets(figures) + body)
    summary = {"machine": info, "quick": args.quick, "sizes": sizes, "seconds": seconds, "results": figures}
    text, summary = keep_marked_sections(args.out, text, summary)  # e.g. benchmarks/photo_pipeline.py's section
    args.out.write_text(text.rstrip() + "\n", encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(jsonable(summary), indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} and {args.out.with_suffix('.json')} in {seconds:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
