"""The recurrent families: the RNN Encoder-Decoder without attention (Cho et al. 2014) and RNNsearch (Bahdanau et al. 2015).

No pack_padded_sequence (the ONNX exporter cannot trace it): the GRUs run over the padded batch, padding sits after
each sentence so the forward direction never sees it, and the backward direction runs over every sentence reversed
within its own length. Encoder states at padded positions are zeroed and masked out of the attention. `BiRNN` is the
same reading over any vectors (GRU or LSTM); RNNEncoder keeps its own attributes so checkpoints still load.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attention_lab.attention import AdditiveAttention
from attention_lab.models.base import Seq2Seq, State


def reverse_within_length(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each sequence of x (B, S, D) over its first lengths[b] positions, leaving the padding in place."""
    positions = torch.arange(x.shape[1], device=x.device).unsqueeze(0)  # (1, S)
    last = (lengths - 1).unsqueeze(1)  # (B, 1)
    index = torch.where(positions <= last, last - positions, positions)  # (B, S); an involution
    return x.gather(1, index.unsqueeze(-1).expand(-1, -1, x.shape[-1]))


def bidirectional_states(forward_rnn: nn.RNNBase, backward_rnn: nn.RNNBase | None, x: Tensor, mask: Tensor) -> Tensor:
    """x (B, S, E), mask (B, S) -> [→h_j; ←h_j] (B, S, 2H) (or →h_j (B, S, H) without backward_rnn), zero at padding."""
    states, _ = forward_rnn(x)  # (B, S, H): position j has read x_1..x_j only
    if backward_rnn is not None:
        lengths = mask.sum(1)
        backward, _ = backward_rnn(reverse_within_length(x, lengths))  # (B, S, H) over x_{T_x} .. x_1
        states = torch.cat([states, reverse_within_length(backward, lengths)], -1)  # (B, S, 2H)
    return states * mask.unsqueeze(-1)


