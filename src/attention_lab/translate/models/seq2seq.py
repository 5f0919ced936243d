"""The families without attention: the sequence-to-sequence LSTM (Sutskever et al. 2014,
`seq2seq_lstm`) and the RNN Encoder-Decoder (Cho et al. 2014, `seq2seq_gru`).

The LSTM reads the source with a stacked PackedLSTM whose final (h, c) per layer starts the decoder,
so each sentence's final state is taken at its own last word (padding never leaks in).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attention_lab.nn.layers import PackedLSTM, RNNEncoder, reverse_within_length
from attention_lab.translate.seq2seq import Seq2Seq, State


def lstm_stack_step(
    rnn: nn.LSTM, x: Tensor, h: Tensor, c: Tensor, training: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """One time step of a stacked nn.LSTM with its own weights: x (B, E), h/c (B, L, H) -> top (B,
    H), h', c'."""
    hs, cs = [], []
    for layer in range(rnn.num_layers):
        if layer:  # nn.LSTM's dropout between layers
            x = F.dropout(x, rnn.dropout, training)
        w = [
            getattr(rnn, f"{name}_l{layer}")
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")
        ]
        h_l, c_l = torch.lstm_cell(x, (h[:, layer], c[:, layer]), *w)  # (B, H) each
        hs.append(h_l)
        cs.append(c_l)
        x = h_l
    return x, torch.stack(hs, 1), torch.stack(cs, 1)


def uniform_init(modules: tuple[nn.Module, ...], init_range: float | None) -> None:
    """Every parameter of `modules` uniform in [-init_range, init_range] (Sutskever 2014 §3.4, Luong
    2015 §4.1), in order; None keeps PyTorch's defaults."""
    if init_range is not None:
        for module in modules:
            for param in module.parameters():
                nn.init.uniform_(param, -init_range, init_range)


