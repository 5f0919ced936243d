"""HF tokenizers trained on the training split only: a joint subword model (translation) or a word-level one (classify)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
PAD, BOS, EOS, UNK = range(4)


def train_tokenizer(texts: Iterable[str], model: str = "bpe", vocab_size: int = 2000,
                    min_frequency: int = 2) -> Tokenizer:
    """Train a Metaspace-pretokenized subword model; word boundaries survive as Encoding.word_ids."""
    if model == "bpe":
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=min_frequency,
                                      special_tokens=SPECIALS, show_progress=False)
    elif model == "unigram":
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=SPECIALS, unk_token="<unk>",
                                          show_progress=False)
    else:
        raise ValueError(f"tokenize.model: expected 'bpe' or 'unigram', got {model!r}")
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(texts, trainer)
    if [tok.token_to_id(s) for s in SPECIALS] != list(range(len(SPECIALS))):
        raise RuntimeError(f"special tokens must take ids 0..3, got {[tok.token_to_id(s) for s in SPECIALS]}")
    return tok


def train_word_tokenizer(documents: Iterable[list[list[str]]], vocab_size: int = 20000,
                         min_frequency: int = 2) -> Tokenizer:
    """One id per lowercased word (WordLevel), for documents already split into sentences of words."""
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=SPECIALS,
                                        show_progress=False)
    tok.train_from_iterator((" ".join(sentence) for doc in documents for sentence in doc), trainer)
    if [tok.token_to_id(s) for s in SPECIALS] != list(range(len(SPECIALS))):
        raise RuntimeError(f"special tokens must take ids 0..3, got {[tok.token_to_id(s) for s in SPECIALS]}")
    return tok


def encode_words(tok: Tokenizer, sentences: list[list[str]]) -> list[list[int]]:
    """One id per word of each sentence (words are given, so the tokenizer never splits or merges them)."""
    return [e.ids for e in tok.encode_batch(sentences, is_pretokenized=True, add_special_tokens=False)]


def load_tokenizer(path: str | Path) -> Tokenizer:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: tokenizer not found (run the tokenize stage first)")
    return Tokenizer.from_file(str(path))


def encode(tok: Tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of each text, without special tokens."""
    return [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]


def decode(tok: Tokenizer, ids: list[list[int]]) -> list[str]:
    return tok.decode_batch(ids, skip_special_tokens=True)


def word_ids(tok: Tokenizer, text: str) -> list[int]:
    """For each subword token of `text`, the index of the whitespace word it belongs to."""
    return [w for w in tok.encode(text, add_special_tokens=False).word_ids]
