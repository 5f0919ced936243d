"""Torch side of decoding.py: a step function over model.decode_step and the encoder call, for any decoder-step model
(translation and captioning alike)."""

from __future__ import annotations

import numpy as np
import torch

from attention_lab.core.decoding import Arrays, StepFn


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
