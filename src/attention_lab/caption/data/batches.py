"""Prepared digit canvases as training rows and batches; no Lightning, so evaluation and export
import this cheaply.

A prepared split is <split>.jsonl (caption, digits, boxes, ...) plus <split>.npy (N, H, W) uint8,
row i = image i; for photos (data image_captions) the rows carry every reference caption and the
.npy holds the frozen encoder's annotation vectors (N, L, D) float16.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from attention_lab.core.files import read_jsonl
from attention_lab.core.readers import DataError
from attention_lab.infer.tokenization import BOS, EOS, PAD, encode


def load_canvases(prepared: Path, split: str, tok) -> tuple[list[dict], np.ndarray]:
    """Rows with their caption ids (`tgt_ids`) and row index, and the split's images (N, H, W) uint8
    or annotation vectors (N, L, D) float16 (memory-mapped)."""
    rows, path = read_jsonl(prepared / f"{split}.jsonl"), prepared / f"{split}.npy"
    images = np.load(path, allow_pickle=False, mmap_mode="r")
    if images.ndim != 3 or images.dtype not in (np.uint8, np.float16) or len(images) != len(rows):
        raise DataError(
            f"{path}: expected {len(rows)} uint8 images (N, H, W) or float16 features (N, L, D) to"
            f" match {split}.jsonl, got {images.dtype} {images.shape}"
        )
    for i, (r, ids) in enumerate(zip(rows, encode(tok, [r["caption"] for r in rows]))):
        r.update(tgt_ids=ids, index=i)
    return rows, images


def every_caption(rows: list[dict], images: np.ndarray, tok) -> list[tuple[dict, np.ndarray]]:
    """(row, image) items, one per reference caption of a photo (a canvas has one): what training
    and validation loss read (Xu et al. 2015 train on every caption of an image)."""
    items = []
    for r, image in zip(rows, images):
        refs = r.get("captions", [r["caption"]])
        ids = encode(tok, refs) if len(refs) > 1 else [r["tgt_ids"]]
        items += [({**r, "caption": c, "tgt_ids": i}, image) for c, i in zip(refs, ids)]
    return items


def as_float(images: np.ndarray) -> torch.Tensor:
    """uint8 (B, H, W) -> float32 in [0, 1]; float16 annotation vectors (B, L, D) -> float32 as they
    are."""
    if images.dtype == np.uint8:
        return torch.from_numpy(images.astype(np.float32) / 255.0)
    return torch.from_numpy(np.asarray(images, dtype=np.float32))


def collate_canvases(items: list[tuple[dict, np.ndarray]]) -> dict[str, torch.Tensor]:
    """images (B, H, W) float, tgt_in (B, T) = <s> y, tgt_out (B, T) = y </s> (padded), n_digits
    (B,), index (B,)."""
    rows = [r for r, _ in items]
    T = max(len(r["tgt_ids"]) for r in rows) + 1
    tgt_in = torch.full((len(rows), T), PAD, dtype=torch.long)
    tgt_out = torch.full((len(rows), T), PAD, dtype=torch.long)
    for b, r in enumerate(rows):
        tgt_in[b, : len(r["tgt_ids"]) + 1] = torch.tensor([BOS, *r["tgt_ids"]])
        tgt_out[b, : len(r["tgt_ids"]) + 1] = torch.tensor([*r["tgt_ids"], EOS])
    return {
        "images": as_float(np.stack([im for _, im in items])),
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "n_digits": torch.tensor([r.get("n_digits", 0) for r in rows]),
        "index": torch.tensor([r["index"] for r in rows]),
    }
