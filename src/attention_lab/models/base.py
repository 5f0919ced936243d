"""The contract every translation family keeps: encode, init_state, decode_step (and a teacher-forced forward).

Training, greedy/beam search (torch or onnxruntime) and the ONNX decoder-step graph all drive these calls, so what is
exported is what was trained. Token ids: pad=0, bos=1, eos=2, unk=3; `tgt_in` starts with bos.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor, nn

State = tuple[Tensor, ...]


class Seq2Seq(nn.Module, ABC):
    """Encoder-decoder over one joint vocabulary; every state tensor is batch-first so beam search can index_select(0)."""

    has_attention: bool = True

    def __init__(self, vocab_size: int, pad_id: int = 0):
        super().__init__()
        self.vocab_size, self.pad_id = vocab_size, pad_id

    @abstractmethod
    def encode(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, S) ids, src_mask (B, S) True = real token -> memory (B, S', D)."""

    @abstractmethod
    def init_state(self, memory: Tensor, src_mask: Tensor) -> State:
        """The decoder state before the first step (bos): a tuple of (B, ...) tensors."""

    @abstractmethod
    def decode_step(self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor) -> tuple[Tensor, State, Tensor]:
        """prev (B,) ids -> (logits (B, V), new state, this step's cross-attention over the source (B, S))."""

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher forcing by looping decode_step: -> (logits (B, T, V), attention (B, T, S))."""
        memory = self.encode(src, src_mask)
        state = self.init_state(memory, src_mask)
        logits, attn = [], []
        for t in range(tgt_in.shape[1]):
            step_logits, state, step_attn = self.decode_step(tgt_in[:, t], state, memory, src_mask)
            logits.append(step_logits)
            attn.append(step_attn)
        return torch.stack(logits, 1), torch.stack(attn, 1)
