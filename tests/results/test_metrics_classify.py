import numpy as np
import pytest

from attention_lab.results import metrics


def test_classification_scores_match_hand_computed_values():
    y_true, y_pred = [0, 0, 1, 2], [0, 1, 1, 2]
    s = metrics.classification_scores(y_true, y_pred, num_classes=3)
    assert s["accuracy"] == pytest.approx(0.75)
    assert s["macro_f1"] == pytest.approx((2 / 3 + 2 / 3 + 1) / 3)  # F1 per class: 2/3, 2/3, 1
    # a class that never occurs still counts (as 0) in the macro average
    assert metrics.classification_scores(y_true, y_pred, num_classes=4)[
        "macro_f1"
    ] == pytest.approx(7 / 12)
    assert metrics.classification_scores([1, 1], [1, 1], 2) == {"accuracy": 1.0, "macro_f1": 0.5}


def test_per_bucket_scores_split_by_sentence_count():
    buckets = [[1, 5], [6, 20], [21, 1000], [1001, 2000]]
    out = metrics.per_bucket_scores(
        [2, 3, 15, 50], [0, 1, 1, 0], [0, 0, 1, 1], buckets, num_classes=2
    )
    assert set(out) == {"1_5", "6_20", "21_plus"}  # empty buckets are left out
    assert out["1_5"]["n"] == 2 and out["1_5"]["accuracy"] == pytest.approx(0.5)
    assert out["6_20"]["accuracy"] == 1.0 and out["21_plus"]["accuracy"] == 0.0
    with pytest.raises(ValueError, match="no bucket"):
        metrics.per_bucket_scores([0], [0], [0], buckets, 2)


def test_flat_weights_reshape_per_sentence():
    flat = np.arange(7, dtype=float)  # 6 words + 1 padding position
    rows = metrics.flat_to_sentences(flat, [2, 3, 1])
    assert [r.tolist() for r in rows] == [[0, 1], [2, 3, 4], [5]]
    assert metrics.sentence_weights_from_words(flat, [2, 3, 1]).tolist() == [1, 9, 5]
    with pytest.raises(ValueError, match="cannot cover"):
        metrics.flat_to_sentences(flat[:4], [2, 3])
    padded = np.array([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])  # (N, L)
    assert [len(r) for r in metrics.sentence_word_weights(padded, [2, 3])] == [2, 3]
    assert [len(r) for r in metrics.sentence_word_weights(flat, [2, 3, 1])] == [2, 3, 1]


def test_sentence_rationale_hit_uses_the_top_sentence():
    w = np.array([0.1, 0.6, 0.3])
    assert metrics.sentence_rationale_hit(w, [1, 2])
    assert not metrics.sentence_rationale_hit(w, [0, 2])


def test_word_precision_at_k_counts_gold_among_top_words():
    # top words: (0,1), (1,0), (1,1), (1,2), (0,0)
    ragged = [np.array([0.1, 0.9]), np.array([0.5, 0.3, 0.2])]
    gold = [[0, 1], [1, 1]]
    assert metrics.word_precision_at_k(ragged, gold, k=1) == 1.0
    assert metrics.word_precision_at_k(ragged, gold, k=2) == 0.5
    assert metrics.word_precision_at_k(ragged, gold, k=3) == pytest.approx(2 / 3)
    # k capped at 5 words
    assert metrics.word_precision_at_k(ragged, gold, k=50) == pytest.approx(2 / 5)
    # (N, L): padding must not count as a word
    padded = np.array([[0.1, 0.9, 0.0], [0.5, 0.3, 0.2]])
    assert metrics.word_precision_at_k(
        padded, gold, k=50, sentence_lengths=[2, 3]
    ) == pytest.approx(2 / 5)
    flat = np.array([0.1, 0.9, 0.5, 0.3, 0.2])
    assert metrics.word_precision_at_k(flat, gold, k=3, sentence_lengths=[2, 3]) == pytest.approx(
        2 / 3
    )


def test_rationale_scores_average_over_documents_with_gold():
    docs = [
        {
            "sentence_weights": np.array([0.9, 0.1]),
            "word_weights": [np.array([1.0]), np.array([1.0])],
            "gold": {"sentences": [0], "words": [[0, 0]]},
        },
        {
            "sentence_weights": np.array([0.2, 0.8]),
            "word_weights": [np.array([0.7, 0.3]), np.array([1.0])],
            "gold": {"sentences": [0], "words": [[0, 1]]},
        },
        {"sentence_weights": np.array([1.0]), "word_weights": [np.array([1.0])], "gold": None},
    ]
    s = metrics.rationale_scores(docs, k=1)
    assert s == {"rationale_acc": pytest.approx(0.5), "word_p_at_k": pytest.approx(0.5)}
    assert metrics.rationale_scores(docs[2:]) == {"rationale_acc": None, "word_p_at_k": None}


def test_hop_overlap_is_one_for_identical_and_zero_for_disjoint_hops():
    a = np.array([0.5, 0.5, 0.0, 0.0])
    assert metrics.hop_overlap(np.stack([a, a])) == pytest.approx(1.0)
    assert metrics.hop_overlap(np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0]])) == 0.0
    # pair overlaps 0.5, 0, 0.5
    hops = np.array([[0.5, 0.5, 0, 0], [0, 0.5, 0.5, 0], [0, 0, 0.5, 0.5]])
    assert metrics.hop_overlap(hops) == pytest.approx(1 / 3)
    assert np.isnan(metrics.hop_overlap(a[None]))


def test_bucket_macro_f1_averages_over_the_labels_present():
    from attention_lab.results.metrics import per_bucket_scores

    scores = per_bucket_scores(
        [2, 2, 9, 9], [1, 1, 0, 2], [1, 1, 0, 1], [[1, 5], [6, 1000]], num_classes=5
    )
    # one class, all right: not 1/5 for the four absent classes
    assert scores["1_5"]["macro_f1"] == 1.0
    assert scores["6_plus"]["accuracy"] == 0.5 and 0.0 < scores["6_plus"]["macro_f1"] < 1.0
