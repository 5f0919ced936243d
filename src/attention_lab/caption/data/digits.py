"""Digit canvases for captioning: real handwritten scans (scikit-learn's load_digits, 1,797 images
of 8×8) placed left to right on a fixed-size canvas; the caption names the digits in English ("three
one four"), each digit's box is gold. Splits draw from disjoint sets of source scans; a canvas holds
2 to 6 digits, each resized, spaced and offset at random, with Gaussian noise (docs/design.md, "Why
the modules are as they are")."""

from __future__ import annotations

from functools import cache

import numpy as np
from PIL import Image

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
SPLITS = ("train", "valid", "test")


@cache
def scans() -> tuple[np.ndarray, np.ndarray]:
    """The 1,797 scans as float32 (N, 8, 8) in [0, 1] and their digits (N,) (shipped with
    scikit-learn: no download)."""
    from sklearn.datasets import load_digits

    data = load_digits()
    return (data.images / 16.0).astype(np.float32), data.target.astype(np.int64)


def split_scans(
    digits: np.ndarray, fractions: tuple[float, float, float], seed: int
) -> dict[str, np.ndarray]:
    """Scan indices per split, disjoint and stratified by digit: each digit's scans are shuffled and
    cut by fractions."""
    rng = np.random.default_rng(seed)
    parts: dict[str, list[int]] = {s: [] for s in SPLITS}
    for d in range(10):
        idx = rng.permutation(np.flatnonzero(digits == d))
        cut = np.cumsum([round(f * len(idx)) for f in fractions[:-1]])
        for name, chunk in zip(SPLITS, np.split(idx, cut)):
            parts[name] += chunk.tolist()
    return {s: np.array(sorted(v)) for s, v in parts.items()}


def compose(
    rng: np.random.Generator,
    pool: np.ndarray,
    n_digits: int,
    height: int,
    width: int,
    sizes: tuple[int, int],
    max_gap: int,
    max_offset: int,
    noise: float,
) -> tuple[np.ndarray, list[int], list[list[int]]]:
    """One canvas (height, width) float32 of n_digits scans from `pool`; returns (image, scan ids,
    boxes x0 y0 x1 y1).

    Boxes are in pixels, x1/y1 exclusive. Sizes are redrawn until the row fits the canvas width.
    """
    images, _ = scans()
    ids = rng.choice(pool, size=n_digits).tolist()
    while True:
        size = rng.integers(sizes[0], sizes[1] + 1, size=n_digits)
        gaps = rng.integers(0, max_gap + 1, size=n_digits)
        gaps[0] = 0
        if size.sum() + gaps.sum() <= width:
            break
    canvas = np.zeros((height, width), dtype=np.float32)
    # space before the first digit
    x = int(rng.integers(0, min(max_offset, width - size.sum() - gaps.sum()) + 1))
    boxes = []
    for scan, s, gap in zip(ids, size.tolist(), gaps.tolist()):
        x += gap
        y = int(rng.integers(0, height - s + 1))
        glyph = np.asarray(Image.fromarray(images[scan]).resize((s, s), Image.BILINEAR))  # (s, s)
        canvas[y : y + s, x : x + s] = np.maximum(canvas[y : y + s, x : x + s], glyph)
        boxes.append([x, y, x + s, y + s])
        x += s
    canvas = np.clip(canvas + rng.normal(0.0, noise, canvas.shape).astype(np.float32), 0.0, 1.0)
    return canvas, ids, boxes


def caption_of(digits: list[int]) -> str:
    return " ".join(WORDS[d] for d in digits)


def generated_canvases(
    seed: int,
    n_train: int,
    n_valid: int,
    n_test_per_bucket: int,
    buckets: list[tuple[int, int]],
    height: int,
    width: int,
    sizes: tuple[int, int],
    max_gap: int,
    max_offset: int,
    noise: float,
    fractions: tuple[float, float, float],
) -> dict[str, tuple[list[dict], np.ndarray]]:
    """{split: (rows {caption, digits, boxes, scans, n_digits}, images uint8 (N, height, width))}.

    Train and valid draw the digit count uniformly over the buckets' range; test has
    n_test_per_bucket canvases in every bucket (uniform within it).
    """
    _, digits = scans()
    pools = split_scans(digits, fractions, seed)
    lo, hi = min(b[0] for b in buckets), max(b[1] for b in buckets)
    out = {}
    for k, name in enumerate(SPLITS):
        rng = np.random.default_rng([seed, k])
        if name == "test":
            counts = [
                int(rng.integers(b[0], b[1] + 1)) for b in buckets for _ in range(n_test_per_bucket)
            ]
        else:
            counts = rng.integers(lo, hi + 1, size=n_train if name == "train" else n_valid).tolist()
        rows, images = [], []
        for n in counts:
            image, ids, boxes = compose(
                rng, pools[name], n, height, width, sizes, max_gap, max_offset, noise
            )
            ds = digits[ids].tolist()
            rows.append(
                {
                    "caption": caption_of(ds),
                    "digits": ds,
                    "boxes": boxes,
                    "scans": ids,
                    "n_digits": n,
                }
            )
            images.append(np.round(image * 255).astype(np.uint8))
        out[name] = (rows, np.stack(images))
    return out
