"""The decoder-step contract that every decoder-step family keeps (translate/seq2seq.py's Seq2Seq,
caption's Captioner), and its torch adapter for the search. `encode(inputs...) -> (memory (B, S',
D), state)` reads the source (a sentence and its mask, or an image) once, `state` a tuple of
batch-first (B, ...) tensors, the decoder state before bos; `decode_step(prev (B,), state, memory,
mask (B, S')) -> (logits (B, V), new state, attention (B, S'))` is one step. Token ids: pad=0,
bos=1, eos=2, unk=3."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

import numpy as np
import torch
from torch import Tensor

from attention_lab.infer.decoding import Arrays, StepFn

State = tuple[Tensor, ...]


@runtime_checkable
class DecoderStep(Protocol):
    """A model the search can drive one token at a time (see the module docstring)."""

    def encode(self, *inputs: Tensor) -> tuple[Tensor, State]:
        """The source -> (memory (B, S', D), the decoder state before bos)."""
        ...

    def decode_step(
        self, prev: Tensor, state: State, memory: Tensor, mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        """prev (B,) ids -> (logits (B, V), new state, this step's attention over the memory (B,
        S'))."""
        ...


@contextlib.contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[torch.nn.Module]:
    """model in eval mode inside the block; its own mode (training or not) again after it, also on
    an exception."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def device_of(model: DecoderStep) -> torch.device:
    """Where the model's weights are (a GPU while it trains there: the validation search feeds it
    there)."""
    return next((p.device for p in model.parameters()), torch.device("cpu"))


def to_numpy(t: Tensor) -> np.ndarray:
    """A tensor on any device as a NumPy array (no copy on the CPU)."""
    return t.cpu().numpy()


def torch_step(model: DecoderStep) -> StepFn:
    """A decoding.py step function over model.decode_step: NumPy in, log-probs out; memory =
    (memory, src_mask)."""
    device = device_of(model)

    def step(
        prev: np.ndarray, state: Arrays, memory: Arrays
    ) -> tuple[np.ndarray, Arrays, np.ndarray]:
        mem, src_mask = (torch.from_numpy(m).to(device) for m in memory)
        with torch.inference_mode():
            logits, new_state, attn = model.decode_step(
                torch.from_numpy(prev).to(device),
                tuple(torch.from_numpy(s).to(device) for s in state),
                mem,
                src_mask,
            )
            log_probs = torch.log_softmax(logits.float(), dim=-1)
        return to_numpy(log_probs), tuple(to_numpy(s) for s in new_state), to_numpy(attn.float())

    return step


def torch_encode(
    model: DecoderStep, src: np.ndarray, src_mask: np.ndarray
) -> tuple[Arrays, Arrays]:
    """Run encode on a source sentence batch; return (state, memory) as NumPy tuples ready for the
    search."""
    device = device_of(model)
    with torch.inference_mode():
        memory, state = model.encode(
            torch.from_numpy(src).to(device), torch.from_numpy(src_mask).to(device)
        )
    return tuple(to_numpy(s) for s in state), (to_numpy(memory), src_mask)  # (B, S', D), state
