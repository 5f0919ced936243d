"""Bring-your-own parallel corpora: TSV files or line-aligned file pairs, validated line by line,
and splits."""

from __future__ import annotations

import random
from pathlib import Path

from attention_lab.core.readers import DataError, normalise, read_lines


def read_tsv(
    path: str | Path, src_column: int = 0, tgt_column: int = 1, encoding: str = "utf-8"
) -> list[dict]:
    """{"src", "tgt"} pairs from tab-separated columns; blank lines are skipped."""
    pairs = []
    need = max(src_column, tgt_column) + 1
    for n, line in enumerate(read_lines(path, encoding), 1):
        if not line.strip():
            continue
        cols = line.split("\t")
        if len(cols) < need:
            raise DataError(
                f"{path}:{n}: expected at least {need} tab-separated columns "
                f"(source in column {src_column}, target in column {tgt_column}), found {len(cols)}"
            )
        pairs.append(_pair(path, n, cols[src_column], cols[tgt_column]))
    return pairs


def read_parallel_files(
    src_path: str | Path, tgt_path: str | Path, encoding: str = "utf-8"
) -> list[dict]:
    """{"src", "tgt"} pairs from two files whose line n are translations of each other."""
    src, tgt = read_lines(src_path, encoding), read_lines(tgt_path, encoding)
    if len(src) != len(tgt):
        raise DataError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}: "
            "expected one translation per line in both"
        )
    pairs = []
    for n, (s, t) in enumerate(zip(src, tgt, strict=True), 1):
        if not s.strip() and not t.strip():
            continue
        if not s.strip():
            raise DataError(
                f"{src_path}:{n}: empty source line (target line {n} of {tgt_path} is not)"
            )
        if not t.strip():
            raise DataError(
                f"{tgt_path}:{n}: empty target line (source line {n} of {src_path} is not)"
            )
        pairs.append({"src": normalise(s), "tgt": normalise(t)})
    return pairs


def _pair(path: str | Path, n: int, src: str, tgt: str) -> dict:
    for side, text in (("source", src), ("target", tgt)):
        if not text.strip():
            raise DataError(f"{path}:{n}: empty {side} text")
    return {"src": normalise(src), "tgt": normalise(tgt)}


def split_pairs(
    pairs: list[dict], valid_fraction: float, test_fraction: float, seed: int
) -> tuple[list[dict], list[dict], list[dict]]:
    """(train, valid, test) after a shuffle that depends only on `seed`."""
    if not (
        0 <= valid_fraction < 1 and 0 <= test_fraction < 1 and valid_fraction + test_fraction < 1
    ):
        raise DataError(
            f"valid_fraction={valid_fraction}, test_fraction={test_fraction}: "
            "expected each in [0, 1) and their sum below 1"
        )
    order = list(pairs)
    random.Random(seed).shuffle(order)
    n_valid, n_test = round(len(order) * valid_fraction), round(len(order) * test_fraction)
    if len(order) - n_valid - n_test < 1:
        raise DataError(f"{len(order)} pairs leave no training data after the valid/test split")
    return order[n_valid + n_test :], order[:n_valid], order[n_valid : n_valid + n_test]
