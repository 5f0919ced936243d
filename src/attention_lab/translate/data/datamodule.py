"""Parallel-corpus LightningDataModule: prepared JSONL -> token ids -> length-bucketed, seeded
batches."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from attention_lab.infer.tokenization import load_tokenizer
from attention_lab.train.batching import BucketBatchSampler, ResumableLoader, data_parallel
from attention_lab.translate.data.batches import collate, load_split


class TranslationDataModule(pl.LightningDataModule):
    """Train/valid loaders over the prepared splits, tokenized with the stage's tokenizer.json;
    max_source_words: only the pairs whose source has at most that many words
    (train.max_source_words; the test split is never cut)."""

    def __init__(
        self,
        prepared: str | Path,
        tokenizer: str | Path,
        batch_size: int,
        seed: int,
        max_source_words: int | None = None,
    ):
        super().__init__()
        self.prepared, self.batch_size, self.seed = Path(prepared), batch_size, seed
        self.max_source_words = max_source_words
        self.tok = load_tokenizer(tokenizer)
        self.splits: dict[str, list[dict]] = {}

    def setup(self, stage: str | None = None) -> None:
        for split in ("train", "valid"):
            if split not in self.splits:
                rows = load_split(self.prepared, split, self.tok)
                if self.max_source_words is not None:
                    rows = [r for r in rows if len(r["src"].split()) <= self.max_source_words]
                self.splits[split] = rows

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        rows = self.splits[split]
        sampler = BucketBatchSampler(
            [len(r["src_ids"]) for r in rows],
            self.batch_size,
            shuffle,
            self.seed,
            # this process's share of each global batch
            *data_parallel(self.trainer),
        )
        return ResumableLoader(rows, batch_sampler=sampler, collate_fn=collate, num_workers=0)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", shuffle=False)
