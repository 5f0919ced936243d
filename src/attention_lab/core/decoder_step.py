"""The decoder-step contract: what every decoder-step family keeps (translation's Seq2Seq, core/seq2seq.py, and
caption's Captioner), and its torch adapter for the search.

- `encode(inputs...) -> (memory (B, S', D), state)`: the source (a sentence and its mask, or an image) read once;
  `state` is a tuple of batch-first (B, ...) tensors, the decoder state before bos.
- `decode_step(prev (B,), state, memory, mask (B, S')) -> (logits (B, V), new state, attention (B, S'))`: one step.

Training, greedy/beam search (core/decoding.py, in NumPy: torch here, or onnxruntime sessions) and the ONNX
decoder-step graph all drive these calls, so what is exported is what was trained. Every state tensor is batch-first
so the search can reorder beams with take(..., axis=0). Token ids: pad=0, bos=1, eos=2, unk=3.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

from attention_lab.core.decoding import Arrays, StepFn

State = tuple[Tensor, ...]


@runtime_checkable
class DecoderStep(Protocol):
    """A model the search can drive one token at a time (see the module docstring)."""

    def encode(self, *inputs: Tensor) -> tuple[Tensor, State]:
        """The source -> (memory (B, S', D), the decoder state before bos)."""
        ...

    def decode_step(self, prev: Tensor, state: State, memory: Tensor, mask: Tensor) -> tuple[Tensor, State, Tensor]:
        """prev (B,) ids -> (logits (B, V), new state, this step's attention over the memory (B, S'))."""
        ...


@contextlib.contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """model in eval mode inside the block; its own mode (training or not) again after it, also on an exception."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def torch_step(model: DecoderStep) -> StepFn:
    """A decoding.py step function over model.decode_step: NumPy in, log-probs out; memory = (memory, src_mask)."""

    def step(prev: np.ndarray, state: Arrays, memory: Arrays) -> tuple[np.ndarray, Arrays, np.ndarray]:
        mem, src_mask = (torch.from_numpy(m) for m in memory)
        with torch.inference_mode():
            logits, new_state, attn = model.decode_step(
                torch.from_numpy(prev), tuple(torch.from_numpy(s) for s in state), mem, src_mask)
            log_probs = torch.log_softmax(logits.float(), dim=-1)
        return log_probs.numpy(), tuple(s.numpy() for s in new_state), attn.float().numpy()

    return step


def torch_encode(model: DecoderStep, src: np.ndarray, src_mask: np.ndarray) -> tuple[Arrays, Arrays]:
    """Run encode on a source sentence batch; return (state, memory) as NumPy tuples ready for the search."""
    with torch.inference_mode():
        memory, state = model.encode(torch.from_numpy(src), torch.from_numpy(src_mask))  # (B, S', D), state
    return tuple(s.numpy() for s in state), (memory.numpy(), src_mask)
