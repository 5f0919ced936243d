"""Speed benchmarks of the exported and trained families -> reports/benchmarks.md (and the figures
as .json).

    python benchmarks/speed.py --models models                                   # every measured
    section python benchmarks/speed.py --models ../other/models --data ../other/data     # another
    clone's python benchmarks/speed.py --models models --sections ort,flops --quick      # tiny
    sizes, about a minute python benchmarks/speed.py --sections settings --families bahdanau,han
    --steps 2   # a fast check of section 6

Sections: ort (1: onnxruntime vs eager torch greedy decoding, session options), flops (4: achieved
FLOP/s per family), settings (6: today's settings against the new ones, the machine's training
throughput per family). Sections 2 (our Transformer vs torch.nn.Transformer), 3 (Lightning vs a
plain loop) and 5 (dynamic int8 quantisation) are retired studies: a rewrite keeps them as the
earlier run wrote them (docs/benchmarks.md, "Retired studies"). Every figure is measured by the run;
timings share the CPU with whatever else runs, so take the final figures on a quiet machine.

Section 1's code is below; sections 4 and 6 are benchmarks/train_speed.py's.
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

# `python benchmarks/speed.py` finds the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import onnxruntime as ort

from attention_lab.infer.runtime import DECODER_FILE, ENCODER_FILE, TOKENIZER_FILE, ort_step
from attention_lab.infer.tokenization import load_tokenizer
from attention_lab.translate.serve import OnnxTranslator
from benchmarks.common import (
    MARKED,
    ORT_LEVELS,
    ROOT,
    clock,
    command,
    find_families,
    geomean,
    keep_marked_sections,
    machine,
    median,
    num,
    shown_path,
    table,
    torch_threads,
)

# the report's sections 1-6, in order
SECTIONS = ("ort", "transformer", "lightning", "flops", "quant", "settings")
# studies done: kept as measured (docs/benchmarks.md, Retired studies)
RETIRED = ("transformer", "lightning", "quant")
MEASURED = tuple(s for s in SECTIONS if s not in RETIRED)
FULL = {
    "sentences": 256,
    "batch1": 100,
    "sweep": 40,
    "repeats": 2,
    "batch": 32,
    "flop_batches": 4,
    "flop_warmup": 2,
    "flop_repeats": 3,
    "mm_n": 2048,
    "mm_repeats": 5,
    "flop_tasks": ("translate", "classify", "caption"),
    "side_steps": 20,
    "side_warmup": 3,
    "side_repeats": 3,
    "side_timeout": 1800,
}
QUICK = {
    **FULL,
    "sentences": 8,
    "batch1": 3,
    "sweep": 3,
    "repeats": 1,
    "flop_batches": 1,
    "flop_warmup": 1,
    "flop_repeats": 1,
    "mm_n": 256,
    "mm_repeats": 3,
    "side_steps": 2,
    "side_warmup": 1,
    "side_repeats": 1,
}


# Section 1: greedy decoding of each trained translate family, onnxruntime vs eager torch;
# session options

CONFIGS = [(1, "basic"), (1, "all"), (2, "basic"), (2, "all")]  # (intra-op threads, graph level)
SERVING_DEFAULT = (1, "basic")  # serving's make_session(threads=1): ORT_ENABLE_BASIC


def session(path: Path, threads: int, level: str) -> ort.InferenceSession:
    """serving's make_session with a chosen graph optimisation level."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.graph_optimization_level = getattr(ort.GraphOptimizationLevel, ORT_LEVELS[level])
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def translator(folder: Path, threads: int, level: str) -> OnnxTranslator:
    """The serving translator of an exported folder, its sessions built with (threads, level)."""
    tr = OnnxTranslator(folder, threads)
    tr.encoder = session(folder / ENCODER_FILE, threads, level)
    tr.decoder = session(folder / DECODER_FILE, threads, level)
    tr.step = ort_step(tr.decoder, tr.meta)
    return tr


def test_rows(prepared: Path, tok, n: int, seed: int = 0) -> list[dict]:
    """A fixed, seeded sample of n rows of the test split (all when n is larger), in file order,
    with src_ids."""
    from attention_lab.translate.data.batches import load_split

    rows = load_split(prepared, "test", tok)
    keep = sorted(np.random.default_rng(seed).permutation(len(rows))[:n])
    return [rows[i] for i in keep]


