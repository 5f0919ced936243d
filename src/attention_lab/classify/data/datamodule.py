"""The Lightning DataModule of the classify task (kept apart from document_batches so evaluation
never imports Lightning)."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from attention_lab.classify.data.batches import (
    collate_documents,
    label_subset,
    load_documents,
    train_labels,
)
from attention_lab.infer.tokenization import load_tokenizer
from attention_lab.train.batching import BucketBatchSampler, ResumableLoader, data_parallel


class DocumentDataModule(pl.LightningDataModule):
    """Train/valid loaders over the prepared documents; training keeps a stratified `label_fraction`
    of its documents."""

    def __init__(
        self,
        prepared: str | Path,
        tokenizer: str | Path,
        batch_size: int,
        seed: int,
        max_sentences: int,
        max_words: int,
        max_tokens: int | None = None,
        label_fraction: float = 1.0,
        subset_seed: int = 0,
    ):
        super().__init__()
        self.prepared, self.batch_size, self.seed = Path(prepared), batch_size, seed
        self.limits = (max_sentences, max_words, max_tokens)
        self.label_fraction, self.subset_seed = label_fraction, subset_seed
        self.tok = load_tokenizer(tokenizer)
        self.labels = train_labels(self.prepared)
        self.splits: dict[str, list[dict]] = {}

    def setup(self, stage: str | None = None) -> None:
        for split in ("train", "valid"):
            if split not in self.splits:
                rows = load_documents(self.prepared, split, self.tok, self.labels, *self.limits)
                self.splits[split] = (
                    label_subset(rows, self.label_fraction, self.subset_seed)
                    if split == "train"
                    else rows
                )

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        rows = self.splits[split]
        lengths = [sum(len(s) for s in r["ids"]) for r in rows]
        sampler = BucketBatchSampler(
            lengths, self.batch_size, shuffle, self.seed, *data_parallel(self.trainer)
        )
        return ResumableLoader(
            rows, batch_sampler=sampler, collate_fn=collate_documents, num_workers=0
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", shuffle=False)
