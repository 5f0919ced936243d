"""The Lightning DataModule of the caption task (kept apart from canvas_batches so evaluation never
imports Lightning)."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from torch.utils.data import DataLoader

from attention_lab.caption.data.batches import collate_canvases, every_caption, load_canvases
from attention_lab.infer.tokenization import load_tokenizer
from attention_lab.train.batching import BucketBatchSampler, ResumableLoader, data_parallel


class CanvasDataModule(pl.LightningDataModule):
    """Train/valid loaders of (row, image) pairs in seeded random batches.

    Not length-bucketed: a batch of only six-digit canvases would let BatchNorm normalise the amount
    of ink away, and with it the model's sense of how many digits there are (training batches would
    differ from evaluation)."""

    def __init__(self, prepared: str | Path, tokenizer: str | Path, batch_size: int, seed: int):
        super().__init__()
        self.prepared, self.batch_size, self.seed = Path(prepared), batch_size, seed
        self.tok = load_tokenizer(tokenizer)
        self.splits: dict[str, list[tuple[dict, object]]] = {}

    def setup(self, stage: str | None = None) -> None:
        for split in ("train", "valid"):
            if split not in self.splits:
                rows, images = load_canvases(self.prepared, split, self.tok)
                # photos: one item per caption
                self.splits[split] = every_caption(rows, images, self.tok)

    def _loader(self, split: str, shuffle: bool) -> DataLoader:
        items = self.splits[split]
        # equal keys: no bucketing
        sampler = BucketBatchSampler(
            [0] * len(items), self.batch_size, shuffle, self.seed, *data_parallel(self.trainer)
        )
        return ResumableLoader(
            items, batch_sampler=sampler, collate_fn=collate_canvases, num_workers=0
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", shuffle=False)
