"""DVC stage `prepare@<task>`: built-in or bring-your-own data -> <prepared>/{train,valid,test}.jsonl + stats.json
(caption also <prepared>/{train,valid,test}.npy: the images, row i of the JSONL = image i)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from attention_lab.config import ConfigError
from attention_lab.data.readers import DataError, read_parallel_files, read_tsv, split_pairs
from attention_lab.io import atomic_path, write_json, write_jsonl
from attention_lab.stages.common import run_stage, stage_config

SPLITS = ("train", "valid", "test")


def translate_splits(cfg: DictConfig) -> dict[str, list[dict]]:
    """Sentence pairs {"src", "tgt"(, "align")} for `cfg.data.source`."""
    from attention_lab.data.generator import generated_splits

    d, root = cfg.data, Path(cfg.root)
    if d.source == "generated":
        return generated_splits(d.seed, d.n_train, d.n_valid, d.n_test_per_bucket, dict(d.length_mix),
                                [tuple(b) for b in cfg.task.buckets])
    if d.source == "tsv":
        pairs = read_tsv(root / d.path, d.src_column, d.tgt_column, d.encoding)
    elif d.source == "parallel_files":
        pairs = read_parallel_files(root / d.src_path, root / d.tgt_path, d.encoding)
    else:
        raise ConfigError(f"data.source={d.source!r}: expected generated, tsv or parallel_files")
    if d.max_pairs is not None:
        pairs = pairs[: d.max_pairs]
    return dict(zip(SPLITS, split_pairs(pairs, d.valid_fraction, d.test_fraction, d.seed), strict=True))


def classify_splits(cfg: DictConfig) -> dict[str, list[dict]]:
    """Documents {"label", "sentences", "rationale"} for `cfg.data.source`; valid/test labels must occur in train."""
    from attention_lab.data.documents import generated_documents
    from attention_lab.data.labeled import check_labels, read_labeled, stratified_split

    d, root = cfg.data, Path(cfg.root)
    if d.source == "generated":  # the generator writes 3 to 30 sentences: clip the buckets to that range
        buckets = [(max(lo, 3), min(hi, 30)) for lo, hi in cfg.task.buckets]
        return generated_documents(d.seed, d.n_train, d.n_valid, d.n_test_per_bucket, buckets)
    if d.source != "labeled_files":
        raise ConfigError(f"data.source={d.source!r}: expected generated or labeled_files")
    rows = read_labeled(root / d.path, d.format, d.text_field, d.label_field, d.encoding, d.title_field,
                        split_field=d.split_field)
    if d.max_documents is not None:
        rows = rows[: d.max_documents]
    if d.split_field:
        splits = {name: [{k: v for k, v in r.items() if k != "split"} for r in rows if r["split"] == name]
                  for name in SPLITS}
        for name, part in splits.items():
            if not part:
                raise DataError(f"{root / d.path}: no document has {d.split_field} = {name!r}")
    else:
        splits = dict(zip(SPLITS, stratified_split(rows, d.valid_fraction, d.test_fraction, d.seed), strict=True))
    check_labels(splits)
    return splits


def caption_splits(cfg: DictConfig) -> dict[str, tuple[list[dict], np.ndarray]]:
    """Digit canvases: (rows {"caption", "digits", "boxes", ...}, images (N, H, W) uint8) per split."""
    from attention_lab.data.digits import generated_canvases

    d = cfg.data
    if d.source != "generated":
        raise ConfigError(f"data.source={d.source!r}: expected generated (the caption task's only source)")
    return generated_canvases(d.seed, d.n_train, d.n_valid, d.n_test_per_bucket, [tuple(b) for b in cfg.task.buckets],
                              d.height, d.width, tuple(d.digit_size), d.max_gap, d.max_offset, d.noise, tuple(d.scan_fractions))


def translate_stats(rows: list[dict], buckets: list[list[int]]) -> dict:
    """Pairs, mean source and target words, longest source, pairs per source-length bucket."""
    lengths = [len(r["src"].split()) for r in rows]
    return {"pairs": len(rows), "src_words_mean": round(sum(lengths) / max(len(rows), 1), 2),
            "tgt_words_mean": round(sum(len(r["tgt"].split()) for r in rows) / max(len(rows), 1), 2),
            "src_words_max": max(lengths, default=0),
            "buckets": {f"{lo}-{hi}": sum(lo <= n <= hi for n in lengths) for lo, hi in buckets}}


def classify_stats(rows: list[dict], buckets: list[list[int]]) -> dict:
    """Documents, mean and longest length in sentences, mean words, documents per label and per length bucket."""
    lengths = [len(r["sentences"]) for r in rows]
    words = [sum(len(s) for s in r["sentences"]) for r in rows]
    return {"documents": len(rows), "sentences_mean": round(sum(lengths) / max(len(rows), 1), 2),
            "sentences_max": max(lengths, default=0), "words_mean": round(sum(words) / max(len(rows), 1), 1),
            "labels": dict(sorted(Counter(r["label"] for r in rows).items())),
            "buckets": {f"{lo}-{hi}": sum(lo <= n <= hi for n in lengths) for lo, hi in buckets}}


def caption_stats(rows: list[dict], buckets: list[list[int]]) -> dict:
    """Canvases, mean digits, distinct source scans, canvases per digit-count bucket."""
    counts = [r["n_digits"] for r in rows]
    return {"canvases": len(rows), "digits_mean": round(sum(counts) / max(len(rows), 1), 2),
            "scans": len({s for r in rows for s in r["scans"]}),
            "buckets": {f"{lo}-{hi}": sum(lo <= n <= hi for n in counts) for lo, hi in buckets}}


TASKS = {"translate": (translate_splits, translate_stats), "classify": (classify_splits, classify_stats),
         "caption": (caption_splits, caption_stats)}


def main(argv: list[str]) -> None:
    cfg = stage_config(argv, need_family=False)
    make_splits, stats = TASKS[cfg.task.name]
    splits = make_splits(cfg)
    images = {}
    if cfg.task.name == "caption":  # (rows, images) per split
        images = {name: im for name, (_, im) in splits.items()}
        splits = {name: rows for name, (rows, _) in splits.items()}
    summary = {name: stats(rows, [list(b) for b in cfg.task.buckets]) for name, rows in splits.items()}
    out = Path(cfg.root) / cfg.paths.prepared
    with atomic_path(out) as tmp:  # the whole folder appears at once, or not at all
        tmp.mkdir()
        for name, rows in splits.items():
            write_jsonl(tmp / f"{name}.jsonl", ({"id": f"{name}-{n}", **r} for n, r in enumerate(rows)))
            if name in images:
                np.save(tmp / f"{name}.npy", images[name], allow_pickle=False)
        write_json(tmp / "stats.json", {"source": cfg.data.source, **summary})
    for name, s in summary.items():
        print(f"prepare@{cfg.task.name}: {name}: {s} -> {out / name}.jsonl")


if __name__ == "__main__":
    run_stage("prepare", main, sys.argv[1:])
