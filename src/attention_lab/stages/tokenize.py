"""DVC stage `tokenize@<task>`: train the task's tokenizer on the training split -> <tokenized>/tokenizer.json."""

from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import DictConfig
from tokenizers import Tokenizer

from attention_lab.io import atomic_path, read_jsonl, write_json
from attention_lab.stages.common import run_stage, stage_config
from attention_lab.tokenization import encode, encode_words, train_tokenizer, train_word_tokenizer


def translate_tokenizer(cfg: DictConfig, train: list[dict]) -> tuple[Tokenizer, dict]:
    """A joint subword model over source and target sentences; token counts per side."""
    tok = train_tokenizer([r["src"] for r in train] + [r["tgt"] for r in train], cfg.tokenize.model,
                          cfg.tokenize.vocab_size, cfg.tokenize.min_frequency)
    lengths = {side: [len(ids) for ids in encode(tok, [r[side] for r in train])] for side in ("src", "tgt")}
    return tok, {**{f"{side}_tokens_mean": sum(v) / len(v) for side, v in lengths.items()},
                 **{f"{side}_tokens_max": max(v) for side, v in lengths.items()}}


def classify_tokenizer(cfg: DictConfig, train: list[dict]) -> tuple[Tokenizer, dict]:
    """A word-level vocabulary over the training documents; the share of training words it covers."""
    tok = train_word_tokenizer((r["sentences"] for r in train), cfg.tokenize.vocab_size, cfg.tokenize.min_frequency)
    ids = [i for r in train for sentence in encode_words(tok, r["sentences"]) for i in sentence]
    return tok, {"words": len(ids), "unk_rate": round(sum(i == tok.token_to_id("<unk>") for i in ids) / len(ids), 4)}


def caption_tokenizer(cfg: DictConfig, train: list[dict]) -> tuple[Tokenizer, dict]:
    """One id per caption word; the longest caption in tokens."""
    tok = train_word_tokenizer(([r["caption"].split()] for r in train), cfg.tokenize.vocab_size,
                               cfg.tokenize.min_frequency)
    return tok, {"caption_tokens_max": max(len(ids) for ids in encode(tok, [r["caption"] for r in train]))}


TASKS = {"translate": translate_tokenizer, "classify": classify_tokenizer, "caption": caption_tokenizer}


def main(argv: list[str]) -> None:
    cfg = stage_config(argv, need_family=False)
    root = Path(cfg.root)
    tok, stats = TASKS[cfg.task.name](cfg, read_jsonl(root / cfg.paths.prepared / "train.jsonl"))
    out = root / cfg.paths.tokenized
    stats = {"vocab_size": tok.get_vocab_size(), **stats}
    with atomic_path(out) as tmp:  # tokenizer.json and stats.json appear together, or the old ones stay
        tmp.mkdir()
        tok.save(str(tmp / "tokenizer.json"))
        write_json(tmp / "stats.json", stats)
    print(f"tokenize@{cfg.task.name}: {stats}")


if __name__ == "__main__":
    run_stage("tokenize", main, sys.argv[1:])
