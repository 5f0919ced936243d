"""Greedy or beam translation of a batch by a torch Seq2Seq model (evaluation, val/bleu, export
parity)."""

from __future__ import annotations

import math

import torch

from attention_lab.infer.decoding import Hypothesis, max_decode_len, pad_batch, search
from attention_lab.infer.tokenization import NEVER_EMITTED
from attention_lab.nn.decoder_step import evaluating, torch_encode, torch_step


def translate_batch(
    model: torch.nn.Module,
    src_ids: list[list[int]],
    beam: int = 4,
    len_penalty: float = 1.0,
    max_len_ratio: float = 2.0,
    bos: int = 1,
    eos: int = 2,
    banned: tuple[int, ...] = NEVER_EMITTED,
) -> list[Hypothesis]:
    """Translate a batch of source id lists; attention comes back trimmed to each source's length
    (T, S_b). Never emits an id of `banned` (the evaluate stage passes its tokenizer's
    never_emitted(); the default is the same ids for every tokenizer trained here)."""
    if math.isnan(max_len_ratio) or max_len_ratio <= 0:
        raise ValueError(f"max_len_ratio must be > 0, got {max_len_ratio}")
    with evaluating(model):
        src, src_mask = pad_batch(src_ids, getattr(model, "pad_id", 0))
        state, memory = torch_encode(model, src, src_mask)
        hyps = search(
            torch_step(model),
            state,
            memory,
            max_decode_len(src_mask, max_len_ratio),
            beam,
            len_penalty,
            bos,
            eos,
            banned,
        )
    for hyp, ids in zip(hyps, src_ids):
        hyp.attention = hyp.attention[:, : len(ids)]
    return hyps
