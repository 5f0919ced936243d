"""The captioning families: Show and Tell (Vinyals et al. 2015, no attention) and Show, Attend and Tell (Xu et al. 2015,
soft attention), over one small CNN written here (no torchvision).

They keep the decoder-step contract of models/base.py with an image in place of a source sentence:
`encode(images (B, H, W)) -> (memory (B, L, D), state)` where memory is the CNN's feature grid as L = h·w annotation
vectors, and `decode_step(prev (B,), state, memory, grid_mask (B, L)) -> (logits (B, V), state, attention (B, L))`;
so decoding.py's greedy and beam search, and export's decoder-step graph, drive them as they drive translation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor, nn

from attention_lab.attention import AdditiveAttention
from attention_lab.models.base import State


class DigitCNN(nn.Module):
    """Blocks of conv3×3 → BatchNorm → ReLU → maxpool 2 over the image and two coordinate channels (x, y in [-1, 1],
    CoordConv, Liu et al. 2018, so cells know where they are): (B, H, W) -> (B, L, C), L = (H / 2^n)·(W / 2^n)."""

    def __init__(self, channels: list[int]):
        super().__init__()
        layers, c_in = [], 3
        for c in channels:
            layers += [nn.Conv2d(c_in, c, 3, padding=1, bias=False), nn.BatchNorm2d(c), nn.ReLU(), nn.MaxPool2d(2)]
            c_in = c
        self.net = nn.Sequential(*layers)
        self.out_dim, self.stride = c_in, 2 ** len(channels)

    def forward(self, images: Tensor) -> Tensor:
        B, H, W = images.shape
        ys = torch.linspace(-1, 1, H, device=images.device).view(1, H, 1).expand(B, H, W)
        xs = torch.linspace(-1, 1, W, device=images.device).view(1, 1, W).expand(B, H, W)
        grid = self.net(torch.stack([images, xs, ys], 1))  # (B, 3, H, W) -> (B, C, h, w)
        return grid.flatten(2).transpose(1, 2)  # (B, h·w, C), row-major over the grid


class Captioner(nn.Module, ABC):
    """What both families share: the CNN, word embeddings, an LSTM cell decoder and teacher-forced forward."""

    has_attention = True

    def __init__(self, vocab_size: int, pad_id: int, height: int, width: int, channels: list[int], emb_dim: int,
                 hidden_dim: int, dropout: float):
        super().__init__()
        self.vocab_size, self.pad_id = vocab_size, pad_id
        self.cnn = DigitCNN(channels)
        if height % self.cnn.stride or width % self.cnn.stride:
            raise ValueError(f"canvas {height}×{width} must be divisible by {self.cnn.stride} (2 ** len(channels))")
        self.grid = (height // self.cnn.stride, width // self.cnn.stride)  # (h, w) of the annotation grid
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.hidden_dim = hidden_dim

    @abstractmethod
    def encode(self, images: Tensor) -> tuple[Tensor, State]:
        """images (B, H, W) in [0, 1] -> (annotation vectors (B, L, D), the decoder state before bos)."""

    @abstractmethod
    def decode_step(self, prev: Tensor, state: State, memory: Tensor, grid_mask: Tensor) -> tuple[Tensor, State, Tensor]:
        """prev (B,) ids -> (logits (B, V), new state, attention over the grid (B, L))."""

    def grid_mask(self, memory: Tensor) -> Tensor:
        """Every grid cell is real: (B, L) True (the mask argument of the shared decoder-step contract)."""
        return torch.ones(memory.shape[:2], dtype=torch.bool, device=memory.device)

    def forward(self, images: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher forcing by looping decode_step: images (B, H, W), tgt_in (B, T) -> logits (B, T, V), α (B, T, L)."""
        memory, state = self.encode(images)
        mask = self.grid_mask(memory)
        logits, attn = [], []
        for t in range(tgt_in.shape[1]):
            step_logits, state, step_attn = self.decode_step(tgt_in[:, t], state, memory, mask)
            logits.append(step_logits)
            attn.append(step_attn)
        return torch.stack(logits, 1), torch.stack(attn, 1)