def batch1(decode, sources: list[list[int]], repeats: int = 1) -> tuple[float, list]:
    """Median over sentences of one sentence's decode time (ms; its median over repeats), and the
    hypotheses."""
    for s in sources[:3]:
        decode([s])  # warm-up
    times, hyps = [[] for _ in sources], [None] * len(sources)
    for _ in range(repeats):
        for i, s in enumerate(sources):
            seconds, out = clock(decode, [s])
            times[i].append(seconds)
            hyps[i] = out[0]
    return 1000 * median(median(t) for t in times), hyps


def batched(decode, sources: list[list[int]], batch: int, repeats: int = 1) -> tuple[float, list]:
    """Sentences/s decoding in batches of similar length (as evaluation.decode_corpus; median of
    repeats), and the hypotheses."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    chunks = [order[k : k + batch] for k in range(0, len(order), batch)]
    decode([sources[i] for i in chunks[0]])  # warm-up
    totals, hyps = [], [None] * len(sources)
    for _ in range(repeats):
        total = 0.0
        for chunk in chunks:
            seconds, out = clock(decode, [sources[i] for i in chunk])
            total += seconds
            for i, h in zip(chunk, out):
                hyps[i] = h
        totals.append(total)
    return len(sources) / median(totals), hyps


def agreement(a: list, b: list) -> float:
    """% of sentences decoded to exactly the same tokens."""
    return 100.0 * float(np.mean([x.tokens == y.tokens for x, y in zip(a, b)]))


def ort_decoder(tr: OnnxTranslator):
    ratio = tr.meta["max_len_ratio"]
    return lambda ids: tr.translate_ids(ids, beam=1, len_penalty=1.0, max_len_ratio=ratio)


def sweep(families, data: Path, sizes: dict) -> dict:
    """Batch-1 latency and batch-32 throughput of every family under each session configuration; the
    chosen one."""
    rows = []
    for fam in families:
        tok = load_tokenizer(fam.onnx / TOKENIZER_FILE)
        prepared = data / "prepared" / "translate"
        sources = [r["src_ids"] for r in test_rows(prepared, tok, sizes["sweep"])]
        cells = {}
        for threads, level in CONFIGS:
            decode = ort_decoder(translator(fam.onnx, threads, level))
            cells[(threads, level)] = (
                batch1(decode, sources)[0],
                batched(decode, sources, sizes["batch"])[0],
            )
        rows.append((fam.name, cells))
    score = {c: geomean(cells[c][0] for _, cells in rows) for c in CONFIGS}
    return {"rows": rows, "geomean_ms": score, "chosen": min(CONFIGS, key=score.get)}


def compare(fam, data: Path, threads: int, level: str, sizes: dict) -> dict:
    """One family: torch and onnxruntime greedy on the same sentences and max length; speeds and
    token agreement."""
    from attention_lab.train.checkpoints import count_parameters, load_model
    from attention_lab.translate.search import translate_batch

    tr = translator(fam.onnx, threads, level)
    model, _ = load_model(fam.ckpt)
    ratio = tr.meta["max_len_ratio"]
    rows = test_rows(data / "prepared" / "translate", tr.tokenizer, sizes["sentences"])
    one = [r["src_ids"] for r in rows[: sizes["batch1"]]]
    many = [r["src_ids"] for r in rows]
    ours = ort_decoder(tr)
    with torch_threads(threads):

        def eager(ids):
            return translate_batch(model, ids, beam=1, len_penalty=1.0, max_len_ratio=ratio)

        t1, t_hyps1 = batch1(eager, one, sizes["repeats"])
        o1, o_hyps1 = batch1(ours, one, sizes["repeats"])
        tb, t_hyps = batched(eager, many, sizes["batch"], sizes["repeats"])
        ob, o_hyps = batched(ours, many, sizes["batch"], sizes["repeats"])
    return {
        "family": fam.name,
        "params": count_parameters(model),
        "sentences_b1": len(one),
        "sentences": len(many),
        "torch_b1_ms": t1,
        "ort_b1_ms": o1,
        "speedup_b1": t1 / o1,
        "torch_b32": tb,
        "ort_b32": ob,
        "speedup_b32": ob / tb,
        "agree_b1": agreement(t_hyps1, o_hyps1),
        "agree_b32": agreement(t_hyps, o_hyps),
    }


def ort_rates(families, data: Path, sizes: dict) -> dict:
    """Section 1 over the translate families that have a checkpoint and an export."""
    todo = [f for f in families if f.task == "translate" and f.ckpt is not None]
    skipped = [f.name for f in families if f.task == "translate" and f.ckpt is None]
    if not todo:
        return {"skipped": skipped, "rows": [], "sweep": None, "chosen": SERVING_DEFAULT}
    found = sweep(todo, data, sizes)
    threads, level = found["chosen"]
    rows = [compare(f, data, threads, level, sizes) for f in todo]
    return {"skipped": skipped, "rows": rows, "sweep": found, "chosen": found["chosen"]}


def render_ort(result: dict, sizes: dict) -> list[str]:
    lines = ["## 1. onnxruntime vs eager torch: greedy decoding", ""]
    if not result["rows"]:
        return lines + [
            "No translate family with both a checkpoint and an ONNX export was found.",
            "",
        ]
    found, (threads, level) = result["sweep"], result["chosen"]
    names = [f"{t} thread{'s' if t > 1 else ''}, {lv}" for t, lv in CONFIGS]
    lines += [
        "### Session options",
        "",
        (
            f"onnxruntime only, greedy decoding of {sizes['sweep']} test sentences per family: "
            "batch-1 latency (median ms over the sentences) and "
            f"batch-{sizes['batch']} throughput (sentences/s). Level `basic` is "
            "`ORT_ENABLE_BASIC`, `all` is `ORT_ENABLE_ALL` (onnxruntime's default); inter-op "
            "threads 1."
        ),
        "",
        "Batch-1 latency, ms:",
        "",
    ]
    lines += table(
        ["family", *names],
        [[name, *(num(cells[c][0], 2) for c in CONFIGS)] for name, cells in found["rows"]]
        + [["**geometric mean**", *(f"**{num(found['geomean_ms'][c], 2)}**" for c in CONFIGS)]],
    )
    lines += ["", f"Batch-{sizes['batch']} throughput, sentences/s:", ""]
    lines += table(
        ["family", *names],
        [[name, *(num(cells[c][1]) for c in CONFIGS)] for name, cells in found["rows"]],
    )
    default_ok = found["chosen"] == SERVING_DEFAULT
    plural = "s" if threads > 1 else ""
    lines += [
        "",
        (
            f"**Chosen: {threads} intra-op thread{plural}, level `{level}`** "
            "(lowest geometric-mean batch-1 latency). Serving's default "
            "(`make_session(threads=1)`, level `basic`) "
            + (
                "is this setting."
                if default_ok
                else f"is not: it measured {num(found['geomean_ms'][SERVING_DEFAULT], 2)} ms "
                f"against {num(found['geomean_ms'][found['chosen']], 2)} ms."
            )
        ),
        "",
    ]
    rows = result["rows"]
    lines += [
        "### torch vs onnxruntime",
        "",
        (
            f"Both sides at {threads} intra-op thread{plural} "
            "(torch.set_num_threads; the onnxruntime sessions as chosen above), greedy search "
            "of `attention_lab.infer.decoding` over the model's `decode_step` (torch: "
            "`search.translate_batch`, as evaluation decodes) or the decoder-step graph "
            "(`OnnxTranslator.translate_ids`), the export's max_len_ratio. Batch 1: the median "
            f"over {rows[0]['sentences_b1']} seeded test sentences of each one's time "
            f"(median of {sizes['repeats']} pass{'es' if sizes['repeats'] > 1 else ''}); "
            f"batch {sizes['batch']}: {rows[0]['sentences']} sentences in batches of similar "
            "length. Agreement: % of sentences with identical tokens."
        ),
        "",
    ]
    b = sizes["batch"]
    lines += table(
        [
            "family",
            "params",
            "torch b1 ms",
            "ORT b1 ms",
            "speed-up b1",
            "≥ 2×",
            f"torch b{b} sent/s",
            f"ORT b{b} sent/s",
            f"speed-up b{b}",
            "same tokens b1 %",
            f"same tokens b{b} %",
        ],
        [
            [
                r["family"],
                f"{r['params']:,}",
                num(r["torch_b1_ms"], 2),
                num(r["ort_b1_ms"], 2),
                f"{r['speedup_b1']:.2f}×",
                "yes" if r["speedup_b1"] >= 2 else "**no**",
                num(r["torch_b32"]),
                num(r["ort_b32"]),
                f"{r['speedup_b32']:.2f}×",
                num(r["agree_b1"]),
                num(r["agree_b32"]),
            ]
            for r in rows
        ],
    )
    met = sum(r["speedup_b1"] >= 2 for r in rows)
    lines += [
        "",
        (
            f"Target (onnxruntime ≥ 2× faster at batch 1 for every family): met for {met} "
            f"of {len(rows)} (lowest {min(r['speedup_b1'] for r in rows):.2f}×)."
        ),
    ]
    if result["skipped"]:
        skipped = ", ".join(result["skipped"])
        lines += ["", f"Exported but without a checkpoint (not compared): {skipped}."]
    return lines + [""]


# The report


def jsonable(obj):
    """Results -> JSON types (tuple keys joined with '/')."""
    if isinstance(obj, dict):
        return {
            "/".join(map(str, k)) if isinstance(k, tuple) else str(k): jsonable(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    return obj if isinstance(obj, str | int | float | bool | type(None)) else str(obj)


def header(
    args, info: dict, sizes: dict, load: tuple[float, float, float], seconds: float
) -> list[str]:
    mode = "quick (tiny sizes: figures only show the benchmark runs)" if args.quick else "full"
    rows = [
        ["CPU", f"{info['cpu']}, {info['cores']} cores"],
        ["torch", info["torch"]],
        ["onnxruntime", info["onnxruntime"]],
        ["Python", info["python"]],
        ["torch threads (training sections)", args.threads],
        ["OMP_NUM_THREADS", info["OMP_NUM_THREADS"]],
        ["load average at start (1, 5, 15 min)", ", ".join(f"{x:.2f}" for x in load)],
        ["models", f"`{shown_path(args.models, '--models')}`"],
        ["data", f"`{shown_path(args.data, '--data')}`"],
        ["mode", mode],
        ["sections", ", ".join(args.sections)],
        ["date", args.date],
        ["run time", f"{seconds:.0f} s"],
    ]
    intro = (
        f"Produced by `{args.command}` (`benchmarks/speed.py`); every figure below comes from"
        " that run"
    )
    intro += ", except in the sections marked as kept from an earlier one." if args.kept else "."
    return ["# Speed benchmarks", "", intro, ""] + table(["machine", ""], rows) + [""]


def earlier_sections(md: Path) -> tuple[dict[str, list[str]], dict]:
    """The numbered sections of an earlier report (name -> its lines) and its figures (.json
    results), to keep."""
    if not md.is_file():
        return {}, {}
    old = MARKED.sub("", md.read_text(encoding="utf-8"))
    command = re.search(r"^Produced by `([^`]+)`", old, re.MULTILINE)
    date = re.search(r"^\| date \| ([^|]+) \|", old, re.MULTILINE)
    # the kept figures are that machine's
    cpu = re.search(r"^\| CPU \| ([^|]+) \|", old, re.MULTILINE)
    when = f", {date.group(1).strip()}" if date else ""
    where = f", on {cpu.group(1).strip()}" if cpu else ""
    note = (
        f"_Kept from an earlier run: `{command.group(1) if command else 'benchmarks/speed.py'}`"
        f"{when}{where}._"
    )
    sections = {}
    for number, body in re.findall(r"^## (\d)\. (.*?)(?=^## |\Z)", old, re.MULTILINE | re.DOTALL):
        lines = f"## {number}. {body}".rstrip().splitlines()
        if not any(line.startswith("_Kept from an earlier run") for line in lines):
            lines[1:1] = ["", note]
        sections[SECTIONS[int(number) - 1]] = lines + [""]
    js = md.with_suffix(".json")
    return sections, json.loads(js.read_text(encoding="utf-8")).get(
        "results", {}
    ) if js.is_file() else {}


def targets(results: dict) -> list[str]:
    """The issue's targets against the measured values."""
    rows = []
    if "ort" in results and not results["ort"]["rows"]:
        rows.append(
            [
                "onnxruntime ≥ 2× eager torch, batch-1 greedy, every translate family",
                "not measured: no translate family with a checkpoint and an export",
                "—",
            ]
        )
    if results.get("ort", {}).get("rows"):
        worst = min(results["ort"]["rows"], key=lambda r: r["speedup_b1"])
        met = all(r["speedup_b1"] >= 2 for r in results["ort"]["rows"])
        rows.append(
            [
                "onnxruntime ≥ 2× eager torch, batch-1 greedy, every translate family",
                f"lowest {worst['speedup_b1']:.2f}× ({worst['family']})",
                "met" if met else "**not met**",
            ]
        )
    if "transformer" in results:
        r = results["transformer"]["ratio"]
        rows.append(
            [
                "our Transformer / torch.nn.Transformer training step ≤ 1.0",
                f"{r:.3f}",
                "met" if r <= 1 else "**not met**",
            ]
        )
    if "lightning" in results:
        r = results["lightning"]["ratio"]
        rows.append(
            [
                "Lightning / plain loop per step ≤ 1.10",
                f"{r:.3f}",
                "met" if r <= 1.10 else "**not met**",
            ]
        )
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
    parser.add_argument(
        "--models", type=Path, default=ROOT / "models", help="folder of <family>/{onnx,checkpoints}"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="folder with prepared/ and tokenized/ (default: the data/ beside --models)",
    )
    parser.add_argument(
        "--sections", default=",".join(MEASURED), help=f"comma-separated subset of {MEASURED}"
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes (about a minute): checks the benchmark runs",
    )
    parser.add_argument(
        "--threads", type=int, default=torch.get_num_threads(), help="torch threads for training"
    )
    parser.add_argument(
        "--before",
        default=None,
        help="git revision (or folder with params.yaml and conf/) of "
        "section 6's 'before' settings (default: the commit that last changed dvc.lock, the "
        "committed full run)",
    )
    parser.add_argument(
        "--families",
        default=None,
        help="comma-separated families of section 6 (default: every "
        "family of every task in params.yaml)",
    )
    parser.add_argument(
        "--steps", type=int, default=None, help="timed steps per process in section 6"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks.md")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    args.sections = [s.strip() for s in args.sections.split(",") if s.strip()]
    if retired := [s for s in args.sections if s in RETIRED]:
        parser.error(
            f"section(s) {retired} are retired studies, kept as measured (docs/benchmarks.md,"
            " Retired studies)"
        )
    if unknown := sorted(set(args.sections) - set(SECTIONS)):
        parser.error(f"unknown section(s) {unknown}; choose from {', '.join(MEASURED)}")
    args.command = command(__file__, args.argv)
    args.date = datetime.date.today().isoformat()
    args.data = args.data or args.models.resolve().parent / "data"
    sizes = {
        **(QUICK if args.quick else FULL),
        **({"side_steps": args.steps} if args.steps else {}),
    }
    torch.set_num_threads(args.threads)
    load, info, t0 = os.getloadavg(), machine(), time.perf_counter()
    families = find_families(args.models)
    results, body = {}, []

    from benchmarks import train_speed

    if "ort" in args.sections:
        results["ort"] = ort_rates(families, args.data, sizes)
        body += render_ort(results["ort"], sizes)
    if "flops" in args.sections:
        results["flops"] = train_speed.flop_rates(families, args.models, args.data, sizes)
        body += train_speed.render_flops(results["flops"])
    if "settings" in args.sections:
        from benchmarks.common import last_run_revision

        only = [f.strip() for f in args.families.split(",") if f.strip()] if args.families else None
        results["settings"] = train_speed.settings_rates(
            args.before or last_run_revision(), only, args.models, sizes
        )
        body += train_speed.render_settings(results["settings"])

    seconds = time.perf_counter() - t0
    kept_text, kept_results = earlier_sections(args.out)
    args.kept = [s for s in SECTIONS if s not in args.sections and s in kept_text]
    if args.kept:  # the report's sections in order, the measured ones from this run
        mine = {
            s: lines
            for s, lines in zip((s for s in SECTIONS if s in args.sections), split_sections(body))
        }
        body = [line for s in SECTIONS for line in mine.get(s, kept_text.get(s, []))]
    figures = {**{s: kept_results[s] for s in args.kept if s in kept_results}, **results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(header(args, info, sizes, load, seconds) + targets(figures) + body)
    summary = {
        "machine": info,
        "quick": args.quick,
        "sizes": sizes,
        "seconds": seconds,
        "results": figures,
    }
    # e.g. benchmarks/photo_pipeline.py's section
    text, summary = keep_marked_sections(args.out, text, summary)
    args.out.write_text(text.rstrip() + "\n", encoding="utf-8")
    args.out.with_suffix(".json").write_text(
        json.dumps(jsonable(summary), indent=1) + "\n", encoding="utf-8"
    )
    print(
        f"wrote {args.out} and {args.out.with_suffix('.json')} in {seconds:.0f} s", file=sys.stderr
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
