"""caption/evaluate.py: scores per digit-count bucket."""

from attention_lab.caption.evaluate import bucket_scores

WORDS = ["zero", "one", "two", "three", "four", "five"]


def test_a_bucket_gets_bleu_n_only_where_its_captions_have_n_words():
    """BLEU-4 of 2- and 3-word captions has no 4-grams to count: 0.0 there is no score, so the bucket has none."""
    rows = [{"caption": " ".join(WORDS[(i + j) % 6] for j in range(n)), "n_digits": n} for n in (2, 3, 4, 5) for i in range(3)]
    texts = [r["caption"] for r in rows]  # every caption right
    scores = bucket_scores(texts, rows, [], [(2, 2), (3, 3), (4, 4), (5, 6)])
    assert scores["test/accuracy_len_2_2"] == scores["test/accuracy_len_5_6"] == 1.0
    assert round(scores["test/bleu_2_len_2_2"]) == 100 and "test/bleu_3_len_2_2" not in scores
    assert round(scores["test/bleu_3_len_3_3"]) == 100 and "test/bleu_len_3_3" not in scores
    assert round(scores["test/bleu_len_4_4"]) == round(scores["test/bleu_4_len_5_6"]) == 100
