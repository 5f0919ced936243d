"""Matplotlib PNGs of attention (offline; `dvc plots` HTML needs a CDN), drawn by the evaluate
stages: attention heatmaps, HAN-style document attention, self-attentive hop heatmaps, per-head
grids, and the picture that says a family has none. The report's charts are in results/charts.py."""

from __future__ import annotations

from pathlib import Path

import koreanize_matplotlib  # noqa: F401  (registers NanumGothic so Hangul renders)
import matplotlib.pyplot as plt  # headless: matplotlib falls back to Agg; in Jupyter: inline
import numpy as np
from matplotlib.font_manager import FontProperties

from attention_lab.core.files import atomic_path
from attention_lab.results.metrics import sentence_word_weights

NO_ATTENTION = "no_attention.png"  # plots/<task>/<family>/ of a family without attention weights


def save(fig, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    plt.close(fig)


def no_attention(family: str, path: str | Path) -> None:
    """A small PNG saying that `family` has no attention weights to draw."""
    fig = plt.figure(figsize=(4.5, 0.6))
    fig.text(
        0.5,
        0.5,
        f"{family}: no attention weights, so no attention pictures",
        ha="center",
        va="center",
        fontsize=9,
        color="dimgray",
    )
    save(fig, path)


def draw_attention(
    ax,
    weights: np.ndarray,
    src_words: list[str],
    tgt_words: list[str],
    title: str = "",
    gold: set[tuple[int, int]] | None = None,
) -> None:
    """Word-level attention (target rows x source columns); gold (src, tgt) links drawn as red
    squares."""
    ax.imshow(weights, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(src_words)), src_words, rotation=90, fontsize=8)
    ax.set_yticks(range(len(tgt_words)), tgt_words, fontsize=8)
    for i, j in gold or ():
        ax.add_patch(
            plt.Rectangle((i - 0.5, j - 0.5), 1, 1, fill=False, edgecolor="crimson", lw=1.2)
        )
    ax.set_title(title + ("  (red squares: gold alignment)" if gold else ""), fontsize=9)


def attention_figure(
    weights: np.ndarray,
    src_words: list[str],
    tgt_words: list[str],
    title: str = "",
    gold: set[tuple[int, int]] | None = None,
):
    """A figure sized to the sentence, with draw_attention on it."""
    fig, ax = plt.subplots(
        figsize=(max(4, 0.32 * len(src_words) + 2), max(3, 0.32 * len(tgt_words) + 1.5))
    )
    draw_attention(ax, weights, src_words, tgt_words, title, gold)
    return fig


def attention_heatmap(
    weights: np.ndarray,
    src_words: list[str],
    tgt_words: list[str],
    path: str | Path,
    title: str = "",
    gold: set[tuple[int, int]] | None = None,
) -> None:
    """Save attention_figure as a PNG."""
    save(attention_figure(weights, src_words, tgt_words, title, gold), path)


def document_figure(
    sentences: list[list[str]],
    sentence_weights: np.ndarray,
    word_weights,
    title: str = "",
    gold: dict | None = None,
    max_sentences: int = 30,
):
    """HAN-style view: per sentence a weight bar, then its words (wrapped) shaded by weight; gold
    marked red.

    word_weights: padded (N, L), ragged, or flat (T,); gold: {"sentences": [i, ...], "words": [[i,
    j], ...]}. Bars scale to the largest sentence weight, shading to the largest word weight; at
    most max_sentences rows.
    """
    sentence_weights = np.asarray(sentence_weights, dtype=float)  # (N,)
    if len(sentence_weights) != len(sentences):
        raise ValueError(f"{len(sentence_weights)} sentence weights for {len(sentences)} sentences")
    rows = sentence_word_weights(word_weights, [len(s) for s in sentences])[:max_sentences]
    shown = sentences[:max_sentences]
    w_max = max((float(r.max()) for r in rows if len(r)), default=0.0) or 1.0
    s_max = float(sentence_weights.max(initial=0.0)) or 1.0
    gold_s = set(gold.get("sentences", ())) if gold else set()
    gold_w = {(int(i), int(j)) for i, j in gold.get("words", ())} if gold else set()

    font = FontProperties(size=9)
    pad, gap, line, box, text_x, text_w, top = 0.04, 0.05, 0.26, 0.22, 1.65, 8.5, 0.55  # inches
    fig = plt.figure()
    # word widths in inches, measured before the figure is sized
    renderer = fig.canvas.get_renderer()
    # placed: (sentence, word, x, y, width) in inches from the top left
    placed, starts, y = [], [], top
    for i, words in enumerate(shown):
        starts.append(y)
        x = 0.0
        for j, word in enumerate(words):
            ww = (
                renderer.get_text_width_height_descent(word, font, ismath=False)[0] / fig.dpi
                + 2 * pad
            )
            if x > 0 and x + ww > text_w:
                x, y = 0.0, y + line
            placed.append((i, j, x, y, ww))
            x += ww + gap
        y += line + 0.08
    fig.set_size_inches(text_x + text_w + 0.2, y + 0.1)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, text_x + text_w + 0.2)
    ax.set_ylim(y + 0.1, 0)
    ax.axis("off")

    for i, y0 in enumerate(starts):
        if i in gold_s:
            ax.plot(0.08, y0 + box / 2, marker="o", color="crimson", markersize=6)
        ax.text(0.38, y0 + box / 2, str(i), ha="right", va="center", fontsize=8, color="dimgray")
        ax.add_patch(plt.Rectangle((0.45, y0), 1.0, box, fill=False, edgecolor="lightgray", lw=0.6))
        bar = sentence_weights[i] / s_max
        ax.add_patch(plt.Rectangle((0.45, y0), bar, box, color="tab:orange", alpha=0.8))
        ax.text(0.5, y0 + box / 2, f"{sentence_weights[i]:.2f}", va="center", fontsize=7)
    cmap = plt.get_cmap("Blues")
    for i, j, x, y0, ww in placed:
        v = float(rows[i][j]) / w_max
        edge = "crimson" if (i, j) in gold_w else "none"
        ax.add_patch(
            plt.Rectangle((text_x + x, y0), ww, box, facecolor=cmap(v), edgecolor=edge, lw=1.0)
        )
        ax.text(
            text_x + x + pad,
            y0 + box / 2,
            shown[i][j],
            va="center",
            fontproperties=font,
            parse_math=False,
            color="white" if v > 0.65 else "black",
        )

    more = (
        f" (first {max_sentences} of {len(sentences)} sentences)"
        if len(sentences) > max_sentences
        else ""
    )
    ax.text(0.05, 0.18, title + more, fontsize=10, va="center", parse_math=False)
    note = (
        "bars: sentence weight (scaled to the largest); shading: word weight (scaled to the"
        " largest)"
    )
    note += "; red: gold key sentence / word" if gold else ""
    ax.text(0.05, 0.4, note, fontsize=7, color="dimgray", va="center")
    return fig


