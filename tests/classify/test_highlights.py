"""highlights.py: a document's attention as a standalone, escaped HTML page, one row per
sentence."""

from html.parser import HTMLParser

import numpy as np
import pytest

from attention_lab.classify import highlights
from tests.results.test_plots import GOLD, SENT_W, SENTENCES, word_rows


class Sentences(HTMLParser):
    """Collects the attributes of every element whose class includes 'sent'."""

    def __init__(self):
        super().__init__()
        self.sents = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "sent" in (attrs.get("class") or "").split():
            self.sents.append(attrs)


def test_document_html_is_standalone_escaped_and_one_row_per_sentence(tmp_path):
    probs = {"negative": 0.9, "positive": 0.1}
    page = highlights.document_html(
        SENTENCES, SENT_W, word_rows(), "review <7>", "negative", probs, GOLD
    )
    assert "http://" not in page and "https://" not in page and "<script" not in page.lower()
    assert "&lt;b&gt;rude&lt;/b&gt;" in page and "<b>" not in page and "review &lt;7&gt;" in page
    assert "호텔" in page and "0.900" in page
    parser = Sentences()
    parser.feed(page)
    assert len(parser.sents) == len(SENTENCES)
    assert [float(s["data-weight"]) for s in parser.sents] == pytest.approx(SENT_W.tolist())
    assert [i for i, s in enumerate(parser.sents) if "gold" in s["class"].split()] == GOLD[
        "sentences"
    ]
    top_word = word_rows()[0].max()
    assert f'title="{top_word:.4f}"' in page  # the word's weight is shown on hover
    path = tmp_path / "doc.html"
    flat = np.concatenate(word_rows())
    highlights.write_document_html(
        path, SENTENCES, SENT_W, flat, "review <7>", "negative", probs, GOLD
    )
    assert path.read_text(encoding="utf-8") == page  # flat (T,) word weights give the same page
