"""RNNsearch (Bahdanau et al. 2015, `bahdanau`): a bidirectional GRU encoder (nn.layers.RNNEncoder)
and a decoder that soft-searches the annotations at every step (nn.attention.AdditiveAttention).
Encoder states at padded positions are zeroed and masked out of the attention. `init`: PyTorch's
default initialisation, or Joey NMT's (`xavier`); `query`: the previous decoder state asks the
attention (Bahdanau's order), or the new one (`new`: Luong's and Joey NMT's order).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attention_lab.nn.attention import AdditiveAttention
from attention_lab.nn.layers import RNNEncoder
from attention_lab.translate.models.seq2seq import MaxoutOutput
from attention_lab.translate.seq2seq import Seq2Seq, State

INITS = ("torch", "xavier")
QUERIES = ("previous", "new")
# gate matrices stacked in one recurrent weight
GATES = {nn.GRU: 3, nn.GRUCell: 3, nn.LSTM: 4, nn.LSTMCell: 4}


def xavier_init(model: nn.Module) -> None:
    """Joey NMT's initialisation (joeynmt/initialization.py): every weight matrix U(±√(6 / (fan_in +
    fan_out))) (Glorot & Bengio 2010, eq. 16; a recurrent weight per gate), every bias zero;
    embeddings keep N(0, 1)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.Embedding):
                continue
            gates = GATES.get(type(module), 1)
            for name, param in module.named_parameters(recurse=False):
                if name.startswith("bias"):
                    nn.init.zeros_(param)
                elif param.dim() == 2:
                    bound = math.sqrt(6.0 / (param.shape[1] + param.shape[0] // gates))
                    nn.init.uniform_(param, -bound, bound)


class RNNSearch(Seq2Seq):
    """Bahdanau et al. 2015: bidirectional GRU encoder and a decoder that soft-searches the source
    at every step."""

    def __init__(
        self,
        vocab_size: int,
        pad_id: int = 0,
        emb_dim: int = 128,
        enc_hidden_dim: int = 128,
        dec_hidden_dim: int = 256,
        attn_dim: int = 256,
        maxout_dim: int = 256,
        dropout: float = 0.2,
        init: str = "torch",
        query: str = "previous",
    ):
        super().__init__(vocab_size, pad_id)
        self.encoder = RNNEncoder(
            vocab_size, emb_dim, enc_hidden_dim, bidirectional=True, dropout=dropout, pad_id=pad_id
        )
        self.enc_hidden_dim, self.annotation_dim = enc_hidden_dim, 2 * enc_hidden_dim
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.init_proj = nn.Linear(enc_hidden_dim, dec_hidden_dim)  # W_s in s_0 = tanh(W_s ←h_1)
        self.attention = AdditiveAttention(dec_hidden_dim, self.annotation_dim, attn_dim)
        self.cell = nn.GRUCell(emb_dim + self.annotation_dim, dec_hidden_dim)
        self.output = MaxoutOutput(
            dec_hidden_dim + emb_dim + self.annotation_dim, maxout_dim, vocab_size, dropout
        )
        if init not in INITS:
            raise ValueError(f"model.init: expected one of {', '.join(INITS)}, got {init!r}")
        if query not in QUERIES:
            raise ValueError(f"model.query: expected one of {', '.join(QUERIES)}, got {query!r}")
        self.query = query
        if init == "xavier":
            xavier_init(self)

    def encode(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, State]:
        """memory = [h_j; U h_j] (B, S, 2H + A), the annotations and their attention projection
        computed once; s_0 = tanh(W_s ←h_1) (Bahdanau A.2.2), from the backward state at the first
        source word; with query `new` the state also carries the last context, c_0 = 0."""
        annotations = self.encoder(src, src_mask)  # (B, S, 2H)
        s_0 = torch.tanh(self.init_proj(annotations[:, 0, self.enc_hidden_dim :]))  # (B, Hd)
        if self.query == "new":
            return self.attention.pack_memory(annotations), (
                s_0,
                annotations.new_zeros(annotations[:, 0].shape),
            )
        return self.attention.pack_memory(annotations), (s_0,)

    def _step(
        self, e: Tensor, state: State, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, Tensor, State, Tensor]:
        """One decoder step from the embedded previous word e (B, E) -> (s_i (B, Hd), c_i (B, 2H),
        state, α_i (B, S)).

        previous: c_i = Σ_j α_ij h_j with α_i from s_{i-1} (eq. 5-6), s_i = f(s_{i-1}, y_{i-1}, c_i)
        (eq. 4); new: s_i = f(s_{i-1}, y_{i-1}, c_{i-1}), then α_i from s_i (Luong et al. 2015, §3;
        Joey NMT's decoder)."""
        annotations, projected = self.attention.unpack_memory(memory)  # (B, S, 2H), (B, S, A)
        if self.query == "new":
            s = self.cell(torch.cat([e, state[1]], -1), state[0])  # (B, Hd)
            c, alpha = self.attention(
                s, annotations, annotations, src_mask, projected_keys=projected
            )
            return s, c, (s, c), alpha
        c, alpha = self.attention(
            state[0], annotations, annotations, src_mask, projected_keys=projected
        )
        s = self.cell(torch.cat([e, c], -1), state[0])  # (B, Hd)
        return s, c, (s,), alpha

    def decode_step(
        self, prev: Tensor, state: State, memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        """_step, then p(y_i) = g(y_{i-1}, s_i, c_i) (eq. 4)."""
        e = self.drop(self.embed(prev))  # (B, E)
        s, c, state, alpha = self._step(e, state, memory, src_mask)
        return self.output(torch.cat([s, e, c], -1)), state, alpha  # (B, V), state, (B, S)

    def forward(self, src: Tensor, src_mask: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """decode_step's recurrence, with the deep output applied once to all steps (same result,
        much faster)."""
        memory, state = self.encode(src, src_mask)
        e = self.drop(self.embed(tgt_in))  # (B, T, E)
        states, contexts, alphas = [], [], []
        for t in range(tgt_in.shape[1]):
            s, c, state, alpha = self._step(e[:, t], state, memory, src_mask)
            states.append(s)
            contexts.append(c)
            alphas.append(alpha)
        s, c = torch.stack(states, 1), torch.stack(contexts, 1)  # (B, T, Hd), (B, T, 2H)
        return self.output(torch.cat([s, e, c], -1)), torch.stack(alphas, 1)  # (B, T, V), (B, T, S)
