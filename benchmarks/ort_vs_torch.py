"""Section 1: greedy decoding of each trained translate family, onnxruntime vs eager torch; session options."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from attention_lab.infer.runtime import DECODER_FILE, ENCODER_FILE, TOKENIZER_FILE, ort_step
from attention_lab.infer.tokenization import load_tokenizer
from attention_lab.translate.serve import OnnxTranslator
from benchmarks.common import ORT_LEVELS, clock, geomean, median, num, table, torch_threads

CONFIGS = [(1, "basic"), (1, "all"), (2, "basic"), (2, "all")]   # (intra-op threads, graph optimisation level)
SERVING_DEFAULT = (1, "basic")   # serving's make_session(threads=1): ORT_ENABLE_BASIC


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
    """A fixed, seeded sample of n rows of the test split (all when n is larger), in file order, with src_ids."""
    from attention_lab.translate.data.batches import load_split

    rows = load_split(prepared, "test", tok)
    keep = sorted(np.random.default_rng(seed).permutation(len(rows))[:n])
    return [rows[i] for i in keep]


def batch1(decode, sources: list[list[int]], repeats: int = 1) -> tuple[float, list]:
    """Median over sentences of one sentence's decode time (ms; its median over repeats), and the hypotheses."""
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
    """Sentences/s decoding in batches of similar length (as evaluation.decode_corpus; median of repeats), hypotheses."""
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    chunks = [order[k:k + batch] for k in range(0, len(order), batch)]
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
    """Batch-1 latency and batch-32 throughput of every family under each session configuration; the chosen one."""
    rows = []
    for fam in families:
        tok = load_tokenizer(fam.onnx / TOKENIZER_FILE)
        sources = [r["src_ids"] for r in test_rows(data / "prepared" / "translate", tok, sizes["sweep"])]
        cells = {}
        for threads, level in CONFIGS:
            decode = ort_decoder(translator(fam.onnx, threads, level))
            cells[(threads, level)] = (batch1(decode, sources)[0], batched(decode, sources, sizes["batch"])[0])
        rows.append((fam.name, cells))
    score = {c: geomean(cells[c][0] for _, cells in rows) for c in CONFIGS}
    return {"rows": rows, "geomean_ms": score, "chosen": min(CONFIGS, key=score.get)}


def compare(fam, data: Path, threads: int, level: str, sizes: dict) -> dict:
    """One family: torch and onnxruntime greedy on the same sentences and max length; speeds and token agreement."""
    from attention_lab.train.checkpoints import count_parameters, load_model
    from attention_lab.translate.search import translate_batch

    tr = translator(fam.onnx, threads, level)
    model, _ = load_model(fam.ckpt)
    ratio = tr.meta["max_len_ratio"]
    rows = test_rows(data / "prepared" / "translate", tr.tokenizer, sizes["sentences"])
    one = [r["src_ids"] for r in rows[:sizes["batch1"]]]
    many = [r["src_ids"] for r in rows]
    ours = ort_decoder(tr)
    with torch_threads(threads):
        def eager(ids):
            return translate_batch(model, ids, beam=1, len_penalty=1.0, max_len_ratio=ratio)

        t1, t_hyps1 = batch1(eager, one, sizes["repeats"])
        o1, o_hyps1 = batch1(ours, one, sizes["repeats"])
        tb, t_hyps = batched(eager, many, sizes["batch"], sizes["repeats"])
        ob, o_hyps = batched(ours, many, sizes["batch"], sizes["repeats"])
    return {"family": fam.name, "params": count_parameters(model), "sentences_b1": len(one), "sentences": len(many),
            "torch_b1_ms": t1, "ort_b1_ms": o1, "speedup_b1": t1 / o1, "torch_b32": tb, "ort_b32": ob,
            "speedup_b32": ob / tb, "agree_b1": agreement(t_hyps1, o_hyps1), "agree_b32": agreement(t_hyps, o_hyps)}


def run(families, data: Path, sizes: dict) -> dict:
    """Section 1 over the translate families that have a checkpoint and an export."""
    todo = [f for f in families if f.task == "translate" and f.ckpt is not None]
    skipped = [f.name for f in families if f.task == "translate" and f.ckpt is None]
    if not todo:
        return {"skipped": skipped, "rows": [], "sweep": None, "chosen": SERVING_DEFAULT}
    found = sweep(todo, data, sizes)
    threads, level = found["chosen"]
    rows = [compare(f, data, threads, level, sizes) for f in todo]
    return {"skipped": skipped, "rows": rows, "sweep": found, "chosen": found["chosen"]}


