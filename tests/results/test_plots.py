"""plots.py: document attention figures (wrapped sentences, capped rows) and hop heatmaps of long
documents."""

import numpy as np
import pytest
from PIL import Image

from attention_lab.results import plots

SENTENCES = [
    s.split()
    for s in (
        "the room was dirty",
        "staff were <b>rude</b> to us",
        "breakfast was fine",
        "we will never come back",
        "호텔 방은 매우 더러웠다",
        "$5 for wifi",
    )
]
SENT_W = np.array([0.3, 0.1, 0.05, 0.4, 0.1, 0.05])  # (N,)
GOLD = {"sentences": [0, 3], "words": [[0, 3], [3, 2]]}


def word_rows():
    rng = np.random.default_rng(0)
    return [rng.dirichlet(np.ones(len(s))) for s in SENTENCES]


def test_document_attention_writes_a_png(tmp_path):
    path = tmp_path / "doc.png"
    plots.document_attention(SENTENCES, SENT_W, word_rows(), path, title="negative", gold=GOLD)
    with Image.open(path) as im:
        assert im.format == "PNG"
        width, height = im.size
    assert 600 < width < 2000 and 150 < height < 1200


def test_document_figure_wraps_long_sentences_and_caps_rows():
    import matplotlib.pyplot as plt

    flat = np.concatenate(word_rows())  # flat (T,) weights are accepted too
    short = plots.document_figure(SENTENCES, SENT_W, flat)
    long_doc = [["word"] * 200] + SENTENCES[1:]
    long_sentence = plots.document_figure(long_doc, SENT_W, [np.ones(200)] + word_rows()[1:])
    # wrapped onto several lines
    assert long_sentence.get_size_inches()[1] > short.get_size_inches()[1] + 1
    assert long_sentence.get_size_inches()[0] == pytest.approx(short.get_size_inches()[0])
    many = [["a", "b"]] * 45
    capped = plots.document_figure(many, np.full(45, 1 / 45), [np.ones(2)] * 45)
    at_cap = plots.document_figure(many[:30], np.full(30, 1 / 30), [np.ones(2)] * 30)
    assert capped.get_size_inches()[1] == pytest.approx(at_cap.get_size_inches()[1])
    assert any("first 30 of 45" in t.get_text() for t in capped.axes[0].texts)
    with pytest.raises(ValueError, match="sentence weights"):
        plots.document_figure(SENTENCES, SENT_W[:3], word_rows())
    plt.close("all")


def test_hop_heatmap_windows_long_documents(tmp_path):
    import matplotlib.pyplot as plt

    words = [f"w{t}" for t in range(300)]
    hops = np.full((4, 300), 1e-4)
    hops[:, 250] = 1.0  # all attention near the end
    fig = plots.hop_figure(words, hops, title="hops")
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels()]
    assert len(labels) == 80 and "w250" in labels and "of 300" in ax.get_title()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["hop 1", "hop 2", "hop 3", "hop 4"]
    plt.close(fig)
    plots.hop_heatmap(words[:20], hops[:, :20], tmp_path / "hops.png", title="short")
    with Image.open(tmp_path / "hops.png") as im:
        assert im.format == "PNG" and im.size[0] > 300
