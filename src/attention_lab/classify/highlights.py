"""Standalone HTML attention highlights for a classified document (inline CSS; no scripts, links or
fonts)."""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np

from attention_lab.core.files import write_text
from attention_lab.results.metrics import sentence_word_weights

CSS = """
body { font-family: sans-serif; max-width: 60em; margin: 2em auto; color: #222; }
h1 { font-size: 1.3em; }
.pred { margin-bottom: 1.2em; }
.prob { display: flex; align-items: center; gap: .5em; font-size: .9em; }
.prob .name { width: 10em; text-align: right; }
.track { display: inline-block; width: 8em; height: .8em; border: 1px solid #ccc; flex: none; }
.fill { display: block; height: 100%; background: #ff7f0e; }
.prob .fill { background: #7f7f7f; }
.sent { display: flex; gap: .6em; align-items: flex-start; padding: .25em 0;
        border-left: 4px solid transparent; }
.sent.gold { border-left-color: crimson; }
.meta { display: flex; align-items: center; gap: .4em; flex: none; width: 12em; font-size: .8em;
        color: #666; }
.key { color: crimson; font-weight: bold; }
.words { line-height: 1.9; }
.w { padding: .1em .2em; border-radius: 3px; }
.w.gold { outline: 2px solid crimson; }
.legend { font-size: .8em; color: #666; margin-bottom: 1em; }
"""


def _bar(fraction: float) -> str:
    """A horizontal bar filled to fraction (0..1) of its width."""
    width = 100 * min(max(fraction, 0.0), 1.0)
    return f'<span class="track"><span class="fill" style="width:{width:.1f}%"></span></span>'


def document_html(
    sentences: list[list[str]],
    sentence_weights: np.ndarray,
    word_weights,
    title: str,
    label: str,
    probabilities: dict[str, float],
    gold: dict | None = None,
) -> str:
    """One page: prediction and class probabilities, then each sentence with its weight bar and
    shaded words.

    word_weights: padded (N, L), ragged, or flat (T,); gold: {"sentences": [i, ...], "words": [[i,
    j], ...]}. Bars scale to the largest sentence weight, shading to the largest word weight; hover
    shows the weight.
    """
    sentence_weights = np.asarray(sentence_weights, dtype=float)  # (N,)
    if len(sentence_weights) != len(sentences):
        raise ValueError(f"{len(sentence_weights)} sentence weights for {len(sentences)} sentences")
    rows = sentence_word_weights(word_weights, [len(s) for s in sentences])
    w_max = max((float(r.max()) for r in rows if len(r)), default=0.0) or 1.0
    s_max = float(sentence_weights.max(initial=0.0)) or 1.0
    gold_s = set(gold.get("sentences", ())) if gold else set()
    gold_w = {(int(i), int(j)) for i, j in gold.get("words", ())} if gold else set()

    esc = html.escape
    probs = "\n".join(
        '<div class="prob"><span'
        f' class="name">{esc(str(name))}</span>{_bar(p)}<span>{p:.3f}</span></div>'
        for name, p in sorted(probabilities.items(), key=lambda kv: -kv[1])
    )
    body = []
    for i, (words, weights) in enumerate(zip(sentences, rows)):
        spans = []
        for j, (word, w) in enumerate(zip(words, weights)):
            a = float(w) / w_max
            cls = "w gold" if (i, j) in gold_w else "w"
            color = "#fff" if a > 0.65 else "#000"
            spans.append(
                f'<span class="{cls}" title="{w:.4f}" style="background:rgba(31,119,180,{a:.3f});'
                f'color:{color}">{esc(word)}</span>'
            )
        key = (
            '<span class="key" title="gold key sentence">&#9733; key</span>' if i in gold_s else ""
        )
        sw = sentence_weights[i]
        body.append(
            f'<div class="sent{" gold" if i in gold_s else ""}" data-weight="{sw:.4f}" '
            f'title="sentence {i}: weight {sw:.4f}"><span class="meta">{i} {_bar(sw / s_max)} '
            f'{sw:.4f} {key}</span><span class="words">{" ".join(spans)}</span></div>'
        )
    legend = (
        "Orange bar: sentence weight (scaled to the largest); blue shading: word weight (scaled to"
        " the largest; hover for the value)"
        + ("; red: gold key sentences and words." if gold else ".")
    )
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{esc(title)}</title>
<style>{CSS}</style>
</head>
<body>
<h1>{esc(title)}</h1>
<div class="pred"><p>Prediction: <strong>{esc(str(label))}</strong></p>
{probs}
</div>
<p class="legend">{legend}</p>
{chr(10).join(body)}
</body>
</html>
"""


def write_document_html(
    path: str | Path,
    sentences: list[list[str]],
    sentence_weights: np.ndarray,
    word_weights,
    title: str,
    label: str,
    probabilities: dict[str, float],
    gold: dict | None = None,
) -> None:
    """Write document_html to path atomically."""
    page = document_html(
        sentences, sentence_weights, word_weights, title, label, probabilities, gold
    )
    write_text(path, page)