def render(result: dict, sizes: dict) -> list[str]:
    lines = ["## 1. onnxruntime vs eager torch: greedy decoding", ""]
    if not result["rows"]:
        return lines + ["No translate family with both a checkpoint and an ONNX export was found.", ""]
    found, (threads, level) = result["sweep"], result["chosen"]
    names = [f"{t} thread{'s' if t > 1 else ''}, {lv}" for t, lv in CONFIGS]
    lines += ["### Session options", "",
              (f"onnxruntime only, greedy decoding of {sizes['sweep']} test sentences per family: batch-1 latency "
               f"(median ms over the sentences) and batch-{sizes['batch']} throughput (sentences/s). Level `basic` is "
               "`ORT_ENABLE_BASIC`, `all` is `ORT_ENABLE_ALL` (onnxruntime's default); inter-op threads 1."), "",
              "Batch-1 latency, ms:", ""]
    lines += table(["family", *names], [[name, *(num(cells[c][0], 2) for c in CONFIGS)] for name, cells in found["rows"]]
                   + [["**geometric mean**", *(f"**{num(found['geomean_ms'][c], 2)}**" for c in CONFIGS)]])
    lines += ["", f"Batch-{sizes['batch']} throughput, sentences/s:", ""]
    lines += table(["family", *names], [[name, *(num(cells[c][1]) for c in CONFIGS)] for name, cells in found["rows"]])
    default_ok = found["chosen"] == SERVING_DEFAULT
    lines += ["", (f"**Chosen: {threads} intra-op thread{'s' if threads > 1 else ''}, level `{level}`** (lowest "
              "geometric-mean batch-1 latency). Serving's default (`make_session(threads=1)`, level `basic`) "
              + ("is this setting." if default_ok else
                 f"is not: it measured {num(found['geomean_ms'][SERVING_DEFAULT], 2)} ms against "
                 f"{num(found['geomean_ms'][found['chosen']], 2)} ms.")), ""]
    rows = result["rows"]
    lines += ["### torch vs onnxruntime", "",
              (f"Both sides at {threads} intra-op thread{'s' if threads > 1 else ''} (torch.set_num_threads; the "
               "onnxruntime sessions as chosen above), greedy search of `attention_lab.infer.decoding` over the model's "
               "`decode_step` (torch: `search.translate_batch`, as evaluation decodes) or the decoder-step graph "
               "(`OnnxTranslator.translate_ids`), the export's max_len_ratio. Batch 1: the median over "
               f"{rows[0]['sentences_b1']} seeded test sentences of each one's time (median of {sizes['repeats']} "
               f"pass{'es' if sizes['repeats'] > 1 else ''}); batch {sizes['batch']}: {rows[0]['sentences']} sentences "
               "in batches of similar length. Agreement: % of sentences with identical tokens."), ""]
    b = sizes["batch"]
    lines += table(["family", "params", "torch b1 ms", "ORT b1 ms", "speed-up b1", "≥ 2×", f"torch b{b} sent/s",
                    f"ORT b{b} sent/s", f"speed-up b{b}", "same tokens b1 %", f"same tokens b{b} %"],
                   [[r["family"], f"{r['params']:,}", num(r["torch_b1_ms"], 2), num(r["ort_b1_ms"], 2),
                     f"{r['speedup_b1']:.2f}×", "yes" if r["speedup_b1"] >= 2 else "**no**", num(r["torch_b32"]),
                     num(r["ort_b32"]), f"{r['speedup_b32']:.2f}×", num(r["agree_b1"]), num(r["agree_b32"])]
                    for r in rows])
    met = sum(r["speedup_b1"] >= 2 for r in rows)
    lines += ["", (f"Target (onnxruntime ≥ 2× faster at batch 1 for every family): met for {met} of {len(rows)} "
              f"(lowest {min(r['speedup_b1'] for r in rows):.2f}×).")]
    if result["skipped"]:
        lines += ["", f"Exported but without a checkpoint (not compared): {', '.join(result['skipped'])}."]
    return lines + [""]
