"""caption/evaluate.py: scores per digit-count bucket; the left-to-right sweep that controls
localisation."""

from omegaconf import OmegaConf

from attention_lab.caption.evaluate import bucket_scores, hit_counts, localisation, sweep_hits

WORDS = ["zero", "one", "two", "three", "four", "five"]


def test_a_bucket_gets_bleu_n_only_where_its_captions_have_n_words():
    """BLEU-4 of 2- and 3-word captions has no 4-grams to count: 0.0 there is no score, so the
    bucket has none."""
    rows = [
        {"caption": " ".join(WORDS[(i + j) % 6] for j in range(n)), "n_digits": n}
        for n in (2, 3, 4, 5)
        for i in range(3)
    ]
    texts = [r["caption"] for r in rows]  # every caption right
    scores = bucket_scores(texts, rows, [], [(2, 2), (3, 3), (4, 4), (5, 6)])
    assert scores["test/accuracy_len_2_2"] == scores["test/accuracy_len_5_6"] == 1.0
    assert round(scores["test/bleu_2_len_2_2"]) == 100 and "test/bleu_3_len_2_2" not in scores
    assert round(scores["test/bleu_3_len_3_3"]) == 100 and "test/bleu_len_3_3" not in scores
    assert round(scores["test/bleu_len_4_4"]) == round(scores["test/bleu_4_len_5_6"]) == 100


def test_the_decoding_cap_follows_the_training_captions_and_cuts_none_of_that_length(tmp_path):
    """decode_limit: 1.5 × the longest training caption (every reference of a photo counted) + 1 for
    eos; the built-in digits' 6 words give the old fixed cap of 10, and a captioner that would say a
    16-word photo caption of the training set is not cut where the old cap stopped it at 9 words."""
    import numpy as np
    import torch
    from omegaconf import OmegaConf

    from attention_lab.caption.evaluate import evaluate
    from attention_lab.caption.prepare import tokenizer
    from attention_lab.caption.search import decode_limit
    from attention_lab.core.files import write_json
    from attention_lab.infer.tokenization import EOS
    from tests.tiny_models import DIGIT_WORDS, tiny_model

    long = "a red circle drawn in the middle of a white page with nothing at all around"  # 16 words
    cfg = OmegaConf.create(
        {
            "root": str(tmp_path),
            "paths": {"tokenized": "."},
            "tokenize": {"vocab_size": 100, "min_frequency": 1},
            "evaluate": {"max_len_ratio": 1.5, "batch_size": 4, "beam": 1, "len_penalty": 1.0},
            "task": {"buckets": []},
        }
    )
    tok, stats = tokenizer(
        cfg,
        [
            {"caption": "a red circle", "captions": ["a red circle", long]},
            {"caption": " ".join(DIGIT_WORDS)},
        ],
    )
    write_json(tmp_path / "stats.json", stats)  # as the tokenize stage writes it
    assert stats["caption_tokens_max"] == 16 and decode_limit(cfg) == 25  # ceil(1.5 × 16) + 1
    _, digits = tokenizer(cfg, [{"caption": " ".join(DIGIT_WORDS[:n])} for n in (2, 6, 4)])
    write_json(tmp_path / "stats.json", digits)
    assert decode_limit(cfg) == 10
    model = tiny_model("show_attend_tell", tok.get_vocab_size())
    with torch.no_grad():  # a captioner that never says eos: it runs to the cap
        model.L_o.bias[EOS] = -30.0
    images = np.zeros((2, 16, 64), np.uint8)
    test = [{"caption": long, "captions": [long]}] * 2
    for cap in (25, 10):
        _, hyps, _, _ = evaluate(model, tok, test, images, cfg, cap)
        assert {len(h.tokens) for h in hyps} == {cap}
    # the derived cap holds the 16 words and eos; the old one 9 words
    assert 10 < len(long.split()) + 1 <= 25


def test_the_sweep_attends_each_digits_mean_centre_in_the_middle_row():
    """Grid 2×8 of 16-pixel cells on a 32×128 canvas, digits 12-18 pixels, gaps up to 2, offset up
    to 16: digit t's mean centre is 8 + 16t + 7.5 pixels from the left, so digits 0, 1, 2 sweep
    cells 0, 1, 2 of the lower row (centres (8, 24), (24, 24), (40, 24)); a box holding that centre
    is a hit."""
    data = OmegaConf.create(
        {"digit_size": [12, 18], "max_gap": 2, "max_offset": 16, "height": 32, "width": 128}
    )
    on = [[0, 12, 15, 27], [17, 10, 32, 25], [33, 14, 48, 29]]  # each box holds its swept centre
    off = [[60, 0, 75, 15], [17, 0, 32, 15], [33, 14, 48, 29]]  # right, too high, right place
    assert localisation(sweep_hits([{"boxes": on}], (2, 8), 16, data)) == 1.0
    both = sweep_hits([{"boxes": on}, {"boxes": off}], (2, 8), 16, data)
    assert both == [[True, True, True], [False, False, True]]
    assert localisation(both) == 4 / 6
    # the ledger's per-item counts: Σ hits / Σ digits = 4 / 6
    assert hit_counts(both) == [[3, 3], [1, 3]]
