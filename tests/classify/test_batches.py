"""data/document_batches.py: both layouts of a batch hold the same words; labels and truncation as
in training."""

from __future__ import annotations

import pytest

from attention_lab.classify.data.batches import (
    collate_documents,
    label_subset,
    load_documents,
    train_labels,
)
from attention_lab.core.files import write_jsonl
from attention_lab.infer.tokenization import PAD, train_word_tokenizer, train_wordpiece, truncate

DOCS = [
    {"label": "pos", "sentences": [["good", "food", "."], ["we", "ate", "."]]},
    {"label": "neg", "sentences": [["bad", "."]]},
    {
        "label": "pos",
        "sentences": [["lovely", "room", "and", "good", "food", "."], ["yes"], ["no", "."]],
    },
]


@pytest.fixture
def prepared(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", DOCS)
    write_jsonl(tmp_path / "test.jsonl", [*DOCS, {"label": "meh", "sentences": [["so", "so"]]}])
    return tmp_path


def test_layouts_agree_and_truncation_applies(prepared):
    tok = train_word_tokenizer([d["sentences"] for d in DOCS], vocab_size=50, min_frequency=1)
    labels = train_labels(prepared)
    assert labels == ["neg", "pos"]
    rows = load_documents(prepared, "train", tok, labels, max_sentences=2, max_words=4)
    assert [len(r["ids"]) for r in rows] == [2, 1, 2] and len(rows[2]["ids"][0]) == 4  # truncated
    batch = collate_documents(rows)
    B, N, L = batch["words"].shape
    assert (B, N, L) == (3, 2, 4) and batch["tokens"].shape == (3, 6)
    for b in range(B):  # the flat layout is the hierarchical one without its padding
        words = batch["words"][b][batch["word_mask"][b]].tolist()
        assert words == batch["tokens"][b][batch["token_mask"][b]].tolist()
    assert batch["label"].tolist() == [1, 0, 1] and batch["words"][1, 1].tolist() == [PAD] * 4


def test_unknown_label_names_the_document(prepared):
    tok = train_word_tokenizer([d["sentences"] for d in DOCS], vocab_size=50, min_frequency=1)
    with pytest.raises(ValueError, match=r"test\.jsonl: document 3 has label 'meh'"):
        load_documents(prepared, "test", tok, ["neg", "pos"], 10, 10)


def test_wordpiece_documents_keep_the_word_of_each_piece_and_cut_at_a_word(prepared):
    tok = train_wordpiece(
        [" ".join(w for s in d["sentences"] for w in s) for d in DOCS],
        vocab_size=40,
        min_frequency=1,
    )
    rows = load_documents(prepared, "train", tok, ["neg", "pos"], 10, 10)
    for r in rows:  # every word has at least one piece, in order
        assert [sorted(set(w)) for w in r["word_of"]] == [
            list(range(len(s))) for s in r["sentences"]
        ]
        assert [len(i) for i in r["ids"]] == [len(w) for w in r["word_of"]]
    ids = [[1, 2, 3], [4, 5, 6, 7]]
    word_of = [[0, 0, 1], [0, 1, 1, 1]]
    assert truncate(ids, word_of, 5) == ([[1, 2, 3], [4]], [[0, 0, 1], [0]])
    assert truncate(ids, word_of, 6) == ([[1, 2, 3], [4]], [[0, 0, 1], [0]])  # never half a word
    assert truncate(ids, word_of, 7) == (ids, word_of)


def test_label_subset_is_stratified_and_the_same_for_every_call(prepared):
    rows = [{"y": i % 3, "index": i} for i in range(300)]
    subset = label_subset(rows, 0.1, seed=1234)
    assert len(subset) == 30 and sorted({r["y"] for r in subset}) == [0, 1, 2]
    assert [r["index"] for r in subset] == [r["index"] for r in label_subset(rows, 0.1, seed=1234)]
    assert label_subset(rows, 1.0, seed=0) is rows
    with pytest.raises(ValueError, match="label_fractions"):
        label_subset(rows, 0.0, seed=0)