class ShowTell(Captioner):
    """Vinyals et al. 2015, eq. 10-12: x_{-1} = W_e CNN(I) starts the LSTM, then x_t = W_e S_t; p_{t+1} = softmax(W h_t).

    CNN(I) is one global vector: the fully connected layer over the whole feature grid (so position survives)."""

    has_attention = False

    def __init__(self, vocab_size: int, pad_id: int = 0, height: int = 32, width: int = 128,
                 channels: list[int] = (16, 32, 64), emb_dim: int = 64, hidden_dim: int = 256, dropout: float = 0.1):
        super().__init__(vocab_size, pad_id, height, width, list(channels), emb_dim, hidden_dim, dropout)
        cells = self.grid[0] * self.grid[1]
        self.image_fc = nn.Linear(cells * self.cnn.out_dim, emb_dim)  # the global vector, in word-embedding space
        self.lstm = nn.LSTMCell(emb_dim, hidden_dim)
        self.out = nn.Linear(hidden_dim, vocab_size)

    def encode(self, images: Tensor) -> tuple[Tensor, State]:
        memory = self.cnn(images)  # (B, L, C)
        x = self.drop(self.image_fc(memory.flatten(1)))  # (B, E): x_{-1}
        zeros = x.new_zeros(x.shape[0], self.hidden_dim)
        h, c = self.lstm(x, (zeros, zeros))  # the image is the LSTM's first input (eq. 10)
        return memory, (h, c)

    def decode_step(self, prev: Tensor, state: State, memory: Tensor, grid_mask: Tensor) -> tuple[Tensor, State, Tensor]:
        h, c = self.lstm(self.drop(self.embed(prev)), state)  # (B, H) x 2
        attn = grid_mask.to(memory.dtype) * 0.0  # (B, L): no attention
        return self.out(self.drop(h)), (h, c), attn


class ShowAttendTell(Captioner):
    """Xu et al. 2015 soft attention, §3.1.2 and §4.2: e_ti = f_att(a_i, h_{t-1}) (an MLP), α_t = softmax(e_t),
    ẑ_t = β_t Σ_i α_ti a_i with gate β_t = σ(f_β(h_{t-1})); h_0, c_0 = f_init(mean_i a_i);
    p(y_t) ∝ exp(L_o(E y_{t-1} + L_h h_t + L_z ẑ_t)) (eq. 7, the deep output)."""

    def __init__(self, vocab_size: int, pad_id: int = 0, height: int = 32, width: int = 128,
                 channels: list[int] = (16, 32, 64), emb_dim: int = 64, hidden_dim: int = 256, attn_dim: int = 128,
                 dropout: float = 0.1):
        super().__init__(vocab_size, pad_id, height, width, list(channels), emb_dim, hidden_dim, dropout)
        d = self.cnn.out_dim
        self.init_h, self.init_c = nn.Linear(d, hidden_dim), nn.Linear(d, hidden_dim)
        self.attention = AdditiveAttention(hidden_dim, d, attn_dim)  # f_att: vᵀ tanh(W h_{t-1} + U a_i)
        self.gate = nn.Linear(hidden_dim, 1)  # f_β
        self.lstm = nn.LSTMCell(emb_dim + d, hidden_dim)
        self.L_h, self.L_z = nn.Linear(hidden_dim, emb_dim), nn.Linear(d, emb_dim, bias=False)
        self.L_o = nn.Linear(emb_dim, vocab_size)

    def encode(self, images: Tensor) -> tuple[Tensor, State]:
        memory = self.cnn(images)  # (B, L, D) annotation vectors a_i
        mean = memory.mean(1)  # (B, D)
        return memory, (torch.tanh(self.init_h(mean)), torch.tanh(self.init_c(mean)))

    def decode_step(self, prev: Tensor, state: State, memory: Tensor, grid_mask: Tensor) -> tuple[Tensor, State, Tensor]:
        h, c = state  # (B, H) x 2
        context, alpha = self.attention(h, memory, memory, grid_mask)  # (B, D), (B, L)
        z = torch.sigmoid(self.gate(h)) * context  # (B, D): ẑ_t = β_t Σ α_ti a_i
        y = self.drop(self.embed(prev))  # (B, E): E y_{t-1}
        h, c = self.lstm(torch.cat([y, z], -1), (h, c))
        logits = self.L_o(self.drop(y + self.L_h(h) + self.L_z(z)))  # (B, V)
        return logits, (h, c), alpha
