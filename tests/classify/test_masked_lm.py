"""data/pretraining.py: BERT's dynamic masking rates, sentence pairs for nsp/sop, and the pair batch
layout."""

from __future__ import annotations

import random

import pytest
import torch

from attention_lab.classify.masked_lm import (
    IGNORE,
    collate_pairs,
    make_pairs,
    mask_tokens,
    sentence_pair,
)

MASK, VOCAB, FIRST = 4, 1000, 5


def test_masking_rates_follow_devlin_2018():
    """15% of the ordinary tokens are chosen; of those 80% -> [MASK], 10% -> a random token, 10%
    unchanged.

    With n chosen tokens a rate's standard error is sqrt(p(1-p)/n); every check allows 5 standard
    errors."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(FIRST, VOCAB, (400, 250), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -1] = True  # [CLS] ... [SEP]
    inputs, labels = mask_tokens(ids, special, MASK, VOCAB, FIRST, 0.15, g)
    chosen = labels != IGNORE
    n_ordinary, n = int((~special).sum()), int(chosen.sum())
    assert not chosen[special].any() and (labels[chosen] == ids[chosen]).all()
    assert abs(n / n_ordinary - 0.15) < 5 * (0.15 * 0.85 / n_ordinary) ** 0.5
    masked = (inputs == MASK) & chosen
    unchanged = (inputs == ids) & chosen
    replaced = chosen & ~masked & ~unchanged
    for observed, p in (
        (masked, 0.8),
        (replaced, 0.1 - 0.1 / (VOCAB - FIRST)),
        (unchanged, 0.1 + 0.1 / (VOCAB - FIRST)),
    ):
        assert abs(int(observed.sum()) / n - p) < 5 * (p * (1 - p) / n) ** 0.5
    assert (inputs[~chosen] == ids[~chosen]).all()  # nothing else changes
    # random tokens are never specials
    assert ((inputs[replaced] >= FIRST) & (inputs[replaced] < VOCAB)).all()


def test_masking_is_dynamic_but_seeded():
    ids = torch.randint(FIRST, VOCAB, (8, 50), generator=torch.Generator().manual_seed(1))
    special = torch.zeros_like(ids, dtype=torch.bool)
    a = mask_tokens(ids, special, MASK, VOCAB, FIRST, 0.15, torch.Generator().manual_seed(7))
    b = mask_tokens(ids, special, MASK, VOCAB, FIRST, 0.15, torch.Generator().manual_seed(7))
    c = mask_tokens(ids, special, MASK, VOCAB, FIRST, 0.15, torch.Generator().manual_seed(8))
    assert torch.equal(a[0], b[0]) and not torch.equal(a[1], c[1])


DOC = [[10, 11], [12, 13, 14], [15], [16, 17]]
OTHER = [[90, 91], [92]]


@pytest.mark.parametrize("objective", ["nsp", "sop", "none"])
def test_sentence_pairs_are_labelled_by_their_objective(objective):
    rng = random.Random(0)
    labels = []
    for _ in range(200):
        a, b, label = sentence_pair(DOC, OTHER, objective, max_tokens=64, rng=rng)
        flat = [t for s in DOC for t in s]
        labels.append(label)
        if label == 1:  # B follows A in the document, at a sentence boundary
            assert flat[: len(a) + len(b)] == a + b and len(a) in (2, 5, 6)
        elif objective == "sop":  # swapped halves of the document
            assert flat[: len(a) + len(b)] == b + a
        else:  # nsp: B from the other document
            assert set(b) <= {90, 91, 92} and a == flat[: len(a)]
    share = sum(labels) / len(labels)
    assert share == 1.0 if objective == "none" else 0.35 < share < 0.65


def test_pairs_fit_max_tokens_and_collate_to_bert_inputs():
    long_doc = [list(range(5 + 30 * k, 35 + 30 * k)) for k in range(6)]
    pairs = make_pairs([long_doc, DOC], "sop", max_tokens=32, seed=3)
    assert all(len(p["a"]) + len(p["b"]) + 3 <= 32 for p in pairs)
    batch = collate_pairs(pairs, cls_id=2, sep_id=3)
    ids, seg = batch["ids"], batch["segments"]
    for i, p in enumerate(pairs):
        n = len(p["a"]) + len(p["b"]) + 3
        assert ids[i, :n].tolist() == [2, *p["a"], 3, *p["b"], 3] and not batch["mask"][i, n:].any()
        assert seg[i, :n].tolist() == [0] * (len(p["a"]) + 2) + [1] * (len(p["b"]) + 1)
    assert (
        batch["special"][ids == 2].all()
        and batch["special"][ids == 3].all()
        and batch["special"][~batch["mask"]].all()
    )
    with pytest.raises(ValueError, match="pretrain.objective"):
        make_pairs([DOC], "mlm", 32, 0)
