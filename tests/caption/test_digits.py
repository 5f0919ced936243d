"""data.digits: canvases of real handwritten scans, disjoint scan splits, gold boxes,
determinism."""

import numpy as np

from attention_lab.caption.data.digits import WORDS, generated_canvases, scans, split_scans

BUCKETS = [(2, 2), (3, 3), (4, 4), (5, 6)]


def make(seed=7, n_train=60):
    return generated_canvases(
        seed, n_train, 10, 5, BUCKETS, 32, 128, (12, 18), 2, 16, 0.1, (0.6, 0.1, 0.3)
    )


def test_splits_use_disjoint_scans_and_cover_every_digit():
    images, digits = scans()
    assert images.shape == (1797, 8, 8) and 0.0 <= images.min() and images.max() <= 1.0
    parts = split_scans(digits, (0.6, 0.1, 0.3), seed=0)
    assert sum(len(p) for p in parts.values()) == 1797
    assert not set(parts["train"]) & set(parts["test"]) and not set(parts["valid"]) & set(
        parts["test"]
    )
    for p in parts.values():
        assert set(digits[p]) == set(range(10))
    parts, out = split_scans(digits, (0.6, 0.1, 0.3), seed=7), make(seed=7)
    for name, (rows, _) in out.items():  # every canvas draws only from its own split's scans
        assert {s for r in rows for s in r["scans"]} <= set(parts[name].tolist())


def test_canvases_captions_and_boxes():
    out = make()
    rows, images = out["test"]
    assert images.shape == (20, 32, 128) and images.dtype == np.uint8
    assert [r["n_digits"] for r in rows[:5]] == [2] * 5 and all(
        5 <= r["n_digits"] <= 6 for r in rows[15:]
    )
    for r, image in zip(rows, images):
        assert (
            r["caption"].split() == [WORDS[d] for d in r["digits"]]
            and len(r["boxes"]) == r["n_digits"]
        )
        xs = [b[0] for b in r["boxes"]]
        assert xs == sorted(xs) and all(b[2] <= 128 and b[3] <= 32 for b in r["boxes"])
        for (x0, y0, x1, y1), prev in zip(r["boxes"][1:], r["boxes"]):
            # left to right, no overlap, square
            assert x0 >= prev[2] and 12 <= x1 - x0 <= 18 and x1 - x0 == y1 - y0
        inside = np.zeros_like(image, dtype=bool)
        for x0, y0, x1, y1 in r["boxes"]:
            inside[y0:y1, x0:x1] = True
        assert image[inside].mean() > image[~inside].mean() + 20  # the ink is in the boxes


def test_same_seed_same_canvases():
    a, b = make(seed=3), make(seed=3)
    assert a["train"][0] == b["train"][0] and np.array_equal(a["train"][1], b["train"][1])
    assert not np.array_equal(a["train"][1], make(seed=4)["train"][1])
