"""DVC stage: train the joint subword tokenizer on the training split -> <tokenized>/tokenizer.json."""

from __future__ import annotations

import sys
from pathlib import Path

from attention_lab.config import load_config
from attention_lab.io import atomic_path, read_jsonl, write_json
from attention_lab.tokenization import encode, train_tokenizer


def main(argv: list[str]) -> None:
    cfg = load_config(argv)
    root = Path(cfg.root)
    train = read_jsonl(root / cfg.paths.prepared / "train.jsonl")
    texts = [r["src"] for r in train] + [r["tgt"] for r in train]
    tok = train_tokenizer(texts, cfg.tokenize.model, cfg.tokenize.vocab_size, cfg.tokenize.min_frequency)
    out = root / cfg.paths.tokenized
    with atomic_path(out / "tokenizer.json") as tmp:
        tok.save(str(tmp))
    lengths = {side: [len(ids) for ids in encode(tok, [r[side] for r in train])] for side in ("src", "tgt")}
    stats = {"vocab_size": tok.get_vocab_size(),
             **{f"{side}_tokens_mean": sum(v) / len(v) for side, v in lengths.items()},
             **{f"{side}_tokens_max": max(v) for side, v in lengths.items()}}
    write_json(out / "stats.json", stats)
    print(f"tokenizer: {stats}")


if __name__ == "__main__":
    main(sys.argv[1:])
