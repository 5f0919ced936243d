"""The comparison reports: one Markdown page per task, built only from the metrics files of the evaluate stages."""

from __future__ import annotations

import math
from pathlib import Path

from attention_lab.metrics import bucket_key, bucket_label


def fmt(value, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def length_drop(m: dict, buckets) -> float | None:
    """Relative BLEU drop from the shortest to the longest bucket, in percent (negative = improvement)."""
    first, last = m.get(f"test/bleu_len_{bucket_key(buckets[0])}"), m.get(f"test/bleu_len_{bucket_key(buckets[-1])}")
    return None if not first or last is None else 100.0 * (first - last) / first


def results_table(results: dict[str, dict], buckets) -> str:  # translate
    """Markdown table: one row per family (metrics as written by the evaluate stage, mean over seeds)."""
    head = ["family", "params", "train time (s)", "train tok/s", "decode tok/s", "BLEU", "chrF", "exact match %",
            "AER", *[f"BLEU {bucket_label(b)}" for b in buckets], "drop short→long %"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, m in results.items():
        row = [f"`{family}`", fmt(int(m["train/params"])), fmt(m["train/train_seconds"], 0),
               fmt(m["train/train_tokens_per_s"], 0), fmt(m["test/decode_tokens_per_s"], 0),
               fmt(m["test/bleu"]), fmt(m["test/chrf"]), fmt(m["test/exact_match"]), fmt(m.get("test/aer"), 3),
               *[fmt(m.get(f"test/bleu_len_{bucket_key(b)}")) for b in buckets], fmt(length_drop(m, buckets))]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def splice_results(readme: str, table: str, task: str) -> str:
    """README text with `table` between its `<!-- results:<task>:begin ... -->` and `<!-- results:<task>:end -->`."""
    begin, end = readme.find(f"<!-- results:{task}:begin"), readme.find(f"<!-- results:{task}:end -->")
    if begin < 0 or end < 0:
        raise ValueError(f"README.md has no <!-- results:{task}:begin --> / <!-- results:{task}:end --> markers")
    head = readme[:readme.index("\n", begin) + 1]
    return f"{head}{table}\n{readme[end:]}"


def bucket_series(results: dict[str, dict], buckets, metric: str = "bleu") -> dict[str, dict[str, float]]:
    """{family: {bucket label: test/<metric>_len_<bucket>}} for the by-length plots."""
    return {f: {bucket_label(b): m[f"test/{metric}_len_{bucket_key(b)}"] for b in buckets
                if f"test/{metric}_len_{bucket_key(b)}" in m} for f, m in results.items()}


def classify_table(results: dict[str, dict], buckets, top_k: int) -> str:
    """Markdown table: one row per classify family (fractions in 0..1, mean over seeds)."""
    head = ["family", "params", "train time (s)", "train words/s", "accuracy", "macro-F1",
            *[f"accuracy {bucket_label(b)}" for b in buckets], "rationale acc", f"word P@{top_k}", "hop overlap"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, m in results.items():
        row = [f"`{family}`", fmt(int(m["train/params"])), fmt(m["train/train_seconds"], 0),
               fmt(m["train/train_tokens_per_s"], 0), fmt(m["test/accuracy"], 3), fmt(m["test/macro_f1"], 3),
               *[fmt(m.get(f"test/accuracy_len_{bucket_key(b)}"), 3) for b in buckets],
               fmt(m.get("test/rationale_acc"), 3), fmt(m.get("test/word_p_at_k"), 3), fmt(m.get("test/hop_overlap"), 3)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def fraction_table(results: dict[str, dict]) -> str:
    """Markdown table: accuracy of the families trained on several fractions of the labels, a column per fraction."""
    rows = {f: {1.0: m, **{float(k): v for k, v in m.get("label_fractions", {}).items()}}
            for f, m in results.items() if m.get("label_fractions")}
    if not rows:
        return ""
    fractions = sorted({fr for by in rows.values() for fr in by})
    head = ["family", "params", *[f"accuracy, {fr:.0%} of labels" for fr in fractions],
            *[f"train docs ({fr:.0%})" for fr in fractions]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, by in rows.items():
        lines.append("| " + " | ".join([
            f"`{family}`", fmt(int(by[1.0]["train/params"])),
            *[fmt(by[fr]["test/accuracy"], 3) if fr in by else "—" for fr in fractions],
            *[fmt(int(by[fr]["train/train_documents"])) if fr in by and "train/train_documents" in by[fr] else "—"
              for fr in fractions]]) + " |")
    return "\n".join(lines)


def pretraining_table(pretrained: dict[str, dict]) -> str:
    """Markdown table: where each pretrained family's encoder comes from, and its own pretraining's last validation."""
    head = ["family", "encoder", "params", "pretrain time (s)", "val MLM accuracy", "val perplexity", "val pair accuracy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, p in pretrained.items():
        val = p.get("last_val", {})
        source = (f"pretrained here: masked LM + {p['objective']}, {p['epochs']} epochs" if p["source"] == "mlm"
                  else f"imported: {p['package']}")
        lines.append("| " + " | ".join([f"`{family}`", source, fmt(int(p["params"])), fmt(p.get("train_seconds"), 0),
                                        fmt(val.get("val/mlm_accuracy"), 3), fmt(val.get("val/perplexity"), 2),
                                        fmt(val.get("val/pair_accuracy"), 3)]) + " |")
    return "\n".join(lines)


def render_classify(results: dict[str, dict], buckets, top_k: int, pictures: dict[str, list[str]],
                    cfg_lines: list[str], pretrained: dict[str, dict] | None = None) -> str:
    """reports/classify.md; picture paths are relative to the report file (PNG shown, HTML twin linked)."""
    out = ["# Results: classify", "",
           "Generated by `dvc repro` (stage `report@classify`) from `metrics/classify/*.json`; do not edit by hand.", "",
           *cfg_lines, "", classify_table(results, buckets, top_k), "",
           ("Rationale acc: share of test documents with gold key sentences whose most attended sentence is one of "
            f"them (word-level families: a sentence's weight is the sum of its words'). Word P@{top_k}: share of "
            f"the {top_k} most attended words that are gold key words. Hop overlap: mean pairwise overlap "
            "Σ_t min(a_i, a_j) of the self-attentive hops (1 = identical, 0 = disjoint). — = no attention."), "",
           "## Accuracy by document length", "", "![accuracy by length](classify/accuracy_by_length.png)", ""]
    if fractions := fraction_table(results):
        out += ["## Pretraining against training from scratch, by share of labels", "",
                ("Each family also trains on a stratified fraction of the training labels (the same documents for "
                 "every family), for as many optimisation steps as on all labels."), "", fractions, ""]
    if pretrained:
        out += ["## Pretrained encoders", "", pretraining_table(pretrained), "",
                ("Validation figures are the last pretraining epoch's, on sentence pairs of the validation documents "
                 "with a fixed masking; perplexity = exp(masked-LM loss)."), ""]
    for family, paths in pictures.items():
        if paths:
            out += [f"## Attention: `{family}`", ""]
            for p in paths:
                html = p.replace(".png", ".html")
                out += [f"![{Path(p).stem}]({p})", ""]
                if "document_" in p:
                    out += [f"[interactive page]({html})", ""]
    return "\n".join(out)


def render_translate(task: str, results: dict[str, dict], buckets, heatmaps: dict[str, list[str]], cfg_lines: list[str]) -> str:
    """The whole Markdown report; image paths are relative to the report file."""
    any_m = next(iter(results.values()))
    out = [f"# Results: {task}", "",
           f"Generated by `dvc repro` (stage `report@{task}`) from `metrics/{task}/*.json`; do not edit by hand.", "",
           *cfg_lines, "", results_table(results, buckets), "",
           f"BLEU: `{any_m.get('test/bleu_signature', '')}`  ",
           f"chrF: `{any_m.get('test/chrf_signature', '')}`  ",
           ("AER: teacher-forced attention on the reference, summed over source subwords and averaged over target "
            "subwords per word, each target word aligned to its most-attended source word (Transformer: last decoder "
            "layer, mean over heads). — = the family has no attention."), "",
           "## BLEU by source length", "", f"![BLEU by source length]({task}/bleu_by_length.png)", ""]
    for family, paths in heatmaps.items():
        if paths:
            out += [f"## Attention: `{family}`", "", *[f"![{family} attention {k}]({p})" for k, p in enumerate(paths)], ""]
    return "\n".join(out)


def caption_table(results: dict[str, dict], buckets) -> str:
    """Markdown table: one row per caption family (accuracy and localisation in 0..1, mean over seeds)."""
    head = ["family", "params", "train time (s)", "train words/s", "decode images/s", "BLEU-4", "exact accuracy",
            *[f"exact, {bucket_label(b)} digits" for b in buckets], "localisation"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, m in results.items():
        row = [f"`{family}`", fmt(int(m["train/params"])), fmt(m["train/train_seconds"], 0),
               fmt(m["train/train_tokens_per_s"], 0), fmt(m["test/decode_images_per_s"], 0), fmt(m["test/bleu"]),
               fmt(m["test/accuracy"], 3), *[fmt(m.get(f"test/accuracy_len_{bucket_key(b)}"), 3) for b in buckets],
               fmt(m.get("test/localisation"), 3)]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def render_caption(results: dict[str, dict], buckets, overlays: dict[str, list[str]], cfg_lines: list[str]) -> str:
    """reports/caption.md; picture paths are relative to the report file."""
    out = ["# Results: caption", "",
           "Generated by `dvc repro` (stage `report@caption`) from `metrics/caption/*.json`; do not edit by hand.", "",
           *cfg_lines, "", caption_table(results, buckets), "",
           ("Exact accuracy: share of test canvases whose caption is exactly right; BLEU-4 is sacrebleu's corpus BLEU "
            "on the caption words (0 on captions of two or three words: they have no 4-grams). Localisation: while "
            "each gold digit word is emitted (teacher forced), the share of steps whose most attended grid cell has its centre inside that digit's gold box. — = no attention. "
            "Test canvases use source scans that no training canvas uses."), "",
           "## Exact accuracy by number of digits", "", "![accuracy by digits](caption/accuracy_by_length.png)", ""]
    for family, paths in overlays.items():
        if paths:
            out += [f"## Attention: `{family}`", "",
                    "One panel per emitted word: attention over the CNN grid in red, that word's gold box in green.", "",
                    *[f"![{family} overlay {k}]({p})" for k, p in enumerate(paths)], ""]
    return "\n".join(out)


def task_table(task: str, results: dict[str, dict], cfg) -> str:
    """The results table of a task, as its report page shows it."""
    if task == "classify":
        fractions = fraction_table(results)
        table = classify_table(results, cfg.task.buckets, cfg.evaluate.top_k_words)
        return table + ("\n\n" + fractions if fractions else "")
    if task == "caption":
        return caption_table(results, cfg.task.buckets)
    return results_table(results, cfg.task.buckets)
