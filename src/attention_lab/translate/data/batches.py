"""Sentence pairs as token ids and padded training batches."""

from __future__ import annotations

from pathlib import Path

import torch

from attention_lab.core.files import read_jsonl
from attention_lab.infer.tokenization import BOS, EOS, PAD, encode


def collate(rows: list[dict]) -> dict[str, torch.Tensor]:
    """Pad to the batch maximum: src (B,S), src_mask (B,S), tgt_in (B,T) = <s> y, tgt_out (B,T) = y
    </s>."""
    S = max(len(r["src_ids"]) for r in rows)
    T = max(len(r["tgt_ids"]) for r in rows) + 1
    src = torch.full((len(rows), S), PAD, dtype=torch.long)
    tgt_in = torch.full((len(rows), T), PAD, dtype=torch.long)
    tgt_out = torch.full((len(rows), T), PAD, dtype=torch.long)
    for b, r in enumerate(rows):
        src[b, : len(r["src_ids"])] = torch.tensor(r["src_ids"])
        tgt_in[b, : len(r["tgt_ids"]) + 1] = torch.tensor([BOS, *r["tgt_ids"]])
        tgt_out[b, : len(r["tgt_ids"]) + 1] = torch.tensor([*r["tgt_ids"], EOS])
    return {
        "src": src,
        "src_mask": src != PAD,
        "tgt_in": tgt_in,
        "tgt_out": tgt_out,
        "index": torch.tensor([r["index"] for r in rows]),
    }


def load_split(prepared: Path, split: str, tok) -> list[dict]:
    """Rows of a prepared split with their token ids (empty sides dropped by the tokenizer are kept
    as errors)."""
    rows = read_jsonl(prepared / f"{split}.jsonl")
    src_ids, tgt_ids = encode(tok, [r["src"] for r in rows]), encode(tok, [r["tgt"] for r in rows])
    for i, (r, s, t) in enumerate(zip(rows, src_ids, tgt_ids)):
        r.update(src_ids=s, tgt_ids=t, index=i)
    return rows
