"""Attentional NMT (Luong et al. 2015, `luong_dot`, `luong_general`, `luong_concat`,
`luong_local_m`, `luong_local_p`): a stacked LSTM encoder (Sutskever's, seq2seq.LSTMEncoder) and a
stacked LSTM decoder whose top state attends over the source, globally or in a local window
(nn.attention.build_attention).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attention_lab.nn.attention import build_attention
from attention_lab.translate.models.seq2seq import LSTMEncoder, lstm_stack_step, uniform_init
from attention_lab.translate.seq2seq import Seq2Seq, State


class LuongNMT(Seq2Seq):
    """Luong et al. 2015: a stacked LSTM decoder whose top state h_t attends over the source, global
    or local (§3).

    h̃_t = tanh(W_c [c_t; h_t]) (eq. 5), p(y_t) = softmax(W_s h̃_t) (eq. 6); with input feeding
    h̃_{t-1} joins the next input (§3.3). State: (h, c) (B, L, H), h̃_{t-1} (B, H), t (B,).
    """

    def __init__(
        self,
        vocab_size: int,
        pad_id: int = 0,
        emb_dim: int = 128,
        hidden_dim: int = 256,
        layers: int = 2,
        dropout: float = 0.1,
        reverse_source: bool = True,
        attention: str = "general",
        input_feeding: bool = True,
        window: int = 10,
        local_score: str = "general",
        init_range: float | None = 0.1,
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
        local = {"window": window, "score": local_score} if attention.startswith("local") else {}
        self.attention = build_attention(attention, hidden_dim, hidden_dim, **local)
        self.input_feeding, self.hidden_dim = input_feeding, hidden_dim
        # stepped with lstm_stack_step
        self.rnn = nn.LSTM(
            emb_dim + hidden_dim * input_feeding,
            hidden_dim,
            layers,
            batch_first=True,
            dropout=dropout if layers > 1 else 0.0,
        )
        self.W_c = nn.Linear(2 * hidden_dim, hidden_dim, bias=False)
        self.W_s = nn.Linear(hidden_dim, vocab_size)
        # Luong §4.1: "parameters uniformly initialized in [-0.1, 0.1]"; the word embeddings keep
        # N(0, 1), as seq2seq_lstm's (docs/benchmarks.md, "Retired studies", Initialisation: at
        # 1,000 updates 0.79 val loss against PyTorch's defaults' 1.00)
        uniform_init((self.encoder.rnn, self.rnn, self.attention, self.W_c, self.W_s), init_range)

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, State]:
        """memory = [h̄_s; keys projected for the score] (B, S, 2H or H); state = (h, c, h̃_0 = 0, t
        = 0)."""
        states, h, c = self.encoder(src, src_mask)  # (B, S, H), (B, L, H) x 2
        memory = self.attention.pack_memory(states)
        zeros = states.new_zeros(states.shape[0], self.hidden_dim)
        return memory, (h, c, zeros, zeros[:, 0])

    def _step(
        self, e: Tensor, state: State, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        """Embedded input e (B, E) -> (h̃_t (B, H), new state, a_t (B, S))."""
        h, c, feed, t = state
        x = torch.cat([e, feed], -1) if self.input_feeding else e  # (B, E + H) with input feeding
        top, h, c = lstm_stack_step(self.rnn, x, h, c, self.training)  # (B, H)
        states, keys = self.attention.unpack_memory(memory)
        # (B, H), (B, S)
        context, a_t = self.attention(
            top, states, states, src_mask, projected_keys=keys, position=t
        )
        h_tilde = torch.tanh(self.W_c(torch.cat([context, top], -1)))  # (B, H)
        return h_tilde, (h, c, h_tilde, t + 1), a_t

    def decode_step(
        self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        h_tilde, state, a_t = self._step(self.drop(self.embed(prev)), state, memory, src_mask)
        return self.W_s(self.drop(h_tilde)), state, a_t

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """decode_step's recurrence with the output layer applied once to all steps (same result,
        fewer calls)."""
        memory, state = self.encode(src, src_mask)
        e = self.drop(self.embed(tgt_in))  # (B, T, E)
        h_tildes, weights = [], []
        for t in range(tgt_in.shape[1]):
            h_tilde, state, a_t = self._step(e[:, t], state, memory, src_mask)
            h_tildes.append(h_tilde)
            weights.append(a_t)
        # (B, T, V), (B, T, S)
        return self.W_s(self.drop(torch.stack(h_tildes, 1))), torch.stack(weights, 1)
