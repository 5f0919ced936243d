"""Torch side of decoding.py: a step function over model.decode_step and translate_batch for evaluation and training."""

from __future__ import annotations

import math

import numpy as np
import torch

from attention_lab.decoding import Arrays, Hypothesis, StepFn, max_decode_len, pad_batch, search


def torch_step(model: torch.nn.Module) -> StepFn:
    """A decoding.py step function over model.decode_step: NumPy in, log-probs out; memory = (memory, src_mask)."""

    def step(prev: np.ndarray, state: Arrays, memory: Arrays) -> tuple[np.ndarray, Arrays, np.ndarray]:
        mem, src_mask = (torch.from_numpy(m) for m in memory)
        with torch.inference_mode():
            logits, new_state, attn = model.decode_step(
                torch.from_numpy(prev), tuple(torch.from_numpy(s) for s in state), mem, src_mask)
            log_probs = torch.log_softmax(logits.float(), dim=-1)
        return log_probs.numpy(), tuple(s.numpy() for s in new_state), attn.float().numpy()

    return step


def torch_encode(model: torch.nn.Module, src: np.ndarray, src_mask: np.ndarray) -> tuple[Arrays, Arrays]:
    """Run encode; return (state, memory) as NumPy tuples ready for the search."""
    with torch.inference_mode():
        memory, state = model.encode(torch.from_numpy(src), torch.from_numpy(src_mask))  # (B, S', D), state
    return tuple(s.numpy() for s in state), (memory.numpy(), src_mask)


def translate_batch(model: torch.nn.Module, src_ids: list[list[int]], beam: int = 4, len_penalty: float = 1.0,
                    max_len_ratio: float = 2.0, bos: int = 1, eos: int = 2) -> list[Hypothesis]:
    """Translate a batch of source id lists; attention comes back trimmed to each source's length (T, S_b)."""
    if math.isnan(max_len_ratio) or max_len_ratio <= 0:
        raise ValueError(f"max_len_ratio must be > 0, got {max_len_ratio}")
    was_training = model.training
    model.eval()
    try:
        src, src_mask = pad_batch(src_ids, getattr(model, "pad_id", 0))
        state, memory = torch_encode(model, src, src_mask)
        hyps = search(torch_step(model), state, memory, max_decode_len(src_mask, max_len_ratio), beam, len_penalty,
                      bos, eos)
    finally:
        model.train(was_training)
    for hyp, ids in zip(hyps, src_ids):
        hyp.attention = hyp.attention[:, : len(ids)]
    return hyps


def caption_batch(model: torch.nn.Module, images: torch.Tensor, max_len: int, beam: int = 1, len_penalty: float = 1.0,
                  bos: int = 1, eos: int = 2) -> list[Hypothesis]:
    """Caption a batch of images (B, H, W) float in [0, 1]; attention comes back over the grid cells (T, L)."""
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            memory, state = model.encode(images)  # (B, L, D), decoder state before bos
            mask = model.grid_mask(memory)
        hyps = search(torch_step(model), tuple(s.numpy() for s in state), (memory.numpy(), mask.numpy()),
                      np.full(len(images), max_len), beam, len_penalty, bos, eos)
    finally:
        model.train(was_training)
    return hyps
