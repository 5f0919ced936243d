"""Section 5: dynamic int8 quantisation (onnxruntime quantize_dynamic) of every export: speed and quality."""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import onnx
from onnxruntime.quantization import QuantType, quantize_dynamic

from attention_lab.infer.runtime import META_FILE, TOKENIZER_FILE
from benchmarks.common import clock, median, num, table
from benchmarks.ort_vs_torch import batch1, batched, ort_decoder, test_rows, translator


def quantize_graph(src: Path, dst: Path) -> str:
    """quantize_dynamic (int8 weights) of one graph -> a note: the quantised ops, and a retry if there was one."""
    note = ""
    logging.disable(logging.WARNING)  # "Please consider to run pre-processing before quantization", once per graph
    try:
        quantize_dynamic(src, dst, weight_type=QuantType.QInt8)
    except onnx.shape_inference.InferenceError as err:  # ONNX shape inference rejects the exporter's value_info
        model = onnx.load(src)  # with its external .data
        del model.graph.value_info[:]  # stale intermediate shapes of the dynamo exporter; inference recomputes them
        quantize_dynamic(model, dst, weight_type=QuantType.QInt8)
        note = f"retried without value_info (`{str(err).splitlines()[0].split('] ')[-1][:80]}`); "
    finally:
        logging.disable(logging.NOTSET)
    ops = Counter(n.op_type for n in onnx.load(dst).graph.node if "Integer" in n.op_type or "Quant" in n.op_type)
    return note + (", ".join(f"{k} {v}" for k, v in sorted(ops.items())) or "nothing quantised")


def quantize_folder(src: Path, dst: Path) -> dict[str, str]:
    """dst: a copy of the exported folder with every *.onnx graph quantised (self-contained, no .data files)."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in (META_FILE, TOKENIZER_FILE):
        shutil.copy(src / name, dst / name)
    return {g.name: quantize_graph(g, dst / g.name) for g in sorted(src.glob("*.onnx"))}


def size_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.glob("*.onnx*")) / 2 ** 20


def translate_scores(folder: Path, data: Path, threads: int, level: str, sizes: dict) -> dict:
    """Batch-1 greedy latency and greedy BLEU (sacrebleu, metrics.corpus_scores) on a fixed test subset."""
    from attention_lab.infer.tokenization import decode
    from attention_lab.results.metrics import corpus_scores

    tr = translator(folder, threads, level)
    rows = test_rows(data / "prepared" / "translate", tr.tokenizer, sizes["quality"]["translate"])
    ms = batch1(ort_decoder(tr), [r["src_ids"] for r in rows[:sizes["batch1"]]])[0]
    _, hyps = batched(ort_decoder(tr), [r["src_ids"] for r in rows], sizes["batch"])
    texts = decode(tr.tokenizer, [h.tokens for h in hyps])
    return {"ms": ms, "metric": corpus_scores(texts, [r["tgt"] for r in rows])["bleu"], "n": len(rows)}


def classify_scores(folder: Path, data: Path, threads: int, sizes: dict) -> dict:
    """Batch-1 latency and accuracy (metrics.classification_scores) on the classify test split."""
    from attention_lab.classify.data.batches import load_documents
    from attention_lab.classify.serve import OnnxClassifier
    from attention_lab.results.metrics import classification_scores

    clf = OnnxClassifier(folder, threads)
    m = clf.meta
    rows = load_documents(data / "prepared" / "classify", "test", clf.tok, clf.labels, m["max_sentences"],
                          m["max_words"], m.get("max_tokens"))[:sizes["quality"]["classify"]]
    one = [r["ids"] for r in rows[:sizes["batch1"]]]
    clf.run(one[:1])  # warm-up
    ms = 1000 * median(clock(clf.run, [ids])[0] for ids in one)
    preds = []
    for k in range(0, len(rows), sizes["batch"]):
        preds += clf.run([r["ids"] for r in rows[k:k + sizes["batch"]]])["logits"].argmax(-1).tolist()
    return {"ms": ms, "metric": 100 * classification_scores([r["y"] for r in rows], preds)["accuracy"], "n": len(rows)}


def caption_scores(folder: Path, data: Path, threads: int, sizes: dict) -> dict:
    """Batch-1 greedy latency and exact caption accuracy on the caption test split."""
    from attention_lab.caption.data.batches import load_canvases
    from attention_lab.caption.serve import OnnxCaptioner

    cap = OnnxCaptioner(folder, threads)
    rows, images = load_canvases(data / "prepared" / "caption", "test", cap.tokenizer)
    n = sizes["quality"]["caption"]
    rows, images = rows[:n], images[:n].astype(np.float32) / 255.0
    cap.caption([images[0]], beam=1)  # warm-up
    ms = 1000 * median(clock(cap.caption, [im], beam=1)[0] for im in images[:sizes["batch1"]])
    texts = []
    for k in range(0, len(rows), sizes["batch"]):
        texts += [c.text for c in cap.caption(list(images[k:k + sizes["batch"]]), beam=1)]
    return {"ms": ms, "metric": 100 * float(np.mean([t == r["caption"] for t, r in zip(texts, rows)])), "n": len(rows)}


METRICS = {"translate": "greedy BLEU", "classify": "accuracy %", "caption": "exact accuracy %"}


def scores(fam, folder: Path, data: Path, threads: int, level: str, sizes: dict) -> dict:
    if fam.task == "translate":
        return translate_scores(folder, data, threads, level, sizes)
    if fam.task == "classify":
        return classify_scores(folder, data, threads, sizes)
    return caption_scores(folder, data, threads, sizes)


def run(families, data: Path, work: Path, threads: int, level: str, sizes: dict) -> dict:
    """Every exported family whose task's test split is under data: fp32 vs int8, or the error that stopped it."""
    rows = []
    for fam in families:
        if not (data / "prepared" / fam.task / "test.jsonl").is_file():
            continue
        row = {"family": fam.name, "task": fam.task, "metric": METRICS[fam.task], "fp32_mb": size_mb(fam.onnx)}
        try:
            row["notes"] = quantize_folder(fam.onnx, work / fam.name)
            row["int8_mb"] = size_mb(work / fam.name)
            row["fp32"] = scores(fam, fam.onnx, data, threads, level, sizes)
            row["int8"] = scores(fam, work / fam.name, data, threads, level, sizes)
        except Exception as err:  # noqa: BLE001 - reported in the table, not hidden
            row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
        rows.append(row)
    return {"rows": rows, "threads": threads, "level": level}


