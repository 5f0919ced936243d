"""The LSTM families: the sequence-to-sequence LSTM (Sutskever et al. 2014) and attentional NMT (Luong et al. 2015).

Both read the source with a stacked LSTM whose final (h, c) per layer starts the decoder. The encoder runs over packed
sequences, so each sentence's final state is taken at its own last word (padding never leaks in); for ONNX, export.py
replaces `PackedLSTM` by ONNX LSTM nodes with `sequence_lens`, which mean the same thing.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from attention_lab.attention import build_attention
from attention_lab.models.base import Seq2Seq, State
from attention_lab.models.rnn_seq2seq import reverse_within_length


class PackedLSTM(nn.LSTM):
    """A batch-first nn.LSTM over right-padded batches: every sequence stops at its own length."""

    def forward(self, x: Tensor, lengths: Tensor, state: tuple[Tensor, Tensor] | None = None):
        """x (B, S, E), lengths (B,) -> outputs (B, S, H), zero at padding; (h_n, c_n) each (L, B, H) at each length."""
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = super().forward(packed, state)
        return pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])[0], (h, c)


def lstm_stack_step(rnn: nn.LSTM, x: Tensor, h: Tensor, c: Tensor, training: bool) -> tuple[Tensor, Tensor, Tensor]:
    """One time step of a stacked nn.LSTM with its own weights: x (B, E), h/c (B, L, H) -> top (B, H), h', c'."""
    hs, cs = [], []
    for layer in range(rnn.num_layers):
        if layer:  # nn.LSTM's dropout between layers
            x = F.dropout(x, rnn.dropout, training)
        w = [getattr(rnn, f"{name}_l{layer}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        h_l, c_l = torch.lstm_cell(x, (h[:, layer], c[:, layer]), *w)  # (B, H) each
        hs.append(h_l)
        cs.append(c_l)
        x = h_l
    return x, torch.stack(hs, 1), torch.stack(cs, 1)


class LSTMEncoder(nn.Module):
    """Embedding + stacked LSTM, reading each sentence backwards when `reverse` (Sutskever et al. 2014, §3.3)."""

    def __init__(self, vocab_size: int, emb_dim: int, hidden_dim: int, layers: int, dropout: float, reverse: bool,
                 pad_id: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.rnn = PackedLSTM(emb_dim, hidden_dim, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.reverse = reverse

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """-> top-layer states h̄_s (B, S, H) in source order (zero at padding), final h and c (B, L, H)."""
        lengths = src_mask.sum(1)
        x = self.drop(self.embed(src))  # (B, S, E)
        if self.reverse:
            x = reverse_within_length(x, lengths)
        states, (h, c) = self.rnn(x, lengths)  # (B, S, H), (L, B, H) x 2
        if self.reverse:  # position s holds the state after reading word s, whatever the reading order
            states = reverse_within_length(states, lengths)
        return states, h.transpose(0, 1), c.transpose(0, 1)


class LSTMEncoderDecoder(Seq2Seq):
    """Sutskever et al. 2014: the encoder's final (h, c) is the only thing the decoder knows of the source (§2)."""

    has_attention = False

    def __init__(self, vocab_size: int, pad_id: int = 0, emb_dim: int = 128, hidden_dim: int = 256, layers: int = 2,
                 dropout: float = 0.1, reverse_source: bool = True):
        super().__init__(vocab_size, pad_id)
        self.encoder = LSTMEncoder(vocab_size, emb_dim, hidden_dim, layers, dropout, reverse_source, pad_id)
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.rnn = nn.LSTM(emb_dim, hidden_dim, layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.out = nn.Linear(hidden_dim, vocab_size)

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, State]:
        """memory = the top layer's final h (B, 1, H), for shape only; state = the final (h, c), each (B, L, H)."""
        _, h, c = self.encoder(src, src_mask)
        return h[:, -1:], (h, c)

    def decode_step(self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor) -> tuple[Tensor, State, Tensor]:
        """p(y_t | v, y_<t) = softmax(W h_t) with (h_t, c_t) = LSTM(E y_{t-1}, h_{t-1}, c_{t-1}) (eq. 1)."""
        top, h, c = lstm_stack_step(self.rnn, self.drop(self.embed(prev)), *state, self.training)
        logits = self.out(self.drop(top))  # (B, V)
        return logits, (h, c), torch.zeros_like(src_mask, dtype=logits.dtype)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher forcing in one LSTM call (the input never depends on the previous output): same as decode_step."""
        _, (h, c) = self.encode(src, src_mask)
        tops, _ = self.rnn(self.drop(self.embed(tgt_in)), (h.transpose(0, 1).contiguous(), c.transpose(0, 1).contiguous()))
        logits = self.out(self.drop(tops))  # (B, T, V)
        return logits, torch.zeros(*tgt_in.shape, src.shape[1], dtype=logits.dtype, device=logits.device)


class LuongNMT(Seq2Seq):
    """Luong et al. 2015: a stacked LSTM decoder whose top state h_t attends over the source, global or local (§3).

    h̃_t = tanh(W_c [c_t; h_t]) (eq. 5), p(y_t) = softmax(W_s h̃_t) (eq. 6); with input feeding h̃_{t-1} joins the
    next input (§3.3). State: (h, c) (B, L, H), h̃_{t-1} (B, H), t (B,).
    """

    def __init__(self, vocab_size: int, pad_id: int = 0, emb_dim: int = 128, hidden_dim: int = 256, layers: int = 2,
                 dropout: float = 0.1, reverse_source: bool = True, attention: str = "general",
                 input_feeding: bool = True, window: int = 10, local_score: str = "general"):
        super().__init__(vocab_size, pad_id)
        self.encoder = LSTMEncoder(vocab_size, emb_dim, hidden_dim, layers, dropout, reverse_source, pad_id)
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        local = {"window": window, "score": local_score} if attention.startswith("local") else {}
        self.attention = build_attention(attention, hidden_dim, hidden_dim, **local)
        self.input_feeding, self.hidden_dim = input_feeding, hidden_dim
        self.rnn = nn.LSTM(emb_dim + hidden_dim * input_feeding, hidden_dim, layers, batch_first=True,
                           dropout=dropout if layers > 1 else 0.0)  # stepped with lstm_stack_step
        self.W_c = nn.Linear(2 * hidden_dim, hidden_dim, bias=False)
        self.W_s = nn.Linear(hidden_dim, vocab_size)

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, State]:
        """memory = [h̄_s; keys projected for the score] (B, S, 2H or H); state = (h, c, h̃_0 = 0, t = 0)."""
        states, h, c = self.encoder(src, src_mask)  # (B, S, H), (B, L, H) x 2
        memory = torch.cat([states, self.attention.project_keys(states)], -1)
        zeros = states.new_zeros(states.shape[0], self.hidden_dim)
        return memory, (h, c, zeros, zeros[:, 0])

    def _step(self, e: Tensor, state: State, memory: Tensor, src_mask: Tensor) -> tuple[Tensor, State, Tensor]:
        """Embedded input e (B, E) -> (h̃_t (B, H), new state, a_t (B, S))."""
        h, c, feed, t = state
        x = torch.cat([e, feed], -1) if self.input_feeding else e  # (B, E + H) with input feeding
        top, h, c = lstm_stack_step(self.rnn, x, h, c, self.training)  # (B, H)
        states, keys = memory[..., :self.hidden_dim], memory[..., self.hidden_dim:]
        context, a_t = self.attention(top, states, states, src_mask, projected_keys=keys, position=t)  # (B, H), (B, S)
        h_tilde = torch.tanh(self.W_c(torch.cat([context, top], -1)))  # (B, H)
        return h_tilde, (h, c, h_tilde, t + 1), a_t

    def decode_step(self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor) -> tuple[Tensor, State, Tensor]:
        h_tilde, state, a_t = self._step(self.drop(self.embed(prev)), state, memory, src_mask)
        return self.W_s(self.drop(h_tilde)), state, a_t

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """decode_step's recurrence with the output layer applied once to all steps (same result, fewer calls)."""
        memory, state = self.encode(src, src_mask)
        e = self.drop(self.embed(tgt_in))  # (B, T, E)
        h_tildes, weights = [], []
        for t in range(tgt_in.shape[1]):
            h_tilde, state, a_t = self._step(e[:, t], state, memory, src_mask)
            h_tildes.append(h_tilde)
            weights.append(a_t)
        return self.W_s(self.drop(torch.stack(h_tildes, 1))), torch.stack(weights, 1)  # (B, T, V), (B, T, S)
