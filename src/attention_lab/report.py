"""The comparison reports: one Markdown page per task, built only from the metrics files of the evaluate stages."""

from __future__ import annotations

import math
from pathlib import Path

from attention_lab.metrics import bucket_key, bucket_label
from attention_lab.statistics import ALPHA, HEADLINE, PAIRED_TEST, seed_interval

DIGITS = {"test/bleu": 1, "test/chrf": 1}  # scores on 0..100; fractions (accuracy, macro-F1) get 3 decimals
SPEED = {"translate": "train tok/s"}  # the train/train_tokens_per_s column; words for the other tasks
BANDS = "Lines: mean over seeds; bands: ± sd over seeds (none with one seed)."


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


def bucket_series(results: dict[str, dict], buckets, metric: str = "bleu") -> dict[str, dict[str, tuple]]:
    """{family: {bucket label: (mean test/<metric>_len_<bucket>, its sd over the per-seed scores or None)}} for the
    by-length plots."""
    out = {}
    for f, m in results.items():
        out[f] = {}
        for b in buckets:
            key = f"test/{metric}_len_{bucket_key(b)}"
            if key in m:
                scores = [s[key] for s in m.get("per_seed", {}).values() if key in s]
                out[f][bucket_label(b)] = (m[key], seed_interval(scores)["sd"] if len(scores) > 1 else None)
    return out


def headline(m: dict, key: str) -> dict:
    """A family's mean, sd and 95% interval of a headline metric, as the evaluate stage wrote them (None: absent)."""
    return {"mean": m.get(key), "sd": m.get(f"{key}_sd"), "low": m.get(f"{key}_ci95_low"),
            "high": m.get(f"{key}_ci95_high")}


def ranked(results: dict[str, dict], key: str) -> list[str]:
    """Families by mean `key`, best first; families without a finite value last, in their own order."""
    def score(f: str) -> float:
        v = results[f].get(key)
        return -v if isinstance(v, (int, float)) and math.isfinite(v) else math.inf

    return sorted(results, key=score)


def pareto_front(points: dict[str, tuple[float, float]]) -> list[str]:
    """Families no other family dominates (as cheap or cheaper and as good or better, one strictly), by cost:
    {family: (cost, quality)}."""
    def dominated(f: str) -> bool:
        c, q = points[f]
        return any(c2 <= c and q2 >= q and (c2, q2) != (c, q) for g, (c2, q2) in points.items() if g != f)

    return sorted((f for f in points if not dominated(f)), key=lambda f: points[f][0])


def marks(significance: dict, key: str) -> str:
    """† where the family differs from the baseline at p < ALPHA, ‡ where it differs from the best family."""
    return (("†" if significance.get("p_baseline", {}).get(key, 1.0) < ALPHA else "")
            + ("‡" if significance.get("p_best", {}).get(key, 1.0) < ALPHA else ""))


def ranking_table(task: str, results: dict[str, dict], significance: dict[str, dict]) -> str:
    """Markdown: families by mean headline metric, with mean ± sd (and marks), 95% t-interval over seeds, size and
    speed; significance: {family: {"p_baseline": {metric: p}, "p_best": {...}}}."""
    keys = HEADLINE[task]
    head = ["rank", "family", *[c for k, name in keys.items() for c in (f"{name} (mean ± sd)", f"{name} 95% interval")],
            "params", "train time (s)", SPEED.get(task, "train words/s")]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rank, family in enumerate(ranked(results, next(iter(keys))), 1):
        m, cells = results[family], []
        for key in keys:
            h, d = headline(m, key), DIGITS.get(key, 3)
            interval = "—" if h["low"] is None else f"[{fmt(h['low'], d)}, {fmt(h['high'], d)}]"
            cells += [f"{fmt(h['mean'], d)} ± {fmt(h['sd'], d)}{marks(significance.get(family, {}), key)}", interval]
        lines.append("| " + " | ".join([str(rank), f"`{family}`", *cells, fmt(int(m["train/params"])),
                                        fmt(m["train/train_seconds"], 0), fmt(m["train/train_tokens_per_s"], 0)])
                     + " |")
    return "\n".join(lines)


