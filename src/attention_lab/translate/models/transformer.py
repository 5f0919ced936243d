"""The Transformer (Vaswani et al. 2017) for translation, in annotated-transformer style: pre-LN
residual blocks with a final LayerNorm on each stack, one embedding matrix for source, target and
the pre-softmax projection, sinusoidal positions, dropout as in §5.4 only. `decode_step` caches each
decoder layer's normalised inputs so far, state[l] (B, 1 + t, D); a step returns the mean over heads
of the last decoder layer's encoder-decoder attention (`attention_maps`: every layer and head). The
choices, and why: docs/design.md, "Why the modules are as they are"."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attention_lab.nn.attention import MultiHeadAttention
from attention_lab.nn.layers import EncoderLayer, FeedForward, sinusoids
from attention_lab.translate.seq2seq import Seq2Seq, State


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention and a feed-forward network, each a pre-LN
    residual block (§3.1)."""

    def __init__(self, d_model: int, heads: int, d_ff: int, dropout: float):
        super().__init__()
        self.norm1, self.norm2, self.norm3 = (
            nn.LayerNorm(d_model),
            nn.LayerNorm(d_model),
            nn.LayerNorm(d_model),
        )
        self.self_attn = MultiHeadAttention(d_model, heads)
        self.cross_attn = MultiHeadAttention(d_model, heads)
        self.ffn = FeedForward(d_model, d_ff)
        self.drop = nn.Dropout(dropout)

    def forward(
        self,
        h: Tensor,
        x: Tensor,
        context: Tensor,
        self_mask: Tensor | None,
        memory: Tensor,
        src_mask: Tensor,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None, Tensor | None]:
        """x (B, T, D) with h = LayerNorm(x); context (B, T', D): normalised inputs of every
        position x may see.

        -> (B, T, D), self-attention (B, h, T, T') | None, cross-attention (B, h, T, S) | None.
        """
        a, self_w = self.self_attn(h, context, context, self_mask, need_weights)
        x = x + self.drop(a)
        a, cross_w = self.cross_attn(
            self.norm2(x), memory, memory, src_mask.unsqueeze(1), need_weights
        )
        x = x + self.drop(a)
        return x + self.drop(self.ffn(self.norm3(x))), self_w, cross_w


class Transformer(Seq2Seq):
    """Vaswani et al. 2017: encoder-decoder built from attention and feed-forward layers only."""

    def __init__(
        self,
        vocab_size: int,
        pad_id: int = 0,
        d_model: int = 128,
        heads: int = 4,
        enc_layers: int = 3,
        dec_layers: int = 3,
        d_ff: int = 512,
        dropout: float = 0.1,
    ):
        super().__init__(vocab_size, pad_id)
        self.d_model = d_model
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        # so that √d-scaled embeddings have unit variance
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.ModuleList(
            EncoderLayer(d_model, heads, d_ff, dropout) for _ in range(enc_layers)
        )
        self.decoder = nn.ModuleList(
            DecoderLayer(d_model, heads, d_ff, dropout) for _ in range(dec_layers)
        )
        self.enc_norm, self.dec_norm = nn.LayerNorm(d_model), nn.LayerNorm(d_model)

    def _embed(self, ids: Tensor, start: int | Tensor = 0) -> Tensor:
        """√d_model · E[ids] + PE(start ..): (B, T) -> (B, T, D) (§3.4-3.5)."""
        positions = torch.arange(ids.shape[1], device=ids.device) + start
        return self.drop(
            self.embed(ids) * math.sqrt(self.d_model) + sinusoids(positions, self.d_model)
        )

    def _logits(self, x: Tensor) -> Tensor:
        """Pre-softmax linear transformation tied to the embedding (§3.4): (..., D) -> (..., V)."""
        return self.dec_norm(x) @ self.embed.weight.t()

    def _encode(
        self, src: Tensor, src_mask: Tensor, need_weights: bool
    ) -> tuple[Tensor, list[Tensor | None]]:
        x, weights = self._embed(src), []
        for layer in self.encoder:
            x, w = layer(x, src_mask.unsqueeze(1), need_weights)  # (B, S, D)
            weights.append(w)
        return self.enc_norm(x), weights

    def _decode(self, tgt_in: Tensor, memory: Tensor, src_mask: Tensor, all_weights: bool):
        """Parallel masked decoder pass -> (logits (B, T, V), self-attention per layer,
        cross-attention per layer)."""
        T = tgt_in.shape[1]
        # (1, T, T): j <= i
        causal = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).tril().unsqueeze(0)
        x, self_ws, cross_ws = self._embed(tgt_in), [], []
        for i, layer in enumerate(self.decoder):
            h = layer.norm1(x)
            need = all_weights or i == len(self.decoder) - 1
            x, self_w, cross_w = layer(h, x, h, causal, memory, src_mask, need)
            self_ws.append(self_w)
            cross_ws.append(cross_w)
        return self._logits(x), self_ws, cross_ws

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, State]:
        """memory (B, S, D), the encoder stack's output (§3.1); the state is one (B, 1, D) zero
        sentinel per decoder layer: the self-attention caches before any target token."""
        memory = self._encode(src, src_mask, need_weights=False)[0]
        sentinel = memory.new_zeros(memory.shape[0], 1, self.d_model)
        return memory, tuple(sentinel for _ in self.decoder)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher-forced, all positions at once -> (logits (B, T, V), last-layer cross-attention
        mean over heads (B, T, S))."""
        logits, _, cross_ws = self._decode(
            tgt_in, self.encode(src, src_mask)[0], src_mask, all_weights=False
        )
        return logits, cross_ws[-1].mean(1)

    def decode_step(
        self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        """Feed prev at position t = state[0].shape[1] - 1 -> (logits (B, V), caches (B, 2 + t, D),
        cross-attention (B, S))."""
        x = self._embed(prev.unsqueeze(1), start=state[0].shape[1] - 1)  # (B, 1, D)
        new_state = []
        for i, layer in enumerate(self.decoder):
            h = layer.norm1(x)  # (B, 1, D)
            cache = torch.cat([state[i], h], 1)  # (B, 2 + t, D)
            new_state.append(cache)
            x, _, cross_w = layer(
                h, x, cache[:, 1:], None, memory, src_mask, i == len(self.decoder) - 1
            )
        return self._logits(x[:, 0]), tuple(new_state), cross_w[:, :, 0].mean(1)

    def attention_maps(
        self, src: Tensor, src_mask: Tensor, tgt_in: Tensor
    ) -> dict[str, list[Tensor]]:
        """Every weight, bertviz-style per layer [batch, heads, query, key]: enc_self (B,h,S,S),
        dec_self (B,h,T,T), cross (B,h,T,S)."""
        memory, enc_self = self._encode(src, src_mask, need_weights=True)
        _, dec_self, cross = self._decode(tgt_in, memory, src_mask, all_weights=True)
        return {"enc_self": enc_self, "dec_self": dec_self, "cross": cross}
