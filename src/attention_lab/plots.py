"""Matplotlib PNGs (offline; `dvc plots` HTML needs a CDN): attention heatmaps and BLEU by source length."""

from __future__ import annotations

from pathlib import Path

import koreanize_matplotlib  # noqa: F401  (registers NanumGothic so Hangul renders)
import matplotlib.pyplot as plt  # headless: matplotlib falls back to Agg; in Jupyter: inline
import numpy as np

from attention_lab.io import atomic_path


def save(fig, path: str | Path) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, bbox_inches="tight", format="png")
    plt.close(fig)


def draw_attention(ax, weights: np.ndarray, src_words: list[str], tgt_words: list[str], title: str = "",
                   gold: set[tuple[int, int]] | None = None) -> None:
    """Word-level attention (target rows x source columns); gold (src, tgt) links drawn as red squares."""
    ax.imshow(weights, cmap="Blues", vmin=0, vmax=1, aspect="auto")
    ax.set_xticks(range(len(src_words)), src_words, rotation=90, fontsize=8)
    ax.set_yticks(range(len(tgt_words)), tgt_words, fontsize=8)
    for i, j in gold or ():
        ax.add_patch(plt.Rectangle((i - 0.5, j - 0.5), 1, 1, fill=False, edgecolor="crimson", lw=1.2))
    ax.set_title(title + ("  (red squares: gold alignment)" if gold else ""), fontsize=9)


def attention_figure(weights: np.ndarray, src_words: list[str], tgt_words: list[str], title: str = "",
                     gold: set[tuple[int, int]] | None = None):
    """A figure sized to the sentence, with draw_attention on it."""
    fig, ax = plt.subplots(figsize=(max(4, 0.32 * len(src_words) + 2), max(3, 0.32 * len(tgt_words) + 1.5)))
    draw_attention(ax, weights, src_words, tgt_words, title, gold)
    return fig


def attention_heatmap(weights: np.ndarray, src_words: list[str], tgt_words: list[str], path: str | Path,
                      title: str = "", gold: set[tuple[int, int]] | None = None) -> None:
    """Save attention_figure as a PNG."""
    save(attention_figure(weights, src_words, tgt_words, title, gold), path)


def bleu_by_length(series: dict[str, dict[str, float]], path: str | Path, title: str = "BLEU by source length") -> None:
    """One line per family: {family: {bucket label: BLEU}}."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, points in series.items():
        ax.plot(list(points), list(points.values()), marker="o", label=name)
    ax.set_xlabel("source length (words)")
    ax.set_ylabel("BLEU")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, path)
