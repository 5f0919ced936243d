import numpy as np
import pytest

from attention_lab.results import metrics


def test_buckets_labels_and_lookup():
    buckets = [[1, 10], [11, 20], [41, 1000]]
    assert [metrics.bucket_label(b) for b in buckets] == ["1-10", "11-20", "41+"]
    assert metrics.bucket_key([41, 1000]) == "41_plus"
    assert metrics.bucket_of(11, buckets) == 1
    with pytest.raises(ValueError, match="no bucket"):
        metrics.bucket_of(30, buckets)


def test_corpus_scores_use_sacrebleu():
    refs = ["노인이 도서관에서 책을 천천히 읽는다", "키가 큰 소년이 친구와 함께 학교에 간다"]
    s = metrics.corpus_scores(list(refs), refs)
    assert s["bleu"] == pytest.approx(100.0) and s["exact_match"] == 100.0
    assert "nrefs:1" in s["bleu_signature"] and "nc:6" in s["chrf_signature"]
    worse = metrics.corpus_scores(["노인이 도서관에서 사과를 천천히 먹는다", refs[1]], refs)
    assert worse["bleu"] < 100.0 and worse["exact_match"] == 50.0


def test_bucket_bleu_splits_by_source_words():
    srcs = ["a b", "a b c d e f g h i j k l"]
    out = metrics.bucket_bleu(
        ["x y z w v", "p q r s"], ["x y z w v", "a b c d"], srcs, [[1, 10], [11, 20]]
    )
    assert out["bleu_len_1_10"] == pytest.approx(100.0) and out["bleu_len_11_20"] < 1.0


def test_word_attention_sums_sources_and_averages_targets():
    # 3 target pieces x 3 source pieces
    attn = np.array([[0.1, 0.2, 0.7], [0.3, 0.3, 0.4], [1.0, 0.0, 0.0]])
    w = metrics.word_attention(attn, src_words=[0, 0, 1], tgt_words=[0, 0, 1])
    np.testing.assert_allclose(w, [[0.45, 0.55], [1.0, 0.0]])
    np.testing.assert_allclose(w.sum(1), 1.0)


def test_aer_perfect_partial_and_empty():
    gold = [{(0, 1), (1, 0)}]
    assert metrics.aer(gold, gold) == 0.0
    assert metrics.aer([{(0, 0), (1, 0)}], gold) == pytest.approx(1 - 2 * 1 / 4)
    assert metrics.hard_alignment(np.array([[0.1, 0.9], [0.8, 0.2]])) == {(1, 0), (0, 1)}
