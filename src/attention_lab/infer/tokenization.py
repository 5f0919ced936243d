"""HF tokenizers trained on the training split only: a joint subword model (translation), a
word-level one (classify) and a BERT WordPiece model (classify's pretrained families)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from tokenizers import (
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]
PAD, BOS, EOS, UNK = range(4)
# what decoding must never output: never_emitted() of every tokenizer trained here
NEVER_EMITTED = (PAD, BOS, UNK)
# translate's tokenize.normalization
NORMALIZATIONS = {"nfkc": normalizers.NFKC, "nfc": normalizers.NFC, "none": None}
# ids 0..4 in our own WordPiece vocabularies
BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_tokenizer(
    texts: Iterable[str],
    model: str = "bpe",
    vocab_size: int = 2000,
    min_frequency: int = 2,
    normalization: str = "nfkc",
    lowercase: bool = False,
) -> Tokenizer:
    """Train a Metaspace-pretokenized subword model; word boundaries survive as
    Encoding.word_ids."""
    if model == "bpe":
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=SPECIALS,
            show_progress=False,
        )
    elif model == "unigram":
        tok = Tokenizer(models.Unigram())
        trainer = trainers.UnigramTrainer(
            vocab_size=vocab_size, special_tokens=SPECIALS, unk_token="<unk>", show_progress=False
        )
    else:
        raise ValueError(f"tokenize.model: expected 'bpe' or 'unigram', got {model!r}")
    tok.normalizer = text_normalizer(normalization, lowercase)
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(texts, trainer)
    if [tok.token_to_id(s) for s in SPECIALS] != list(range(len(SPECIALS))):
        raise RuntimeError(
            f"special tokens must take ids 0..3, got {[tok.token_to_id(s) for s in SPECIALS]}"
        )
    return tok


def text_normalizer(
    normalization: str = "nfkc", lowercase: bool = False
) -> normalizers.Normalizer | None:
    """Unicode normalisation (NORMALIZATIONS) then optional lower-casing; the defaults are NFKC
    alone."""
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"tokenize.normalization: expected one of {', '.join(NORMALIZATIONS)}, got"
            f" {normalization!r}"
        )
    steps = [NORMALIZATIONS[normalization]()] if NORMALIZATIONS[normalization] else []
    steps += [normalizers.Lowercase()] if lowercase else []
    if len(steps) < 2:
        return steps[0] if steps else None
    return normalizers.Sequence(steps)


def train_word_tokenizer(
    documents: Iterable[list[list[str]]], vocab_size: int = 20000, min_frequency: int = 2
) -> Tokenizer:
    """One id per lowercased word (WordLevel), for documents already split into sentences of
    words."""
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=SPECIALS,
        show_progress=False,
    )
    tok.train_from_iterator((" ".join(sentence) for doc in documents for sentence in doc), trainer)
    if [tok.token_to_id(s) for s in SPECIALS] != list(range(len(SPECIALS))):
        raise RuntimeError(
            f"special tokens must take ids 0..3, got {[tok.token_to_id(s) for s in SPECIALS]}"
        )
    return tok


def train_wordpiece(
    texts: Iterable[str], vocab_size: int = 8000, min_frequency: int = 2
) -> Tokenizer:
    """Devlin et al. 2018 §3 WordPiece (lowercased, BERT pre-tokenizer); pairs encode as [CLS] A
    [SEP] B [SEP]."""
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    texts = list(texts)
    # HF's trainer creates the word-continuing pieces (##c) in hash-map order, and merge ties
    # compare their ids, so the same text gives another vocabulary in every process
    # (huggingface/tokenizers#1794). Creating every ##c up front, in sorted order, makes it
    # deterministic; they are then made ordinary vocabulary entries again.
    chars = {
        c
        for text in texts
        for word, _ in tok.pre_tokenizer.pre_tokenize_str(tok.normalizer.normalize_str(text))
        for c in word
    }
    pieces = [f"##{c}" for c in sorted(chars)]
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=BERT_SPECIALS + pieces,
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer)
    spec = json.loads(tok.to_str())
    spec["added_tokens"] = [a for a in spec["added_tokens"] if a["content"] in BERT_SPECIALS]
    tok = Tokenizer.from_str(json.dumps(spec))
    if [tok.token_to_id(s) for s in BERT_SPECIALS] != list(range(len(BERT_SPECIALS))):
        raise RuntimeError(
            f"special tokens must take ids 0..4, got {[tok.token_to_id(s) for s in BERT_SPECIALS]}"
        )
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))],
    )
    return tok


def bert_special_ids(tok: Tokenizer) -> dict[str, int]:
    """{'pad': id, 'unk': id, 'cls': id, 'sep': id, 'mask': id} of a BERT vocabulary (ours or a
    pretrained one)."""
    ids = {s.strip("[]").lower(): tok.token_to_id(s) for s in BERT_SPECIALS}
    missing = [k for k, v in ids.items() if v is None]
    if missing:
        raise ValueError(
            f"not a BERT vocabulary: no {', '.join(f'[{m.upper()}]' for m in missing)} token"
        )
    return ids


def encode_document(
    tok: Tokenizer, sentences: list[list[str]]
) -> tuple[list[list[int]], list[list[int]]]:
    """Sentences of words -> (token ids per sentence, word index of each token): one token per word
    for a word-level vocabulary, one or more WordPiece pieces per word for a BERT one."""
    encodings = tok.encode_batch(sentences, is_pretokenized=True, add_special_tokens=False)
    return [e.ids for e in encodings], [e.word_ids for e in encodings]


def truncate(ids: list[list[int]], word_of: list[list[int]], max_tokens: int | None):
    """Keep the first max_tokens tokens of a document, cut at a word boundary (sentences after the
    cut dropped)."""
    if max_tokens is None or sum(map(len, ids)) <= max_tokens:
        return ids, word_of
    kept_ids, kept_words, room = [], [], max_tokens
    for s, w in zip(ids, word_of):
        if len(s) > room:
            cut = room
            while 0 < cut < len(s) and w[cut] == w[cut - 1]:  # never split a word's pieces
                cut -= 1
            if cut:
                kept_ids.append(s[:cut])
                kept_words.append(w[:cut])
            break
        kept_ids.append(s)
        kept_words.append(w)
        room -= len(s)
    return kept_ids, kept_words


def pool_pieces(weights: np.ndarray, word_of: list[int], n_words: int | None = None) -> np.ndarray:
    """Per-token weights of one sentence -> per-word weights (a word's pieces summed): (n_tokens,)
    -> (n_words,)."""
    n = n_words if n_words is not None else (max(word_of) + 1 if word_of else 0)
    return np.bincount(
        np.asarray(word_of, dtype=np.int64),
        weights=np.asarray(weights, dtype=np.float64),
        minlength=n,
    )[:n].astype(np.float32)


def encode_words(tok: Tokenizer, sentences: list[list[str]]) -> list[list[int]]:
    """One id per word of each sentence (words are given, so the tokenizer never splits or merges
    them)."""
    return [
        e.ids for e in tok.encode_batch(sentences, is_pretokenized=True, add_special_tokens=False)
    ]


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


def never_emitted(tok: Tokenizer) -> tuple[int, ...]:
    """The ids a decoder must never output (decoding.py's `banned`): the tokenizer's <pad>, <s> and
    <unk> (eos ends a hypothesis and is never part of its tokens). (0, 1, 3), NEVER_EMITTED, for the
    tokenizers trained here."""
    return tuple(
        sorted(i for s in ("<pad>", "<s>", "<unk>") if (i := tok.token_to_id(s)) is not None)
    )


def tokens_of(tok: Tokenizer, ids: list[int]) -> list[str]:
    """The vocabulary entry of each id, nothing dropped (a caption's words: its text is " ".join of
    them); "<unk>" only for an id past the vocabulary, which a model trained with this tokenizer
    cannot output."""
    return [tok.id_to_token(i) or "<unk>" for i in ids]


def word_ids(tok: Tokenizer, text: str) -> list[int]:
    """For each subword token of `text`, the index of the whitespace word it belongs to."""
    return [w for w in tok.encode(text, add_special_tokens=False).word_ids]
