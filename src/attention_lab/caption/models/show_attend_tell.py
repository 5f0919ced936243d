"""`show_attend_tell`: Show, Attend and Tell (Xu et al. 2015), soft attention over the CNN's feature
grid."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attention_lab.caption.models.captioner import Captioner
from attention_lab.nn.attention import AdditiveAttention
from attention_lab.nn.decoder_step import State


class ShowAttendTell(Captioner):
    """Xu et al. 2015 soft attention, §3.1.2 and §4.2: e_ti = f_att(a_i, h_{t-1}) (an MLP), α_t =
    softmax(e_t), ẑ_t = β_t Σ_i α_ti a_i with gate β_t = σ(f_β(h_{t-1})); h_0, c_0 = f_init(mean_i
    a_i); p(y_t) ∝ exp(L_o(E y_{t-1} + L_h h_t + L_z ẑ_t)) (eq. 7, the deep output)."""

    def __init__(
        self,
        vocab_size: int,
        pad_id: int = 0,
        height: int = 32,
        width: int = 128,
        channels: list[int] = (16, 32, 64),
        emb_dim: int = 64,
        hidden_dim: int = 256,
        attn_dim: int = 128,
        dropout: float = 0.1,
        feature_dim: int | None = None,
        feature_stride: int = 32,
    ):
        super().__init__(
            vocab_size=vocab_size,
            pad_id=pad_id,
            height=height,
            width=width,
            channels=list(channels),
            emb_dim=emb_dim,
            hidden_dim=hidden_dim,
            dropout=dropout,
            feature_dim=feature_dim,
            feature_stride=feature_stride,
        )
        d = self.cnn.out_dim
        self.init_h, self.init_c = nn.Linear(d, hidden_dim), nn.Linear(d, hidden_dim)
        # f_att: vᵀ tanh(W h_{t-1} + U a_i)
        self.attention = AdditiveAttention(hidden_dim, d, attn_dim)
        self.gate = nn.Linear(hidden_dim, 1)  # f_β
        self.lstm = nn.LSTMCell(emb_dim + d, hidden_dim)
        self.L_h, self.L_z = nn.Linear(hidden_dim, emb_dim), nn.Linear(d, emb_dim, bias=False)
        self.L_o = nn.Linear(emb_dim, vocab_size)

    def encode(self, images: Tensor) -> tuple[Tensor, State]:
        """memory = [a_i; U a_i] (B, L, D + A): the annotation vectors and their projection for
        f_att, computed once per image rather than at every word."""
        a = self.cnn(images)  # (B, L, D) annotation vectors a_i
        mean = a.mean(1)  # (B, D)
        memory = self.attention.pack_memory(a)  # (B, L, D + A)
        return memory, (torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean)))

    def decode_step(
        self, prev: Tensor, state: State, memory: Tensor, grid_mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        h, c = state  # (B, H) x 2
        a, keys = self.attention.unpack_memory(memory)  # (B, L, D), (B, L, A)
        context, alpha = self.attention(h, a, a, grid_mask, projected_keys=keys)  # (B, D), (B, L)
        z = torch.sigmoid(self.gate(h)) * context  # (B, D): ẑ_t = β_t Σ α_ti a_i
        y = self.drop(self.embed(prev))  # (B, E): E y_{t-1}
        h, c = self.lstm(torch.cat([y, z], -1), (h, c))
        logits = self.L_o(self.drop(y + self.L_h(h) + self.L_z(z)))  # (B, V)
        return logits, (h, c), alpha
