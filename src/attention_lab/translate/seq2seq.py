"""Seq2Seq, the base of every translation family: the decoder-step contract (nn/decoder_step.py)
over a source sentence, `encode(src, src_mask)` and `decode_step`, with teacher-forced and
scheduled-sampling forwards that loop decode_step. Token ids: pad=0, bos=1, eos=2, unk=3; `tgt_in`
starts with bos.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor, nn

from attention_lab.nn.decoder_step import State


class Seq2Seq(nn.Module, ABC):
    """Encoder-decoder over one joint vocabulary, a DecoderStep (nn/decoder_step.py); every state
    tensor is batch-first so beam search can index_select(0)."""

    has_attention: bool = True

    def __init__(self, vocab_size: int, pad_id: int = 0):
        super().__init__()
        self.vocab_size, self.pad_id = vocab_size, pad_id

    @abstractmethod
    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, State]:
        """src (B, S) ids, src_mask (B, S) True = real token -> (memory (B, S', D), the decoder
        state before bos).

        The state is a tuple of (B, ...) tensors; the encoder produces it (e.g. its final LSTM
        states, Sutskever §2).
        """

    @abstractmethod
    def decode_step(
        self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        """prev (B,) ids -> (logits (B, V), new state, this step's cross-attention over the source
        (B, S))."""

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher forcing by looping decode_step: -> (logits (B, T, V), attention (B, T, S))."""
        memory, state = self.encode(src, src_mask)
        logits, attn = [], []
        for t in range(tgt_in.shape[1]):
            step_logits, state, step_attn = self.decode_step(tgt_in[:, t], state, memory, src_mask)
            logits.append(step_logits)
            attn.append(step_attn)
        return torch.stack(logits, 1), torch.stack(attn, 1)

    def sampled_forward(
        self, src: Tensor, src_mask: Tensor, tgt_in: Tensor, ratio: float
    ) -> tuple[Tensor, Tensor]:
        """Scheduled sampling (Bengio et al. 2015, §2.4): each next input is the gold token with
        probability `ratio`, else a token sampled from the model's own output distribution (no
        gradient through the sample)."""
        memory, state = self.encode(src, src_mask)
        prev, logits, attn = tgt_in[:, 0], [], []
        for t in range(tgt_in.shape[1]):
            # (B, V), .., (B, S)
            step_logits, state, step_attn = self.decode_step(prev, state, memory, src_mask)
            logits.append(step_logits)
            attn.append(step_attn)
            if t + 1 < tgt_in.shape[1]:
                sampled = torch.multinomial(step_logits.detach().softmax(-1), 1).squeeze(1)  # (B,)
                gold = torch.rand(prev.shape, device=prev.device) < ratio  # (B,)
                prev = torch.where(gold, tgt_in[:, t + 1], sampled)
        return torch.stack(logits, 1), torch.stack(attn, 1)
