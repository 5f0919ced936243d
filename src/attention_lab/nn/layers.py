"""Layers several families share: recurrent readers of right-padded batches (the GRUs unpacked, the
backward direction reading every sentence reversed within its own length; PackedLSTM packed) and the
Transformer's encoder block."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attention_lab.nn.attention import MultiHeadAttention


def reverse_within_length(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each sequence of x (B, S, D) over its first lengths[b] positions, leaving the padding
    in place."""
    positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)  # (1, S)
    last = (lengths - 1).unsqueeze(1)  # (B, 1)
    index = torch.where(positions <= last, last - positions, positions)  # (B, S); an involution
    return x.gather(1, index.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


def bidirectional_states(
    forward_rnn: nn.RNNBase, backward_rnn: nn.RNNBase | None, x: Tensor, mask: Tensor
) -> Tensor:
    """x (B, S, E), mask (B, S) -> [→h_j; ←h_j] (B, S, 2H) (or →h_j (B, S, H) without backward_rnn),
    zero at padding."""
    states, _ = forward_rnn(x)  # (B, S, H): position j has read x_1..x_j only
    if backward_rnn is not None:
        lengths = mask.sum(1)
        # (B, S, H) over x_{T_x} .. x_1
        backward, _ = backward_rnn(reverse_within_length(x, lengths))
        states = torch.cat([states, reverse_within_length(backward, lengths)], -1)  # (B, S, 2H)
    return states * mask.unsqueeze(-1)


class BiRNN(nn.Module):
    """A (bidirectional) GRU or LSTM over right-padded vectors, without packing: (B, S, E), (B, S)
    -> (B, S, out_dim)."""

    def __init__(
        self, input_dim: int, hidden_dim: int, bidirectional: bool = True, cell: str = "gru"
    ):
        super().__init__()
        if cell not in ("gru", "lstm"):
            raise ValueError(f"unknown cell {cell!r}; choose gru or lstm")
        rnn = nn.GRU if cell == "gru" else nn.LSTM
        self.forward_rnn = rnn(input_dim, hidden_dim, batch_first=True)
        self.backward_rnn = rnn(input_dim, hidden_dim, batch_first=True) if bidirectional else None
        self.out_dim = hidden_dim * (2 if bidirectional else 1)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        return bidirectional_states(self.forward_rnn, self.backward_rnn, x, mask)


class RNNEncoder(nn.Module):
    """Embedding + GRU over the source; bidirectional gives annotations h_j = [→h_j; ←h_j] (Bahdanau
    §3.2)."""

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        *,
        bidirectional: bool,
        dropout: float,
        pad_id: int,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.forward_rnn = nn.GRU(emb_dim, hidden_dim, batch_first=True)
        self.backward_rnn = nn.GRU(emb_dim, hidden_dim, batch_first=True) if bidirectional else None
        self.out_dim = hidden_dim * (2 if bidirectional else 1)

    def forward(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, S), src_mask (B, S) -> annotations (B, S, out_dim), zero at padded positions."""
        return bidirectional_states(
            self.forward_rnn, self.backward_rnn, self.drop(self.embed(src)), src_mask
        )


class PackedLSTM(nn.LSTM):
    """A batch-first nn.LSTM over right-padded batches: every sequence stops at its own length."""

    def forward(self, x: Tensor, lengths: Tensor, state: tuple[Tensor, Tensor] | None = None):
        """x (B, S, E), lengths (B,) -> outputs (B, S, H), zero at padding; (h_n, c_n) each (L, B,
        H) at each length."""
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = super().forward(packed, state)
        return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0], (h, c)


def sinusoids(positions: Tensor, d_model: int) -> Tensor:
    """Vaswani 2017 §3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos /
    10000^(2i/d)); (T,) -> (T, D)."""
    # (D/2,)
    rates = torch.exp(
        torch.arange(0, d_model, 2, device=positions.device) * (-math.log(10000.0) / d_model)
    )
    angles = positions.float().unsqueeze(1) * rates  # (T, D/2)
    return torch.stack([angles.sin(), angles.cos()], -1).flatten(1)  # interleave: (T, D)


class FeedForward(nn.Sequential):
    """Vaswani 2017 eq. 2: FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))


class EncoderLayer(nn.Module):
    """Self-attention and a feed-forward network, each a pre-LN residual block (§3.1)."""

    def __init__(
        self, d_model: int, heads: int, d_ff: int, dropout: float, attention_dropout: float = 0.0
    ):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.self_attn = MultiHeadAttention(d_model, heads, attention_dropout)
        self.ffn = FeedForward(d_model, d_ff)
        self.drop = nn.Dropout(dropout)

    def forward(
        self, x: Tensor, mask: Tensor, need_weights: bool = False, bias: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, S, D), mask (B, 1, S), score bias (1, h, S, S) | None (ALiBi) -> (B, S, D),
        self-attention (B, h, S, S) | None."""
        h = self.norm1(x)
        a, weights = self.self_attn(h, h, h, mask, need_weights, bias)
        x = x + self.drop(a)
        return x + self.drop(self.ffn(self.norm2(x))), weights
