"""Documents as word ids in two layouts, so every classifier family reads the same batch.

- hierarchical: words (B, N, L) = N sentences of L words, word_mask (B, N, L)  (han)
- flat: tokens (B, T) = the document's words in order, token_mask (B, T)          (every other family)
Length-bucketed, seeded batches come from the translation task's BucketBatchSampler (by words per document).
"""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader

from attention_lab.data.batching import BucketBatchSampler
from attention_lab.io import read_jsonl
from attention_lab.tokenization import PAD, encode_words, load_tokenizer


def load_documents(prepared: Path, split: str, tok, labels: list[str], max_sentences: int, max_words: int) -> list[dict]:
    """Rows of a prepared split with "ids" (sentences of word ids, truncated) and "y" (label index)."""
    rows = read_jsonl(prepared / f"{split}.jsonl")
    index = {label: i for i, label in enumerate(labels)}
    for i, r in enumerate(rows):
        if r["label"] not in index:
            raise ValueError(f"{prepared / split}.jsonl: document {r.get('id', i)} has label {r['label']!r}, "
                             f"not one of the training labels {labels}")
        sentences = [s[:max_words] for s in r["sentences"][:max_sentences]]
        r.update(ids=encode_words(tok, sentences), y=index[r["label"]], index=i)
    return rows


def train_labels(prepared: Path) -> list[str]:
    """The sorted labels of the training split: class i of every model is labels[i]."""
    return sorted({r["label"] for r in read_jsonl(prepared / "train.jsonl")})


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
            words[b, n, :len(s)] = torch.tensor(s, dtype=torch.long)
        flat = [i for s in r["ids"] for i in s]
        tokens[b, :len(flat)] = torch.tensor(flat, dtype=torch.long)
    return {"words": words, "word_mask": words != PAD, "tokens": tokens, "token_mask": tokens != PAD,
            "label": torch.tensor([r["y"] for r in rows]), "index": torch.tensor([r["index"] for r in rows])}


class DocumentDataModule(pl.LightningDataModule):
    """Train/valid loaders over the prepared documents, with the stage's word-level tokenizer."""

    def __init__(self, prepared: str | Path, tokenizer: str | Path, batch_size: int, seed: int,
                 max_sentences: int, max_words: int):
        super().__init__()
        self.prepared, self.batch_size, self.seed = Path(prepared), batch_size, seed
        self.max_sentences, self.max_words = max_sentences, max_words
        self.tok = load_tokenizer(tokenizer)
        self.labels = train_labels(self.prepared)
        self.splits: dict[str, list[dict]] = {}

    def setup(self, stage: str | None = None) -> None:
        for split in ("train", "valid"):
            if split not in self.splits:
                self.splits[split] = load_documents(self.prepared, split, self.tok, self.labels, self.max_sentences,
                                                    self.max_words)

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        rows = self.splits[split]
        lengths = [sum(len(s) for s in r["ids"]) for r in rows]
        sampler = BucketBatchSampler(lengths, self.batch_size, shuffle, self.seed)
        return DataLoader(rows, batch_sampler=sampler, collate_fn=collate_documents, num_workers=0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", shuffle=False)
