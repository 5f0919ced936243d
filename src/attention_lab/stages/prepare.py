"""DVC stage: built-in or bring-your-own parallel data -> <prepared>/{train,valid,test}.jsonl + stats.json."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig

from attention_lab.config import ConfigError, load_config
from attention_lab.data.generator import generated_splits
from attention_lab.data.readers import DataError, read_parallel_files, read_tsv, split_pairs
from attention_lab.io import atomic_path, write_json, write_jsonl

SPLITS = ("train", "valid", "test")


def make_splits(cfg: DictConfig) -> dict[str, list[dict]]:
    """The three splits for `cfg.data.source`."""
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


def stats(splits: dict[str, list[dict]], buckets: list[list[int]]) -> dict:
    """Pairs per split and per source-length bucket, mean source and target words."""
    out = {}
    for name, rows in splits.items():
        lengths = [len(r["src"].split()) for r in rows]
        out[name] = {
            "pairs": len(rows),
            "src_words_mean": round(sum(lengths) / max(len(rows), 1), 2),
            "tgt_words_mean": round(sum(len(r["tgt"].split()) for r in rows) / max(len(rows), 1), 2),
            "src_words_max": max(lengths, default=0),
            "buckets": {f"{lo}-{hi}": sum(lo <= n <= hi for n in lengths) for lo, hi in buckets},
        }
    return out


def main(argv: list[str]) -> None:
    cfg = load_config(argv)
    splits = make_splits(cfg)
    summary = stats(splits, [list(b) for b in cfg.task.buckets])
    out = Path(cfg.root) / cfg.paths.prepared
    with atomic_path(out) as tmp:  # the whole folder appears at once, or not at all
        tmp.mkdir()
        for name, rows in splits.items():
            write_jsonl(tmp / f"{name}.jsonl", ({"id": f"{name}-{n}", **r} for n, r in enumerate(rows)))
        write_json(tmp / "stats.json", {"source": cfg.data.source, **summary})
    for name, s in summary.items():
        print(f"prepare: {name}: {s['pairs']} pairs, source words mean {s['src_words_mean']} "
              f"max {s['src_words_max']}, buckets {s['buckets']} -> {out / name}.jsonl")


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except (DataError, ConfigError) as err:
        sys.exit(f"prepare: error: {err}")
