"""Documents as token ids in two layouts, so every classifier family reads the same batch:
hierarchical, words (B, N, L) = N sentences of L tokens with word_mask (B, N, L) (han), and flat,
tokens (B, T) with token_mask (B, T) (every other family). A token is a word (a word-level
vocabulary) or a WordPiece piece (a BERT one); each row keeps `word_of`, the word index of every
token. Length-bucketed, seeded batches come from BucketBatchSampler (by tokens)."""

from __future__ import annotations

import random
from pathlib import Path

import torch

from attention_lab.core.files import read_jsonl
from attention_lab.infer.tokenization import PAD, encode_document, truncate


def load_documents(
    prepared: Path,
    split: str,
    tok,
    labels: list[str],
    max_sentences: int,
    max_words: int,
    max_tokens: int | None = None,
) -> list[dict]:
    """Rows of a prepared split with "ids" (sentences of token ids, truncated), "word_of" (word
    index of each token) and "y" (label index)."""
    rows = read_jsonl(prepared / f"{split}.jsonl")
    index = {label: i for i, label in enumerate(labels)}
    for i, r in enumerate(rows):
        if r["label"] not in index:
            raise ValueError(
                f"{prepared / split}.jsonl: document {r.get('id', i)} has label {r['label']!r}, "
                f"not one of the training labels {labels}"
            )
        ids, word_of = encode_text(tok, r["sentences"], max_sentences, max_words, max_tokens)
        r.update(ids=ids, word_of=word_of, y=index[r["label"]], index=i)
    return rows


def encode_text(
    tok,
    sentences: list[list[str]],
    max_sentences: int,
    max_words: int,
    max_tokens: int | None = None,
) -> tuple[list[list[int]], list[list[int]]]:
    """(ids, word_of) of a document's first max_sentences sentences, each cut to max_words words,
    then max_tokens."""
    return truncate(
        *encode_document(tok, [s[:max_words] for s in sentences[:max_sentences]]), max_tokens
    )


def label_subset(rows: list[dict], fraction: float, seed: int) -> list[dict]:
    """A stratified `fraction` of the rows (at least one per label), the same for every family:
    depends on seed only."""
    if not 0 < fraction <= 1:
        raise ValueError(f"train.label_fractions: expected fractions in (0, 1], got {fraction}")
    if fraction == 1:
        return rows
    by_label: dict[int, list[dict]] = {}
    for r in rows:
        by_label.setdefault(r["y"], []).append(r)
    rng, kept = random.Random(seed), []
    for y in sorted(by_label):
        group = list(by_label[y])
        rng.shuffle(group)
        kept += group[: max(1, round(len(group) * fraction))]
    return sorted(kept, key=lambda r: r["index"])


def train_labels(prepared: Path) -> list[str]:
    """The sorted labels of the training split: class i of every model is labels[i]."""
    return sorted({r["label"] for r in read_jsonl(prepared / "train.jsonl")})


def model_inputs(model, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) in the layout the family reads: (B, N, L) sentences of tokens, or (B, T)
    tokens."""
    return (
        (batch["words"], batch["word_mask"])
        if model.hierarchical
        else (batch["tokens"], batch["token_mask"])
    )


def collate_documents(rows: list[dict]) -> dict[str, torch.Tensor]:
    """Pad to the batch maximum in both layouts; label (B,), index (B,)."""
    B = len(rows)
    N = max(len(r["ids"]) for r in rows)
    L = max(len(s) for r in rows for s in r["ids"])
    T = max(sum(len(s) for s in r["ids"]) for r in rows)
    words = torch.full((B, N, L), PAD, dtype=torch.long)
    tokens = torch.full((B, T), PAD, dtype=torch.long)
    for b, r in enumerate(rows):
        for n, s in enumerate(r["ids"]):
            words[b, n, : len(s)] = torch.tensor(s, dtype=torch.long)
        flat = [i for s in r["ids"] for i in s]
        tokens[b, : len(flat)] = torch.tensor(flat, dtype=torch.long)
    return {
        "words": words,
        "word_mask": words != PAD,
        "tokens": tokens,
        "token_mask": tokens != PAD,
        "label": torch.tensor([r["y"] for r in rows]),
        "index": torch.tensor([r["index"] for r in rows]),
    }
