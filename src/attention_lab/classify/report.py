"""The classify section of the comparison: its results table, its report page (reports/classify.md)
and pictures."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from attention_lab.core.files import read_json
from attention_lab.core.paths import predictions_path
from attention_lab.results import charts
from attention_lab.results.metrics import bucket_key, bucket_label
from attention_lab.results.report import (
    BANDS,
    PROTOCOL,
    bucket_series,
    copy_pictures,
    fmt,
    fmt_p,
    no_attention_note,
)
from attention_lab.results.significance import paired_pvalues


def classify_table(results: dict[str, dict], buckets, top_k: int) -> str:
    """Markdown table: one row per classify family (fractions in 0..1, mean over seeds)."""
    head = [
        "family",
        "params",
        "train time (s)",
        "train words/s",
        "accuracy",
        "macro-F1",
        *[f"accuracy {bucket_label(b)}" for b in buckets],
        "rationale acc",
        f"word P@{top_k}",
        "hop overlap",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, m in results.items():
        row = [
            f"`{family}`",
            fmt(int(m["train/params"])),
            fmt(m["train/train_seconds"], 0),
            fmt(m["train/train_tokens_per_s"], 0),
            fmt(m["test/accuracy"], 3),
            fmt(m["test/macro_f1"], 3),
            *[fmt(m.get(f"test/accuracy_len_{bucket_key(b)}"), 3) for b in buckets],
            fmt(m.get("test/rationale_acc"), 3),
            fmt(m.get("test/word_p_at_k"), 3),
            fmt(m.get("test/hop_overlap"), 3),
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def order_table(results: dict[str, dict]) -> str:
    """Markdown table: test accuracy in order and with each document's tokens shuffled
    (classify/evaluate.py), for the families whose metrics have both (mean over seeds)."""
    rows = {f: m for f, m in results.items() if m.get("test/accuracy_shuffled") is not None}
    if not rows:
        return ""
    lines = ["| family | accuracy | accuracy, tokens shuffled | drop |", "|---|---|---|---|"]
    for family, m in rows.items():
        a, shuffled = m["test/accuracy"], m["test/accuracy_shuffled"]
        lines.append(f"| `{family}` | {fmt(a, 3)} | {fmt(shuffled, 3)} | {fmt(a - shuffled, 3)} |")
    return "\n".join(lines)


ORDER_NOTE = (
    "Each test document is scored again with its tokens shuffled within the document (one fixed"
    " permutation per document, the same for every family and seed). A model that uses word order"
    ' (whose sentiment word belongs to which subject, "not …", "at first …, but …") drops towards'
    " chance; a bag of words scores the same either way. Positions are what let a Transformer"
    " encoder read order: `transformer_encoder` and `bert` bias attention by distance (ALiBi,"
    ' `model.positions: alibi`); the ablation "absolute vs distance-aware positions"'
    " (`transformer_encoder_absolute`: `model.positions: sinusoidal`) is in"
    " [ablations.md](ablations.md)."
)


def fraction_table(results: dict[str, dict]) -> str:
    """Markdown table: accuracy of the families trained on several fractions of the labels, a column
    per fraction."""
    rows = {
        f: {1.0: m, **{float(k): v for k, v in m.get("label_fractions", {}).items()}}
        for f, m in results.items()
        if m.get("label_fractions")
    }
    if not rows:
        return ""
    fractions = sorted({fr for by in rows.values() for fr in by})
    head = [
        "family",
        "params",
        *[f"accuracy, {fr:.0%} of labels" for fr in fractions],
        *[f"train docs ({fr:.0%})" for fr in fractions],
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, by in rows.items():
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{family}`",
                    fmt(int(by[1.0]["train/params"])),
                    *[fmt(by[fr]["test/accuracy"], 3) if fr in by else "—" for fr in fractions],
                    *[
                        fmt(int(by[fr]["train/train_documents"]))
                        if fr in by and "train/train_documents" in by[fr]
                        else "—"
                        for fr in fractions
                    ],
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def pretraining_table(pretrained: dict[str, dict]) -> str:
    """Markdown table: where each pretrained family's encoder comes from, and its own pretraining's
    last validation."""
    head = [
        "family",
        "encoder",
        "params",
        "pretrain time (s)",
        "val MLM accuracy",
        "val perplexity",
        "val pair accuracy",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for family, p in pretrained.items():
        val = p.get("last_val", {})
        source = (
            f"pretrained here: masked LM + {p['objective']}, {p['epochs']} epochs"
            if p["source"] == "mlm"
            else f"imported: {p['package']}"
        )
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{family}`",
                    source,
                    fmt(int(p["params"])),
                    fmt(p.get("train_seconds"), 0),
                    fmt(val.get("val/mlm_accuracy"), 3),
                    fmt(val.get("val/perplexity"), 2),
                    fmt(val.get("val/pair_accuracy"), 3),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


# the pretrained families' twin trained from scratch (same encoder, no pretraining)
SCRATCH = "transformer_encoder"


def pretraining_gain(cfg: DictConfig, results: dict[str, dict]) -> str:
    """Markdown table: each pretrained family's test accuracy against SCRATCH's at every fraction of
    the labels both trained on, the gain, and its exact McNemar p-value (paired by seed and
    document, predictions/classify/)."""

    def by_fraction(predictions: dict) -> dict[str, list]:
        return {"1": predictions["seeds"], **predictions.get("label_fractions", {})}

    pretrained = [f for f, m in results.items() if "pretrain" in m]
    if SCRATCH not in results or not pretrained:
        return ""
    scratch = {"1": results[SCRATCH], **results[SCRATCH].get("label_fractions", {})}
    # read once, paired with every family
    scratch_predictions = read_json(predictions_path(cfg, SCRATCH))
    refs, theirs = scratch_predictions["references"], by_fraction(scratch_predictions)
    lines = [
        "| family | labels | accuracy | `transformer_encoder` | gain | p (McNemar) |",
        "|---|---|---|---|---|---|",
    ]
    for family in pretrained:
        mine = {"1": results[family], **results[family].get("label_fractions", {})}
        outputs = by_fraction(read_json(predictions_path(cfg, family)))
        for fr in sorted(set(mine) & set(scratch) & set(outputs) & set(theirs), key=float):
            p, _ = paired_pvalues(
                {family: outputs[fr], SCRATCH: theirs[fr]}, refs, SCRATCH, ["test/accuracy"]
            )
            a, b = mine[fr]["test/accuracy"], scratch[fr]["test/accuracy"]
            lines.append(
                f"| `{family}` | {float(fr):.0%} | {fmt(a, 3)} | {fmt(b, 3)} | {fmt(a - b, 3)} | "
                f"{fmt_p(p[family]['test/accuracy'])} |"
            )
    return "\n".join(lines)


def render_classify(
    results: dict[str, dict],
    buckets,
    top_k: int,
    pictures: dict[str, list[str]],
    cfg_lines: list[str],
    pretrained: dict[str, dict] | None = None,
    ranking: list[str] = (),
    gain: str = "",
) -> str:
    """reports/classify.md; picture paths are relative to the report file (PNG shown, HTML twin
    linked)."""
    order = order_table(results)
    out = [
        "# Results: classify",
        "",
        (
            "Generated by `dvc repro` (stage `report_classify`) from `metrics/classify/*.json` and "
            "`results/classify/*/details.json`; do not edit by hand."
        ),
        "",
        *cfg_lines,
        "",
        *ranking,
        "## All figures",
        "",
        classify_table(results, buckets, top_k),
        "",
        (
            "Rationale acc: share of test documents with gold key sentences whose most attended"
            " sentence is one of them (word-level families: a sentence's weight is the sum of its"
            f" words'). Word P@{top_k}: share of the {top_k} most attended words that are gold key"
            " words. Hop overlap: mean pairwise overlap Σ_t min(a_i, a_j) of the self-attentive"
            " hops (1 = identical, 0 = disjoint). — = no attention."
        ),
        "",
        *(["## Does the model use word order?", "", order, "", ORDER_NOTE, ""] if order else []),
        "## Accuracy by document length",
        "",
        "![accuracy by length](classify/accuracy_by_length.png)",
        "",
        BANDS,
        "",
    ]
    if fractions := fraction_table(results):
        out += [
            "## Pretraining against training from scratch, by share of labels",
            "",
            (
                "Each family also trains on a stratified fraction of the training labels (the same"
                " documents for every family), for as many optimisation steps as on all labels."
            ),
            "",
            fractions,
            "",
        ]
    if gain:
        out += [
            "### What pretraining bought",
            "",
            gain,
            "",
            (
                f"Each pretrained family against `{SCRATCH}`, the same encoder trained from"
                " scratch, on the same labels: accuracy as mean over seeds; p from an exact"
                " McNemar test on the test documents, paired seed by seed."
            ),
            "",
        ]
    if pretrained:
        out += [
            "## Pretrained encoders",
            "",
            pretraining_table(pretrained),
            "",
            (
                "Validation figures are the last pretraining epoch's, on sentence pairs of the"
                " validation documents with a fixed masking; perplexity = exp(masked-LM loss). Pair"
                " accuracy is the second objective's (sentence order or next sentence), whose"
                " chance level is 0.5: half the pairs are swapped or replaced."
            ),
            "",
        ]
    for family, paths in pictures.items():
        if paths:
            out += [f"## Attention: `{family}`", ""]
            for p in paths:
                html = p.replace(".png", ".html")
                out += [f"![{Path(p).stem}]({p})", ""]
                if "document_" in p:
                    out += [f"[interactive page]({html})", ""]
    return "\n".join(out)


def page(cfg: DictConfig, results: dict[str, dict], assets: Path, section: list[str]) -> str:
    charts.by_length(
        bucket_series(results, cfg.task.buckets, "accuracy"),
        assets / "accuracy_by_length.png",
        title="Accuracy by document length",
        xlabel="document length (sentences)",
        ylabel="accuracy",
    )
    pictures = copy_pictures(
        cfg, list(results), assets, ("document_*.png", "document_*.html", "hops_*.png", "heads.png")
    )
    pretrained = {f: m["pretrain"] for f, m in results.items() if "pretrain" in m}
    lines = [
        f"Profile `{cfg.profile}`, data `{cfg.data.source}`, seeds {list(cfg.seeds)}. "
        + PROTOCOL
        + " The self-attentive penalty coefficient is its `train.penalty` there; its ablation"
        " is in [ablations.md](ablations.md)."
    ]
    page_text = render_classify(
        results,
        cfg.task.buckets,
        cfg.evaluate.top_k_words,
        pictures,
        lines,
        pretrained,
        section,
        pretraining_gain(cfg, results),
    )
    return page_text + no_attention_note(cfg, list(results))


def table(results: dict[str, dict], cfg: DictConfig) -> str:
    """The README's results table: all figures, then accuracy by share of labels."""
    fractions = fraction_table(results)
    return classify_table(results, cfg.task.buckets, cfg.evaluate.top_k_words) + (
        "\n\n" + fractions if fractions else ""
    )
