"""The caption task's prepare and tokenize hooks: digit canvases from `cfg.data.source`, their summary, and the
tokenizer trained on the training split."""

from __future__ import annotations

import numpy as np
from omegaconf import DictConfig
from tokenizers import Tokenizer

from attention_lab.core.config import ConfigError
from attention_lab.core.tokenization import encode, train_word_tokenizer

SPLITS = ("train", "valid", "test")


def splits(cfg: DictConfig) -> dict[str, tuple[list[dict], np.ndarray]]:
    """Digit canvases: (rows {"caption", "digits", "boxes", ...}, images (N, H, W) uint8) per split."""
    from attention_lab.caption.data.digits import generated_canvases

    d = cfg.data
    if d.source != "generated":
        raise ConfigError(f"data.source={d.source!r}: expected generated (the caption task's only source)")
    return generated_canvases(d.seed, d.n_train, d.n_valid, d.n_test_per_bucket, [tuple(b) for b in cfg.task.buckets],
                              d.height, d.width, tuple(d.digit_size), d.max_gap, d.max_offset, d.noise, tuple(d.scan_fractions))


def stats(rows: list[dict], buckets: list[list[int]]) -> dict:
    """Canvases, mean digits, distinct source scans, canvases per digit-count bucket."""
    counts = [r["n_digits"] for r in rows]
    return {"canvases": len(rows), "digits_mean": round(sum(counts) / max(len(rows), 1), 2),
            "scans": len({s for r in rows for s in r["scans"]}),
            "buckets": {f"{lo}-{hi}": sum(lo <= n <= hi for n in counts) for lo, hi in buckets}}


def tokenizer(cfg: DictConfig, train: list[dict]) -> tuple[Tokenizer, dict]:
    """One id per caption word; the longest caption in tokens."""
    tok = train_word_tokenizer(([r["caption"].split()] for r in train), cfg.tokenize.vocab_size,
                               cfg.tokenize.min_frequency)
    return tok, {"caption_tokens_max": max(len(ids) for ids in encode(tok, [r["caption"] for r in train]))}
