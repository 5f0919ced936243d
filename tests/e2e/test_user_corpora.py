"""End to end on users' corpora: the real `dvc repro` on the optional test corpora (BBC News,
Tatoeba; the `shared_data` fixture, skipped without them) with the tiny profile.

A file of its own so that a second test worker runs it beside the tiny pipeline of
tests/e2e/test_pipeline.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attention_lab.pipeline import scratch
from tests.e2e.test_pipeline import repro_project

pytestmark = pytest.mark.slow


def edit_tiny_profile(project: Path, task: str, **sections: dict) -> None:
    """Update sections (tune, train …) of `task` in the copied project's conf/profile/tiny.yaml."""
    import yaml

    path = project / "conf" / "profile" / "tiny.yaml"
    profile = yaml.safe_load(path.read_text())
    for name, values in sections.items():
        profile[task][name].update(values)
    path.write_text(yaml.safe_dump(profile, sort_keys=False))


def test_bbc_news_through_the_classify_pipeline(tmp_path, shared_data):
    corpus = shared_data / "bbc_news" / "bbc_news.jsonl"

    # the classify task only, on real news with a stratified split
    def use_bbc(params: Path) -> None:
        import yaml

        params_dict = yaml.safe_load(params.read_text())
        params_dict["tasks"] = ["classify"]
        params_dict["translate"]["families"] = params_dict["caption"]["families"] = []
        c = params_dict["classify"]
        # this test is about the corpus
        c["families"], c["pretrained"] = ["bow", "han"], ["bert_minilm"]
        scratch.drop_orphans(params_dict)  # those of families left out would train
        c["data"] = {
            "source": "labeled_files",
            "path": str(corpus),
            "format": "jsonl",
            "text_field": "text",
            "label_field": "label",
            "title_field": "title",
        }
        c["train"].update(max_sentences=12, max_words=30)  # short news: a fast test
        # stopped by the profile's 3-minute cap below; all labels only (10% of them is the tiny
        # pipeline's test)
        c["family_params"]["bert_minilm"]["train"].update(max_tokens=64, label_fractions=[1.0])
        params.write_text(yaml.safe_dump(params_dict, sort_keys=False))
        # no tuning (the tiny pipeline's test): the families' own settings; one epoch stays near
        # chance level
        edit_tiny_profile(
            params.parent,
            "classify",
            tune={"trials": 0},
            train={"max_epochs": 3, "max_minutes": 3.0},
        )

    dest, _ = repro_project(tmp_path / "project", use_bbc)
    stats = json.loads((dest / "data" / "prepared" / "classify" / "stats.json").read_text())
    assert sum(s["documents"] for s in stats.values() if isinstance(s, dict)) == 2225
    labels = stats["test"]["labels"]
    assert set(labels) == {"business", "entertainment", "politics", "sport", "tech"}
    majority = max(labels.values()) / sum(labels.values())  # always answering the largest class
    accuracy = {
        f: json.loads((dest / "metrics" / "classify" / f"{f}.json").read_text())["test/accuracy"]
        for f in ("bow", "han", "bert_minilm")
    }
    # news topics are easy: HAN learns them fast
    assert accuracy["han"] > majority + 0.2, (accuracy, majority)
    for family, acc in accuracy.items():
        m = json.loads((dest / "metrics" / "classify" / f"{family}.json").read_text())
        assert "test/rationale_acc" not in m  # no gold rationales in user data
        assert 0.0 <= acc <= 1.0
    assert "| `han` |" in (dest / "reports" / "classify.md").read_text()
    # the ledger on the user's corpus: its claims of classify, those the data cannot give marked so
    ledger = {
        r["id"]: r for r in json.loads((dest / "metrics" / "claims.json").read_text())["claims"]
    }
    assert {r["task"] for r in ledger.values()} == {"classify"}
    # no gold rationales
    assert ledger["yang2016-sentences"]["verdict"] == "not measurable on this data"
    # bigru_max is not one of this run's families
    assert ledger["yang2016-hierarchy"]["verdict"] == "not run"
    assert (
        "**yang2016-sentences** (not measurable on this data)"
        in (dest / "reports" / "claims.md").read_text()
    )


def test_tatoeba_corpus_through_the_whole_pipeline(tmp_path, shared_data):
    corpus = shared_data / "korean_english_tatoeba" / "kor.txt"

    # a few families: this test is about the corpus, not the models
    def use_tatoeba(params: Path) -> None:
        import yaml

        params_dict = yaml.safe_load(params.read_text())
        params_dict["tasks"] = ["translate"]  # this test is about the corpus: no classify stages
        params_dict["classify"]["families"] = params_dict["classify"]["pretrained"] = []
        params_dict["caption"]["families"] = []
        t = params_dict["translate"]
        t["families"] = ["seq2seq_lstm", "bahdanau", "luong_local_p"]
        scratch.drop_orphans(params_dict)  # those of families left out would train
        t["data"] = {"source": "tsv", "path": str(corpus), "src_column": 0, "tgt_column": 1}
        params.write_text(yaml.safe_dump(params_dict, sort_keys=False))
        # tuning is the tiny pipeline's test
        edit_tiny_profile(params.parent, "translate", tune={"trials": 0})

    dest, _ = repro_project(tmp_path / "project", use_tatoeba)
    stats = json.loads((dest / "data" / "prepared" / "translate" / "stats.json").read_text())
    assert sum(s["pairs"] for s in stats.values() if isinstance(s, dict)) == 3798
    m = json.loads((dest / "metrics" / "translate" / "bahdanau.json").read_text())
    assert "test/aer" not in m and m["test/bleu"] >= 0.0
    assert "| `bahdanau` |" in (dest / "reports" / "translate.md").read_text()
