"""Parallel-corpus LightningDataModule: prepared JSONL -> token ids -> length-bucketed, seeded batches."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from attention_lab.core.batching import BucketBatchSampler, data_parallel
from attention_lab.core.tokenization import load_tokenizer
from attention_lab.translate.data.batches import collate, load_split


class TranslationDataModule(pl.LightningDataModule):
    """Train/valid/test loaders over the prepared splits, tokenized with the stage's tokenizer.json."""

    def __init__(self, prepared: str | Path, tokenizer: str | Path, batch_size: int, seed: int):
        super().__init__()
        self.prepared, self.batch_size, self.seed = Path(prepared), batch_size, seed
        self.tok = load_tokenizer(tokenizer)
        self.splits: dict[str, list[dict]] = {}

    def setup(self, stage: str | None = None) -> None:
        for split in ("train", "valid"):
            if split not in self.splits:
                self.splits[split] = load_split(self.prepared, split, self.tok)

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        rows = self.splits[split]
        sampler = BucketBatchSampler([len(r["src_ids"]) for r in rows], self.batch_size, shuffle, self.seed,
                                     *data_parallel(self.trainer))  # this process's share of each global batch
        return DataLoader(rows, batch_sampler=sampler, collate_fn=collate, num_workers=0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", shuffle=False)
