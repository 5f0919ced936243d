"""DVC stage `tokenize_<task>`: train the task's tokenizer on the training split -> <tokenized>/tokenizer.json."""

from __future__ import annotations

import sys
from pathlib import Path

from attention_lab.core.files import atomic_path, read_jsonl, write_json
from attention_lab.core.task import get_task
from attention_lab.stages.common import run_stage, stage_config


def main(argv: list[str]) -> None:
    cfg = stage_config(argv, need_family=False)
    root = Path(cfg.root)
    tok, stats = get_task(cfg.task.name).tokenizer(cfg, read_jsonl(root / cfg.paths.prepared / "train.jsonl"))
    out = root / cfg.paths.tokenized
    stats = {"vocab_size": tok.get_vocab_size(), **stats}
    with atomic_path(out) as tmp:  # tokenizer.json and stats.json appear together, or the old ones stay
        tmp.mkdir()
        tok.save(str(tmp / "tokenizer.json"))
        write_json(tmp / "stats.json", stats)
    print(f"tokenize_{cfg.task.name}: {stats}")


if __name__ == "__main__":
    run_stage("tokenize", main, sys.argv[1:])
