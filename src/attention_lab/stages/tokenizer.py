"""DVC stage `tokenize_<task>`: train the task's tokenizer on the training split ->
<tokenized>/tokenizer.json."""

from __future__ import annotations

import sys

from attention_lab.core.files import atomic_path, read_jsonl, write_json
from attention_lab.core.paths import prepared_dir, tokenized_dir
from attention_lab.core.task import get_task
from attention_lab.stages.common import run_stage, stage_config


def main(argv: list[str]) -> None:
    cfg = stage_config(argv, need_family=False)
    tok, stats = get_task(cfg.task.name).tokenizer(
        cfg, read_jsonl(prepared_dir(cfg) / "train.jsonl")
    )
    out = tokenized_dir(cfg)
    stats = {"vocab_size": tok.get_vocab_size(), **stats}
    # tokenizer.json and stats.json appear together, or the old ones stay
    with atomic_path(out) as tmp:
        tmp.mkdir()
        tok.save(str(tmp / "tokenizer.json"))
        write_json(tmp / "stats.json", stats)
    print(f"tokenize_{cfg.task.name}: {stats}")


if __name__ == "__main__":
    run_stage("tokenize", main, sys.argv[1:])
