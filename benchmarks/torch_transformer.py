"""The reference of section 2: a torch.nn.Transformer seq2seq of our Transformer's size and layout."""

from __future__ import annotations

import math
import warnings

import torch
from torch import Tensor, nn

from attention_lab.nn.layers import sinusoids


class TorchTransformer(nn.Module):
    """Pre-LN nn.Transformer, one shared tied embedding, sinusoidal positions; dropout only where ours has it."""

    def __init__(self, vocab_size: int, pad_id: int = 0, d_model: int = 128, heads: int = 4, enc_layers: int = 3,
                 dec_layers: int = 3, d_ff: int = 512, dropout: float = 0.1):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "enable_nested_tensor is True, but ... norm_first was True"
            self.core = nn.Transformer(d_model, heads, enc_layers, dec_layers, d_ff, dropout, batch_first=True,
                                       norm_first=True)
        # ours drops out sublayer outputs and embeddings + positions (Vaswani §5.4): switch off the other two
        for layer in [*self.core.encoder.layers, *self.core.decoder.layers]:
            layer.dropout = nn.Identity()   # FFN-hidden dropout
            for attn in (layer.self_attn, getattr(layer, "multihead_attn", None)):
                if attn is not None:
                    attn.dropout = 0.0      # attention-weight dropout

    def _embed(self, ids: Tensor) -> Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.drop(self.embed(ids) * math.sqrt(self.d_model) + sinusoids(positions, self.d_model))

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, None]:
        """(B, S), (B, S) True = token, (B, T) -> (logits (B, T, V), None)."""
        T = tgt_in.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).triu(1)  # True = may not attend
        x = self.core(self._embed(src), self._embed(tgt_in), tgt_mask=causal, src_key_padding_mask=~src_mask,
                      memory_key_padding_mask=~src_mask, tgt_is_causal=True)
        return x @ self.embed.weight.t(), None