class LSTMEncoder(nn.Module):
    """Embedding + stacked LSTM, reading each sentence backwards when `reverse` (Sutskever et al.
    2014, §3.3)."""

    def __init__(
        self,
        vocab_size: int,
        emb_dim: int,
        hidden_dim: int,
        layers: int,
        *,
        dropout: float,
        reverse: bool,
        pad_id: int,
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.rnn = PackedLSTM(
            emb_dim, hidden_dim, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0
        )
        self.reverse = reverse

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """-> top-layer states h̄_s (B, S, H) in source order (zero at padding), final h and c (B,
        L, H)."""
        lengths = src_mask.sum(1)
        x = self.drop(self.embed(src))  # (B, S, E)
        if self.reverse:
            x = reverse_within_length(x, lengths)
        states, (h, c) = self.rnn(x, lengths)  # (B, S, H), (L, B, H) x 2
        # position s holds the state after reading word s, whatever the reading order
        if self.reverse:
            states = reverse_within_length(states, lengths)
        return states, h.transpose(0, 1), c.transpose(0, 1)


class LSTMEncoderDecoder(Seq2Seq):
    """Sutskever et al. 2014: the encoder's final (h, c) is the only thing the decoder knows of the
    source (§2)."""

    has_attention = False

    def __init__(
        self,
        vocab_size: int,
        pad_id: int = 0,
        emb_dim: int = 128,
        hidden_dim: int = 256,
        layers: int = 1,
        dropout: float = 0.1,
        reverse_source: bool = True,
        init_range: float | None = 0.08,
    ):
        super().__init__(vocab_size, pad_id)
        self.encoder = LSTMEncoder(
            vocab_size,
            emb_dim,
            hidden_dim,
            layers,
            dropout=dropout,
            reverse=reverse_source,
            pad_id=pad_id,
        )
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.rnn = nn.LSTM(
            emb_dim, hidden_dim, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0
        )
        self.out = nn.Linear(hidden_dim, vocab_size)
        # Sutskever §3.4: "all of the LSTM's parameters" uniform in [-0.08, 0.08]; the word
        # embeddings keep N(0, 1): at 128 dimensions, ±0.08 tables starve the LSTM's inputs and it
        # learned far slower (docs/tasks.md)
        uniform_init((self.encoder.rnn, self.rnn, self.out), init_range)

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, State]:
        """memory = the top layer's final h (B, 1, H), for shape only; state = the final (h, c),
        each (B, L, H)."""
        _, h, c = self.encoder(src, src_mask)
        return h[:, -1:], (h, c)

    def decode_step(
        self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        """p(y_t | v, y_<t) = softmax(W h_t) with (h_t, c_t) = LSTM(E y_{t-1}, h_{t-1}, c_{t-1})
        (eq. 1)."""
        top, h, c = lstm_stack_step(self.rnn, self.drop(self.embed(prev)), *state, self.training)
        logits = self.out(self.drop(top))  # (B, V)
        return logits, (h, c), torch.zeros_like(src_mask, dtype=logits.dtype)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher forcing in one LSTM call (the input never depends on the previous output): same
        as decode_step."""
        _, (h, c) = self.encode(src, src_mask)
        tops, _ = self.rnn(
            self.drop(self.embed(tgt_in)),
            (h.transpose(0, 1).contiguous(), c.transpose(0, 1).contiguous()),
        )
        logits = self.out(self.drop(tops))  # (B, T, V)
        return logits, torch.zeros(
            *tgt_in.shape, src.shape[1], dtype=logits.dtype, device=logits.device
        )


class MaxoutOutput(nn.Module):
    """Deep output with maxout (Cho 2014 eq. A.1.1; Bahdanau 2015 A.2.2): p(y_i) ∝ exp(y_iᵀ W_o
    t_i), t_i = max-pool_2(U_o s + V_o E y + C_o c)."""

    def __init__(self, in_dim: int, maxout_dim: int, vocab_size: int, dropout: float):
        super().__init__()
        # [U_o; V_o; C_o] on the concatenation [s; E y; c]
        self.pre = nn.Linear(in_dim, 2 * maxout_dim)
        self.drop = nn.Dropout(dropout)
        self.W_o = nn.Linear(maxout_dim, vocab_size)

    def forward(self, features: Tensor) -> Tensor:
        t = self.pre(features)  # (..., 2M)
        t = t.view(*t.shape[:-1], -1, 2).amax(-1)  # maxout over pairs: (..., M)
        return self.W_o(self.drop(t))  # (..., V)


class RNNEncoderDecoder(Seq2Seq):
    """Cho et al. 2014: a fixed summary c of the source conditions every decoder step, s_t =
    f(s_{t-1}, y_{t-1}, c)."""

    has_attention = False

    def __init__(
        self,
        vocab_size: int,
        pad_id: int = 0,
        emb_dim: int = 128,
        hidden_dim: int = 256,
        maxout_dim: int = 256,
        dropout: float = 0.2,
    ):
        super().__init__(vocab_size, pad_id)
        self.encoder = RNNEncoder(
            vocab_size, emb_dim, hidden_dim, bidirectional=False, dropout=dropout, pad_id=pad_id
        )
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.init_proj = nn.Linear(hidden_dim, hidden_dim)  # V' in s_0 = tanh(V' c)
        # one step at a time in decode_step
        self.rnn = nn.GRU(emb_dim + hidden_dim, hidden_dim, batch_first=True)
        self.output = MaxoutOutput(
            hidden_dim + emb_dim + hidden_dim, maxout_dim, vocab_size, dropout
        )

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, State]:
        """memory = c (B, 1, H), the encoder's state after each sentence's true last token (Cho eq.
        2-3); s_0 = tanh(V' c) (A.1.1)."""
        states = self.encoder(src, src_mask)  # (B, S, H)
        last = (src_mask.sum(1) - 1).view(-1, 1, 1).expand(-1, 1, states.shape[-1])  # (B, 1, H)
        memory = states.gather(1, last)  # (B, 1, H)
        return memory, (torch.tanh(self.init_proj(memory[:, 0])),)  # (B, 1, H), ((B, H),)

    def decode_step(
        self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        """s_t = GRU(s_{t-1}, [E y_{t-1}; c]); p(y_t | y_<t, c) = g(s_t, y_{t-1}, c); attention is
        all zeros."""
        c = memory[:, 0]  # (B, H)
        e = self.drop(self.embed(prev))  # (B, E)
        r = self.rnn
        s = torch.gru_cell(
            torch.cat([e, c], -1),
            state[0],
            r.weight_ih_l0,
            r.weight_hh_l0,
            r.bias_ih_l0,
            r.bias_hh_l0,
        )
        logits = self.output(torch.cat([s, e, c], -1))  # (B, V)
        return logits, (s,), torch.zeros_like(src_mask, dtype=logits.dtype)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher forcing in one GRU call (the input never depends on the previous output): same as
        decode_step."""
        memory, (s_0,) = self.encode(src, src_mask)
        c = memory.expand(-1, tgt_in.shape[1], -1)  # (B, T, H)
        e = self.drop(self.embed(tgt_in))  # (B, T, E)
        s, _ = self.rnn(torch.cat([e, c], -1), s_0.unsqueeze(0))  # (B, T, H)
        logits = self.output(torch.cat([s, e, c], -1))  # (B, T, V)
        attn = torch.zeros(*tgt_in.shape, src.shape[1], dtype=logits.dtype, device=logits.device)
        return logits, attn