def ranking_section(task: str, results: dict[str, dict], significance: dict[str, dict], methods: dict[str, str],
                    baseline: str, best: str, front: list[str]) -> list[str]:
    """The page's ranking: table, how the marks were tested, and the quality-against-train-time picture."""
    keys = HEADLINE[task]
    seeds = next(iter(results.values())).get("seeds", [])
    tested = "; ".join(f"{keys[k]}: {how}" for k, how in methods.items()) or "none"
    untested = [name for k, name in keys.items() if k not in PAIRED_TEST]
    first = keys[next(iter(keys))]
    return [
        "## Ranking", "", ranking_table(task, results, significance), "",
        (f"Families ranked by mean {first} over {len(seeds)} seed(s) {list(seeds)}; ± is the sample sd over seeds and "
         "the interval a 95% Student-t interval over seeds (— with one seed). "
         f"† = differs from the baseline `{baseline}` (the first of `{task}.families`: in timeline order, no "
         f"attention), ‡ = differs from the best family `{best}`, each at p < {ALPHA} by a paired test on the same "
         "test examples. "
         "Seed k of one family is paired with seed k of the other and the pairs of all seeds are concatenated. "
         f"Tests: {tested}"
         + (f"; {', '.join(untested)}: no paired test" if untested else "")
         + f". Every p-value is in `metrics/{task}_summary.json` (`significance`)."), "",
        f"### {first} against train time", "",
        f"![{first} against train time]({task}/pareto.png)", "",
        ("One point per family (mean over seeds, bars ± sd); the Pareto front, families that no other family beats "
         f"on both {first} and train time, is {', '.join(f'`{f}`' for f in front)}."), ""]


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
                    cfg_lines: list[str], pretrained: dict[str, dict] | None = None, ranking: list[str] = ()) -> str:
    """reports/classify.md; picture paths are relative to the report file (PNG shown, HTML twin linked)."""
    out = ["# Results: classify", "",
           "Generated by `dvc repro` (stage `report@classify`) from `metrics/classify/*.json`; do not edit by hand.", "",
           *cfg_lines, "", *ranking, "## All figures", "", classify_table(results, buckets, top_k), "",
           ("Rationale acc: share of test documents with gold key sentences whose most attended sentence is one of "
            f"them (word-level families: a sentence's weight is the sum of its words'). Word P@{top_k}: share of "
            f"the {top_k} most attended words that are gold key words. Hop overlap: mean pairwise overlap "
            "Σ_t min(a_i, a_j) of the self-attentive hops (1 = identical, 0 = disjoint). — = no attention."), "",
           "## Accuracy by document length", "", "![accuracy by length](classify/accuracy_by_length.png)", "", BANDS,
           ""]
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


def render_translate(task: str, results: dict[str, dict], buckets, heatmaps: dict[str, list[str]], cfg_lines: list[str],
                     ranking: list[str] = ()) -> str:
    """The whole Markdown report; image paths are relative to the report file."""
    any_m = next(iter(results.values()))
    out = [f"# Results: {task}", "",
           f"Generated by `dvc repro` (stage `report@{task}`) from `metrics/{task}/*.json`; do not edit by hand.", "",
           *cfg_lines, "", *ranking, "## All figures", "", results_table(results, buckets), "",
           f"BLEU: `{any_m.get('test/bleu_signature', '')}`  ",
           f"chrF: `{any_m.get('test/chrf_signature', '')}`  ",
           ("AER: teacher-forced attention on the reference, summed over source subwords and averaged over target "
            "subwords per word, each target word aligned to its most-attended source word (Transformer: last decoder "
            "layer, mean over heads). — = the family has no attention."), "",
           "## BLEU by source length", "", f"![BLEU by source length]({task}/bleu_by_length.png)", "", BANDS, ""]
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


def render_caption(results: dict[str, dict], buckets, overlays: dict[str, list[str]], cfg_lines: list[str],
                   ranking: list[str] = ()) -> str:
    """reports/caption.md; picture paths are relative to the report file."""
    out = ["# Results: caption", "",
           "Generated by `dvc repro` (stage `report@caption`) from `metrics/caption/*.json`; do not edit by hand.", "",
           *cfg_lines, "", *ranking, "## All figures", "", caption_table(results, buckets), "",
           ("Exact accuracy: share of test canvases whose caption is exactly right; BLEU-4 is sacrebleu's corpus BLEU "
            "on the caption words (0 on captions of two or three words: they have no 4-grams). Localisation: while "
            "each gold digit word is emitted (teacher forced), the share of steps whose most attended grid cell has its centre inside that digit's gold box. — = no attention. "
            "Test canvases use source scans that no training canvas uses."), "",
           "## Exact accuracy by number of digits", "", "![accuracy by digits](caption/accuracy_by_length.png)", "",
           BANDS, ""]
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


def fmt_p(p: float | None) -> str:
    return "—" if p is None else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def headline_cell(family: str, m: dict, key: str, name: str) -> str:
    """`family`: <name> mean ± sd, for the index."""
    h, digits = headline(m, key), DIGITS.get(key, 3)
    return f"`{family}`: {name} {fmt(h['mean'], digits)} ± {fmt(h['sd'], digits)}"


def render_index(summaries: dict[str, dict[str, dict]]) -> str:
    """reports/index.md: per task (metrics/<task>_summary.json) its page, the first-ranked family and the baseline
    on the ranking metric, and the p-value of their difference."""
    head = ["task", "page", "families", "ranked first", "baseline", "p (first vs baseline)"]
    lines = ["# Results", "",
             "Generated by `dvc repro` (stage `report_index`) from `metrics/<task>_summary.json`; do not edit by hand.",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for task, summary in summaries.items():
        key = next(iter(HEADLINE[task]))
        first = min(summary, key=lambda f: summary[f]["rank"])
        baseline = summary[first]["significance"]["baseline"]
        p = summary[first]["significance"]["p_baseline"].get(key) if first != baseline else None
        cells = [headline_cell(f, summary[f], key, HEADLINE[task][key]) for f in (first, baseline)]
        lines.append("| " + " | ".join([f"`{task}`", f"[{task}.md]({task}.md)", str(len(summary)), *cells, fmt_p(p)])
                     + " |")
    lines += ["", ("Each page ranks its task's families (mean ± sd and a 95% interval over seeds, paired significance "
                   "tests against the baseline and the best family), plots quality against train time and scores by "
                   "length, and shows the attention of each family. Ablations: [ablations.md](ablations.md)."), ""]
    return "\n".join(lines)
