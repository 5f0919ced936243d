"""DVC stage `prepare_<task>`: built-in or bring-your-own data ->
<prepared>/{train,valid,test}.jsonl + stats.json (caption also <prepared>/{train,valid,test}.npy:
the images, row i of the JSONL = image i)."""

from __future__ import annotations

import sys

import numpy as np

from attention_lab.core.files import atomic_path, write_json, write_jsonl
from attention_lab.core.paths import prepared_dir
from attention_lab.core.task import get_task
from attention_lab.stages.common import run_stage, stage_config


def main(argv: list[str]) -> None:
    cfg = stage_config(argv, need_family=False)
    hooks = get_task(cfg.task.name)
    splits = hooks.splits(cfg)
    images = {}
    if hooks.images:  # (rows, images) per split
        images = {name: im for name, (_, im) in splits.items()}
        splits = {name: rows for name, (rows, _) in splits.items()}
    summary = {
        name: hooks.stats(rows, [list(b) for b in cfg.task.buckets])
        for name, rows in splits.items()
    }
    out = prepared_dir(cfg)
    with atomic_path(out) as tmp:  # the whole folder appears at once, or not at all
        tmp.mkdir()
        for name, rows in splits.items():
            write_jsonl(
                tmp / f"{name}.jsonl", ({"id": f"{name}-{n}", **r} for n, r in enumerate(rows))
            )
            if name in images:
                np.save(tmp / f"{name}.npy", images[name], allow_pickle=False)
        write_json(tmp / "stats.json", {"source": cfg.data.source, **summary})
    for name, s in summary.items():
        print(f"prepare_{cfg.task.name}: {name}: {s} -> {out / name}.jsonl")


if __name__ == "__main__":
    run_stage("prepare", main, sys.argv[1:])