def document_attention(
    sentences: list[list[str]],
    sentence_weights: np.ndarray,
    word_weights,
    path: str | Path,
    title: str = "",
    gold: dict | None = None,
) -> None:
    """Save document_figure as a PNG."""
    save(document_figure(sentences, sentence_weights, word_weights, title, gold), path)


def hop_figure(words: list[str], hops: np.ndarray, title: str = "", max_words: int = 80):
    """Self-attentive hops (r, T) as rows over words; past max_words, the window with the most
    attention."""
    hops = np.asarray(hops, dtype=float)  # (r, T)
    r, n = hops.shape
    if len(words) != n:
        raise ValueError(f"{len(words)} words for hops over {n} positions")
    lo = 0
    if n > max_words:
        mass = np.concatenate([[0.0], np.cumsum(hops.sum(axis=0))])  # (T + 1,)
        lo = int(np.argmax(mass[max_words:] - mass[:-max_words]))
        title += f" (words {lo + 1}-{lo + max_words} of {n}: the window with the most attention)"
        n = max_words
    fig, ax = plt.subplots(figsize=(max(4, 0.2 * n + 2), max(2, 0.25 * r + 1.5)))
    im = ax.imshow(hops[:, lo : lo + n], cmap="Blues", vmin=0, vmax=hops.max() or 1, aspect="auto")
    ax.set_xticks(range(n), words[lo : lo + n], rotation=90, fontsize=8, parse_math=False)
    ax.set_yticks(range(r), [f"hop {k + 1}" for k in range(r)], fontsize=7)
    fig.colorbar(im, ax=ax, fraction=0.02, pad=0.01)
    ax.set_title(title, fontsize=9)
    return fig


def hop_heatmap(words: list[str], hops: np.ndarray, path: str | Path, title: str = "") -> None:
    """Save hop_figure as a PNG."""
    save(hop_figure(words, hops, title), path)


def head_grid_figure(
    maps: list[np.ndarray], tokens: list[str], title: str = "", max_tokens: int = 24
):
    """Every layer (rows) and head (columns) of self-attention [heads, query, key] over the first
    max_tokens tokens."""
    layers, heads = len(maps), maps[0].shape[0]
    n = min(max_tokens, len(tokens))
    fig, axes = plt.subplots(
        layers, heads, figsize=(1.9 * heads + 1, 1.9 * layers + 1), squeeze=False
    )
    for layer, weights in enumerate(maps):
        for head in range(heads):
            ax = axes[layer, head]
            ax.imshow(weights[head, :n, :n], cmap="Blues", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if layer == 0:
                ax.set_title(f"head {head + 1}", fontsize=8)
            if head == 0:
                ax.set_ylabel(f"layer {layer + 1}", fontsize=8)
    shown = " ".join(tokens[:n]) + (" …" if len(tokens) > n else "")
    fig.suptitle(f"{title}\nquery (rows) → key (columns): {shown}", fontsize=8, wrap=True)
    return fig


def head_grid(maps: list[np.ndarray], tokens: list[str], path: str | Path, title: str = "") -> None:
    """Save head_grid_figure as a PNG."""
    save(head_grid_figure(maps, tokens, title), path)