class BiRNN(nn.Module):
    """A (bidirectional) GRU or LSTM over right-padded vectors, without packing: (B, S, E), (B, S) -> (B, S, out_dim)."""

    def __init__(self, input_dim: int, hidden_dim: int, bidirectional: bool = True, cell: str = "gru"):
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
    """Embedding + GRU over the source; bidirectional gives annotations h_j = [→h_j; ←h_j] (Bahdanau §3.2)."""

    def __init__(self, vocab_size: int, emb_dim: int, hidden_dim: int, bidirectional: bool, dropout: float, pad_id: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.forward_rnn = nn.GRU(emb_dim, hidden_dim, batch_first=True)
        self.backward_rnn = nn.GRU(emb_dim, hidden_dim, batch_first=True) if bidirectional else None
        self.out_dim = hidden_dim * (2 if bidirectional else 1)

    def forward(self, src: Tensor, src_mask: Tensor) -> Tensor:
        """src (B, S), src_mask (B, S) -> annotations (B, S, out_dim), zero at padded positions."""
        return bidirectional_states(self.forward_rnn, self.backward_rnn, self.drop(self.embed(src)), src_mask)


class MaxoutOutput(nn.Module):
    """Deep output with maxout (Cho 2014 eq. A.1.1; Bahdanau 2015 A.2.2): p(y_i) ∝ exp(y_iᵀ W_o t_i), t_i = max-pool_2(U_o s + V_o E y + C_o c)."""

    def __init__(self, in_dim: int, maxout_dim: int, vocab_size: int, dropout: float):
        super().__init__()
        self.pre = nn.Linear(in_dim, 2 * maxout_dim)  # [U_o; V_o; C_o] on the concatenation [s; E y; c]
        self.drop = nn.Dropout(dropout)
        self.W_o = nn.Linear(maxout_dim, vocab_size)

    def forward(self, features: Tensor) -> Tensor:
        t = self.pre(features)  # (..., 2M)
        t = t.view(*t.shape[:-1], -1, 2).amax(-1)  # maxout over pairs: (..., M)
        return self.W_o(self.drop(t))  # (..., V)


class RNNEncoderDecoder(Seq2Seq):
    """Cho et al. 2014: a fixed summary c of the source conditions every decoder step, s_t = f(s_{t-1}, y_{t-1}, c)."""

    has_attention = False

    def __init__(
        self, vocab_size: int, pad_id: int = 0, emb_dim: int = 128, hidden_dim: int = 256, maxout_dim: int = 256,
        dropout: float = 0.2,
    ):
        super().__init__(vocab_size, pad_id)
        self.encoder = RNNEncoder(vocab_size, emb_dim, hidden_dim, False, dropout, pad_id)
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.init_proj = nn.Linear(hidden_dim, hidden_dim)  # V' in s_0 = tanh(V' c)
        self.rnn = nn.GRU(emb_dim + hidden_dim, hidden_dim, batch_first=True)  # one step at a time in decode_step
        self.output = MaxoutOutput(hidden_dim + emb_dim + hidden_dim, maxout_dim, vocab_size, dropout)

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, State]:
        """memory = c (B, 1, H), the encoder's state after each sentence's true last token (Cho eq. 2-3); s_0 = tanh(V' c) (A.1.1)."""
        states = self.encoder(src, src_mask)  # (B, S, H)
        last = (src_mask.sum(1) - 1).view(-1, 1, 1).expand(-1, 1, states.shape[-1])  # (B, 1, H)
        memory = states.gather(1, last)  # (B, 1, H)
        return memory, (torch.tanh(self.init_proj(memory[:, 0])),)  # (B, 1, H), ((B, H),)

    def decode_step(self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor) -> tuple[Tensor, State, Tensor]:
        """s_t = GRU(s_{t-1}, [E y_{t-1}; c]); p(y_t | y_<t, c) = g(s_t, y_{t-1}, c); attention is all zeros."""
        c = memory[:, 0]  # (B, H)
        e = self.drop(self.embed(prev))  # (B, E)
        r = self.rnn
        s = torch.gru_cell(torch.cat([e, c], -1), state[0], r.weight_ih_l0, r.weight_hh_l0, r.bias_ih_l0, r.bias_hh_l0)
        logits = self.output(torch.cat([s, e, c], -1))  # (B, V)
        return logits, (s,), torch.zeros_like(src_mask, dtype=logits.dtype)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher forcing in one GRU call (the input never depends on the previous output): same as decode_step."""
        memory, (s_0,) = self.encode(src, src_mask)
        c = memory.expand(-1, tgt_in.shape[1], -1)  # (B, T, H)
        e = self.drop(self.embed(tgt_in))  # (B, T, E)
        s, _ = self.rnn(torch.cat([e, c], -1), s_0.unsqueeze(0))  # (B, T, H)
        logits = self.output(torch.cat([s, e, c], -1))  # (B, T, V)
        attn = torch.zeros(*tgt_in.shape, src.shape[1], dtype=logits.dtype, device=logits.device)
        return logits, attn


class RNNSearch(Seq2Seq):
    """Bahdanau et al. 2015: bidirectional GRU encoder and a decoder that soft-searches the source at every step."""

    def __init__(
        self, vocab_size: int, pad_id: int = 0, emb_dim: int = 128, enc_hidden_dim: int = 128, dec_hidden_dim: int = 256,
        attn_dim: int = 256, maxout_dim: int = 256, dropout: float = 0.2,
    ):
        super().__init__(vocab_size, pad_id)
        self.encoder = RNNEncoder(vocab_size, emb_dim, enc_hidden_dim, True, dropout, pad_id)
        self.enc_hidden_dim, self.annotation_dim = enc_hidden_dim, 2 * enc_hidden_dim
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.init_proj = nn.Linear(enc_hidden_dim, dec_hidden_dim)  # W_s in s_0 = tanh(W_s ←h_1)
        self.attention = AdditiveAttention(dec_hidden_dim, self.annotation_dim, attn_dim)
        self.cell = nn.GRUCell(emb_dim + self.annotation_dim, dec_hidden_dim)
        self.output = MaxoutOutput(dec_hidden_dim + emb_dim + self.annotation_dim, maxout_dim, vocab_size, dropout)

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, State]:
        """memory = [h_j; U h_j] (B, S, 2H + A), the annotations and their attention projection computed once;
        s_0 = tanh(W_s ←h_1) (Bahdanau A.2.2), from the backward state at the first source word."""
        annotations = self.encoder(src, src_mask)  # (B, S, 2H)
        s_0 = torch.tanh(self.init_proj(annotations[:, 0, self.enc_hidden_dim:]))  # (B, Hd)
        return torch.cat([annotations, self.attention.project_keys(annotations)], -1), (s_0,)

    def decode_step(self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor) -> tuple[Tensor, State, Tensor]:
        """c_i = Σ_j α_ij h_j (eq. 5-6), s_i = f(s_{i-1}, y_{i-1}, c_i) (eq. 4), p(y_i) = g(y_{i-1}, s_i, c_i) (eq. 4)."""
        annotations, projected = memory[..., :self.annotation_dim], memory[..., self.annotation_dim:]
        e = self.drop(self.embed(prev))  # (B, E)
        c, alpha = self.attention(state[0], annotations, annotations, src_mask, projected_keys=projected)  # (B, 2H), (B, S)
        s = self.cell(torch.cat([e, c], -1), state[0])  # (B, Hd)
        logits = self.output(torch.cat([s, e, c], -1))  # (B, V)
        return logits, (s,), alpha

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """decode_step's recurrence, with the deep output applied once to all steps (same result, much faster)."""
        memory, (s,) = self.encode(src, src_mask)
        annotations, projected = memory[..., :self.annotation_dim], memory[..., self.annotation_dim:]
        e = self.drop(self.embed(tgt_in))  # (B, T, E)
        states, contexts, alphas = [], [], []
        for t in range(tgt_in.shape[1]):
            c, alpha = self.attention(s, annotations, annotations, src_mask, projected_keys=projected)
            s = self.cell(torch.cat([e[:, t], c], -1), s)
            states.append(s)
            contexts.append(c)
            alphas.append(alpha)
        s, c = torch.stack(states, 1), torch.stack(contexts, 1)  # (B, T, Hd), (B, T, 2H)
        return self.output(torch.cat([s, e, c], -1)), torch.stack(alphas, 1)  # (B, T, V), (B, T, S)