def render(r: dict, sizes: dict) -> list[str]:
    lines = ["## 5. Dynamic int8 quantisation (onnxruntime)", "",
             ("`onnxruntime.quantization.quantize_dynamic(weight_type=QInt8)` of every graph of each export (translate "
              "and caption: encoder and decoder step; classify: the one graph), served by the same onnxruntime code "
              f"at {r['threads']} intra-op thread(s), level `{r['level']}`. Latency: batch 1, median over "
              f"{sizes['batch1']} test examples (translate and caption: greedy search to the end). Quality on a fixed "
              "subset of each test split (n below): translate greedy BLEU (sacrebleu via `metrics.corpus_scores`; "
              "the evaluate stage uses beam search, so BLEU here is not the report's), classify accuracy, caption "
              "exact accuracy."), ""]
    body = []
    for x in r["rows"]:
        if "error" in x:
            body.append([x["family"], x["task"], num(x["fp32_mb"], 2), num(x.get("int8_mb"), 2), "—", "—", "—",
                         x["metric"], "—", "—", "—", "—", f"**failed**: `{x['error']}`"])
            continue
        f, q = x["fp32"], x["int8"]
        notes = "; ".join(f"{g}: {n}" for g, n in x["notes"].items())
        body.append([x["family"], x["task"], num(x["fp32_mb"], 2), num(x["int8_mb"], 2), num(f["ms"], 2),
                     num(q["ms"], 2), f"{f['ms'] / q['ms']:.2f}×", x["metric"], f["n"], num(f["metric"], 2),
                     num(q["metric"], 2), f"{q['metric'] - f['metric']:+.2f}", notes])
    lines += table(["family", "task", "fp32 MB", "int8 MB", "fp32 ms", "int8 ms", "speed-up", "metric", "n",
                    "fp32", "int8", "change", "quantised ops"], body)
    return lines + [""]
