"""classification_eval.py: attention back in sentence coordinates, document-level word weights,
test/* metrics."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from attention_lab.classify.evaluate import evaluate, item_counts, shuffle_tokens, split_attention
from attention_lab.results import evidence

IDS = [[[5, 6, 7], [8, 9]], [[10, 11, 12, 13]], [[5, 9], [6], [7, 8, 9]]]


def rows() -> list[dict]:
    gold = {"sentences": [0], "words": [[0, 1]]}
    return [
        {
            "id": f"test-{i}",
            "ids": ids,
            "word_of": [list(range(len(s))) for s in ids],
            "y": i % 3,
            "index": i,
            "rationale": gold,
        }
        for i, ids in enumerate(IDS)
    ]


def test_split_attention_hierarchical_and_flat():
    word = torch.tensor([[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]])  # (1, N=2, L=3)
    doc = split_attention(
        {"word": word, "sentence": torch.tensor([[0.25, 0.75]])}, 0, [[0, 1], [0]]
    )
    assert [w.tolist() for w in doc.words] == [[0.5, 0.5], [1.0]] and doc.sentence.tolist() == [
        0.25,
        0.75,
    ]
    assert [w.tolist() for w in doc.document_words()] == [[0.125, 0.125], [0.75]]
    # (1, T=4), one pad
    flat = split_attention({"word": torch.tensor([[0.1, 0.3, 0.6, 0.0]])}, 0, [[0, 1], [0]])
    np.testing.assert_allclose(flat.sentence, [0.4, 0.6])
    np.testing.assert_allclose(np.concatenate(flat.document_words()), [0.1, 0.3, 0.6])
    assert split_attention({"logits": torch.zeros(1, 3)}, 0, [[0, 1]]) is None


def test_split_attention_sums_the_pieces_of_a_word():
    """WordPiece: "wonder ##ful day" is 3 tokens but 2 words; the weight of a word is the sum of its
    pieces."""
    pieces = split_attention({"word": torch.tensor([[0.2, 0.3, 0.1, 0.4]])}, 0, [[0, 0, 1], [0]])
    np.testing.assert_allclose(pieces.words[0], [0.5, 0.1])
    np.testing.assert_allclose(pieces.sentence, [0.6, 0.4])


@pytest.mark.parametrize("family", ["bow", "han", "self_attentive"])
def test_evaluate_reports_the_metrics_of_the_family(family):
    torch.manual_seed(0)
    model = instantiate(
        OmegaConf.load(f"conf/model/{family}.yaml"), vocab_size=20, num_classes=3, pad_id=0
    ).eval()
    cfg = OmegaConf.create(
        {
            "task": {"labels": ["a", "b", "c"], "buckets": [[1, 1], [2, 1000]]},
            "evaluate": {"batch_size": 2, "top_k_words": 2},
        }
    )
    scores, probs, attentions = evaluate(model, rows(), cfg)
    assert probs.shape == (3, 3) and np.allclose(probs.sum(1), 1.0, atol=1e-5)
    assert 0 <= scores["test/accuracy"] <= 1 and "test/accuracy_len_2_plus" in scores
    assert 0 <= scores["test/accuracy_shuffled"] <= 1
    assert ("test/rationale_acc" in scores) == (family != "bow")
    assert ("test/hop_overlap" in scores) == (family == "self_attentive")
    if family != "bow":
        assert [len(w) for w in attentions[2].words] == [2, 1, 3]
    # item by item, for the ledger's test-item resamples: their sums score what the metrics file
    # holds
    counts = item_counts(rows(), attentions)
    assert set(counts) == {k for k in ("test/rationale_acc", "test/hop_overlap") if k in scores}
    for metric, pairs in counts.items():
        items = evidence.counted_items({"0": pairs}, "share")
        assert items.score(items.stats["0"].sum(axis=0)) == pytest.approx(100 * scores[metric])


def test_shuffle_tokens_permutes_each_document_deterministically():
    """The same words in another order, sentence lengths kept, the same permutation every call;
    other keys kept."""
    docs = [{"ids": [list(range(10, 30)), [40, 41, 42]], "y": 1}, {"ids": [[7]], "y": 0}]
    once, again = shuffle_tokens(docs), shuffle_tokens(docs)
    assert once == again and once[0]["y"] == 1 and once[1]["ids"] == [[7]]
    assert [len(s) for s in once[0]["ids"]] == [20, 3]
    flat = [i for s in once[0]["ids"] for i in s]
    assert sorted(flat) == [*range(10, 30), 40, 41, 42] and flat != [*range(10, 30), 40, 41, 42]
    assert docs[0]["ids"][0] == list(range(10, 30))  # the input rows are left as they are


class _OrderProbe(torch.nn.Module):
    """Class 1 when the first token of the document is the smallest id, else class 0: uses order
    only."""

    hierarchical = False

    def forward(self, ids, mask):
        first_is_min = ids[:, 0] == ids.masked_fill(~mask, 10**6).min(1).values  # (B,)
        return {"logits": torch.stack([~first_is_min, first_is_min], 1).float() * 10}


def test_accuracy_shuffled_drops_for_a_model_that_reads_order():
    """In order every document is class 1 and scored right; shuffled, most first tokens are not the
    smallest."""
    docs = [
        {
            "id": str(i),
            "ids": [list(range(5 + i, 25 + i))],
            "word_of": [list(range(20))],
            "y": 1,
            "index": i,
        }
        for i in range(20)
    ]
    cfg = OmegaConf.create(
        {
            "task": {"labels": ["a", "b"], "buckets": [[1, 1000]]},
            "evaluate": {"batch_size": 8, "top_k_words": 2},
        }
    )
    scores, _, _ = evaluate(_OrderProbe(), docs, cfg)
    assert scores["test/accuracy"] == 1.0 and scores["test/accuracy_shuffled"] < 0.5
