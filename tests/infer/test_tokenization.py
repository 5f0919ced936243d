from attention_lab.infer.tokenization import (
    BOS,
    EOS,
    PAD,
    UNK,
    decode,
    encode,
    load_tokenizer,
    text_normalizer,
    train_tokenizer,
    word_ids,
)

TEXTS = [
    "the old man reads a book in the library",
    "노인이 도서관에서 책을 읽는다",
    "the boy who eats an apple goes to school",
    "사과를 먹는 소년이 학교에 간다",
] * 20


def test_round_trip_and_specials(tmp_path):
    for model in ("bpe", "unigram"):
        tok = train_tokenizer(TEXTS, model=model, vocab_size=120, min_frequency=1)
        assert [tok.token_to_id(t) for t in ("<pad>", "<s>", "</s>", "<unk>")] == [
            PAD,
            BOS,
            EOS,
            UNK,
        ]
        ids = encode(tok, TEXTS[:4])
        assert decode(tok, ids) == TEXTS[:4]
        tok.save(str(tmp_path / f"{model}.json"))
        assert encode(load_tokenizer(tmp_path / f"{model}.json"), TEXTS[:4]) == ids


def test_word_ids_follow_whitespace_words():
    tok = train_tokenizer(TEXTS, vocab_size=60, min_frequency=1)
    text = "노인이 도서관에서 책을 읽는다"
    wids = word_ids(tok, text)
    assert (
        wids[0] == 0
        and wids[-1] == 3
        and sorted(set(wids)) == [0, 1, 2, 3]
        and wids == sorted(wids)
    )


def test_normalisation_and_lowercasing_options():
    """The defaults are NFKC alone, as before the options existed (the committed tokenizer.json
    stays the same)."""
    import json

    default = json.loads(train_tokenizer(TEXTS, vocab_size=80, min_frequency=1).to_str())
    assert default["normalizer"] == {"type": "NFKC"}
    assert (
        json.loads(
            train_tokenizer(
                TEXTS, vocab_size=80, min_frequency=1, normalization="nfkc", lowercase=False
            ).to_str()
        )
        == default
    )
    text = "The Ｆull-width ﬁle Café"
    assert text_normalizer("nfkc", lowercase=True).normalize_str(text) == "the full-width file café"
    assert text_normalizer("nfc").normalize_str(text) == "The Ｆull-width ﬁle Café"
    assert text_normalizer("none") is None
    cased = train_tokenizer(
        TEXTS + ["The Old Man"], vocab_size=80, min_frequency=1, normalization="none"
    )
    assert cased.normalizer is None and decode(cased, encode(cased, ["The Old Man"])) == [
        "The Old Man"
    ]
    lower = train_tokenizer(TEXTS, vocab_size=80, min_frequency=1, lowercase=True)
    assert decode(lower, encode(lower, ["The OLD man"])) == ["the old man"]


def test_unknown_model_is_a_clear_error():
    import pytest

    with pytest.raises(ValueError, match="tokenize.model"):
        train_tokenizer(TEXTS, model="wordpiece-ish")


def test_wordpiece_training_is_the_same_in_every_process():
    """HF's WordPieceTrainer alone gives another vocabulary per process (hash-map order,
    tokenizers#1794); ours is byte-identical across processes, and its ##pieces are ordinary (not
    special) tokens."""
    import subprocess
    import sys

    code = (
        "from attention_lab.infer.tokenization import train_wordpiece; texts = ['the food was not"
        " good at all', 'we loved the lovely room and the kind staff', 'the kettle was unpleasant',"
        " 'the soup was disappointing but the bread was fantastic'] * 5;"
        " print(train_wordpiece(texts, vocab_size=80, min_frequency=2).to_str())"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(3)
    }
    assert len(runs) == 1
    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(runs.pop())
    assert [a.content for a in tok.get_added_tokens_decoder().values()] == [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
    ]
    assert (
        tok.decode(tok.encode("the kettle was disappointing").ids) == "the kettle was disappointing"
    )


def test_the_config_rules_name_every_normalization():
    """core.config_rules checks tokenize.normalization against its own copy of the names (core does
    not import infer)."""
    from attention_lab.core import config_rules
    from attention_lab.infer.tokenization import NORMALIZATIONS

    assert config_rules.NORMALIZATIONS == tuple(NORMALIZATIONS)
