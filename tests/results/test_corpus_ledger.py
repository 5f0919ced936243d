"""results.corpus_ledger: a published figure's flavour on our outputs, where a real corpus agrees
with the built-in ledger, and the page from collected figures (the whole command on a real corpus:
tests/e2e/test_corpus_ledger.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sacrebleu

from attention_lab.pipeline.corpus_ledger import load_spec
from attention_lab.results import claims, corpus_ledger
from tests.conftest import ROOT


def test_the_spacy_flavour_lowercases_and_splits_as_spacy_does():
    refs = ["A man's dog runs.", "Two women, talking."]
    same = corpus_ledger.flavour_scores(
        "bleu_lowercase_spacy", {"0": ["a MAN'S dog runs .", "two women , talking ."]}, refs
    )
    assert same["0"] == pytest.approx(100.0)  # case and spacing differ; spaCy's tokens do not
    hyps = ["a man 's cat runs .", "two women talk ."]
    expected = sacrebleu.corpus_bleu(
        hyps,
        [["a man 's dog runs .", "two women , talking ."]],
        tokenize="none",
        smooth_method="none",
        force=True,
    ).score
    assert corpus_ledger.flavour_scores("bleu_lowercase_spacy", {"1": hyps}, refs)[
        "1"
    ] == pytest.approx(expected)
    with pytest.raises(ValueError, match="unknown flavour 'chrf'"):
        corpus_ledger.flavour_scores("chrf", {}, refs)


def test_accuracy_is_put_on_the_published_scale():
    assert corpus_ledger.as_published(0.6, "% accuracy") == pytest.approx(60.0)
    assert corpus_ledger.as_published(0.6, "% error") == pytest.approx(40.0)
    assert corpus_ledger.as_published(28.3, "BLEU") == 28.3


def row(verdict, mean=1.0, sd=0.5, item_sd=0.5, **more):
    effect = {"mean": mean, "low": mean - 1, "high": mean + 1, "sd": sd, "item_sd": item_sd}
    return {
        "id": "c",
        "verdict": verdict,
        "effect": effect,
        "seeds": ["0", "1", "2"],
        "side": "above",
        "threshold": 0,
        **more,
    }


@pytest.mark.parametrize(
    ("here", "built_in", "says"),
    [
        (row(claims.HOLDS), row(claims.HOLDS), "agrees (holds on both)"),
        (
            row(claims.CONTRADICTED, mean=-2.0),
            row(claims.HOLDS),
            (
                "disagrees: contradicted here (-2.0 [-3.0, -1.0]), "
                "holds on the built-in data (+1.0 [+0.0, +2.0])"
            ),
        ),
        (
            row(claims.HOLDS),
            row(claims.INCONCLUSIVE),
            "decided here only (holds); the built-in ledger: inconclusive",
        ),
        (row(claims.HOLDS), None, "decided here only (holds); the built-in ledger: no row"),
        (
            {**row(claims.NOT_MEASURABLE), "effect": None, "missing": "`bahdanau` test/aer"},
            row(claims.HOLDS),
            "cannot decide here: not measurable on this data (`bahdanau` test/aer)",
        ),
        (
            row(claims.INCONCLUSIVE, mean=0.3, sd=1.0, item_sd=0.1),
            row(claims.HOLDS),
            "cannot decide here: inconclusive with 3 seeds; about",
        ),
    ],
)
def test_each_claim_says_whether_the_corpus_agrees_and_why(here, built_in, says):
    assert corpus_ledger.agreement(here, built_in).startswith(says)


def test_the_page_shows_checksums_verdicts_published_figures_and_compute(tmp_path):
    spec = load_spec(ROOT, "multi30k")
    effect = {"mean": 2.0, "low": 1.0, "high": 3.0, "sd": 0.4, "item_sd": 0.3, "n": 3}
    mine = {
        "id": "bahdanau2015-relative",
        "claim": "Attention helps.",
        "paper": "P",
        "where": "W",
        "quote": "Q",
        "paper_effect": "E",
        "measures": "m",
        "side": "above",
        "threshold": 0,
        "smallest_effect": 1.0,
        "section": "summary",
        "effect": effect,
        "variance": "seeds and test items",
        "p": 0.01,
        "p_holm": 0.02,
        "seeds": ["0", "1", "2"],
        "verdict": claims.HOLDS,
        "families": ["bahdanau", "seq2seq_gru"],
        "evidence": "confirmatory",
        "evidence_why": "frozen first",
        "task": "translate",
    }
    figures = {
        "families": {
            "bahdanau": {
                "metrics": {"train/train_seconds": 600.0, "train/params": 1.5e6},
                "seeds": ["0", "1", "2"],
                "per_seed": {
                    s: {"test/bleu": b} for s, b in zip("012", (30.0, 31.0, 32.0), strict=True)
                },
                "stopped_by": {"0": "early stopping", "1": "early stopping", "2": "epoch cap"},
                "epochs": {"0": 9, "1": 10, "2": 15},
                # seed 2 resumed on another CPU
                "machines": {"0": ["CPU A"], "1": ["CPU A"], "2": ["CPU A", "CPU B"]},
            }
        },
        "flavours": {"bahdanau": {"bleu_lowercase_spacy": {"0": 33.0, "1": 34.0, "2": 35.0}}},
        "data": {"train": {"pairs": 29000}, "test": {"pairs": 1000}},
    }
    corpus = {
        "files": {"train.de": "ab" * 32},
        "origin": {"commit": "abc1234", "dirty": False, "made": "today"},
    }
    text = corpus_ledger.page(
        tmp_path, spec, [mine], figures, corpus, {"bahdanau2015-relative": mine}
    )
    assert "| `train.de` | `" + "ab" * 32 + "` |" in text and "train 29000, test 1000" in text
    assert "agrees (holds on both)" in text and "from commit abc1234 on today" in text
    # ours, and ours in bentrevett's flavour
    assert "| `bahdanau` 31.0 ± 1.0 | 34.0 ± 1.0 |" in text
    # a family without runs says so
    assert "| `seq2seq_gru` | not run |" not in text and "not run" in text
    assert (
        "| `bahdanau` | 1.50M | 3 | 11.3 ± 3.2 | 10.0 | early stopping, epoch cap "
        "| 2 of 3 seeds stopped early |" in text
    )
    assert "Training in all: 30 min of runs" in text
    assert "Trained on CPU A: 3 runs; CPU B: 1 run. The same command repeats" in text
    figures["families"]["bahdanau"]["machines"] = {}  # runs from before the record
    assert "Trained on" not in corpus_ledger.compute_table(figures)


def test_readme_verdicts_read_every_collected_ledger(tmp_path):
    folder = tmp_path / "results" / "ledgers" / "yelp"
    folder.mkdir(parents=True)
    (folder / "claims.json").write_text(json.dumps({"claims": [{"id": "c", "verdict": "holds"}]}))
    assert corpus_ledger.verdicts(tmp_path) == {"yelp": {"c": {"id": "c", "verdict": "holds"}}}
    assert corpus_ledger.verdicts(Path(tmp_path / "none")) == {}
