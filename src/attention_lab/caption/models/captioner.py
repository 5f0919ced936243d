"""What both captioning families share (show_tell.py, show_attend_tell.py): one small CNN written
here (no torchvision) and the Captioner base class, which keeps the decoder-step contract of
nn/decoder_step.py with an image for a sentence: `encode(images (B, H, W)) -> (memory (B, L, D),
state)`, memory the CNN's feature grid as L = h·w annotation vectors, and `decode_step(prev (B,),
state, memory, grid_mask (B, L)) -> (logits (B, V), state, attention (B, L))`."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor, nn

from attention_lab.nn.decoder_step import State


class DigitCNN(nn.Module):
    """Blocks of conv3×3 → BatchNorm → ReLU → maxpool 2 over the image and two coordinate channels
    (x, y in [-1, 1], CoordConv, Liu et al. 2018, so cells know where they are): (B, H, W) -> (B, L,
    C), L = (H / 2^n)·(W / 2^n)."""

    def __init__(self, channels: list[int]):
        super().__init__()
        layers, c_in = [], 3
        for c in channels:
            layers += [
                nn.Conv2d(c_in, c, 3, padding=1, bias=False),
                nn.BatchNorm2d(c),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
            c_in = c
        self.net = nn.Sequential(*layers)
        self.out_dim, self.stride = c_in, 2 ** len(channels)

    def forward(self, images: Tensor) -> Tensor:
        B, H, W = images.shape
        ys = torch.linspace(-1, 1, H, device=images.device).view(1, H, 1).expand(B, H, W)
        xs = torch.linspace(-1, 1, W, device=images.device).view(1, 1, W).expand(B, H, W)
        grid = self.net(torch.stack([images, xs, ys], 1))  # (B, 3, H, W) -> (B, C, h, w)
        return grid.flatten(2).transpose(1, 2)  # (B, h·w, C), row-major over the grid


class FeatureGrid(nn.Module):
    """Annotation vectors computed once by a frozen pretrained CNN (caption/data/features.py) pass
    through unchanged: (B, L, D) -> (B, L, D); stands in for DigitCNN when the model reads cached
    features (Xu et al. 2015 §3.1.1)."""

    def __init__(self, feature_dim: int, stride: int):
        super().__init__()
        self.out_dim, self.stride = feature_dim, stride

    def forward(self, features: Tensor) -> Tensor:
        return features


class Captioner(nn.Module, ABC):
    """What both families share: the CNN, word embeddings, an LSTM cell decoder and teacher-forced
    forward."""

    has_attention = True

    def __init__(
        self,
        vocab_size: int,
        pad_id: int,
        height: int,
        width: int,
        channels: list[int],
        emb_dim: int,
        hidden_dim: int,
        dropout: float,
        feature_dim: int | None = None,
        feature_stride: int = 32,
    ):
        super().__init__()
        self.vocab_size, self.pad_id = vocab_size, pad_id
        # True: encode() reads cached annotations (B, L, D), not pixels
        self.features = feature_dim is not None
        self.cnn = FeatureGrid(feature_dim, feature_stride) if self.features else DigitCNN(channels)
        if height % self.cnn.stride or width % self.cnn.stride:
            raise ValueError(
                f"canvas {height}×{width} must be divisible by {self.cnn.stride} (2 **"
                " len(channels))"
            )
        # (h, w) of the annotation grid
        self.grid = (height // self.cnn.stride, width // self.cnn.stride)
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.hidden_dim = hidden_dim

    @abstractmethod
    def encode(self, images: Tensor) -> tuple[Tensor, State]:
        """images (B, H, W) in [0, 1] (or cached annotations (B, L, D)) -> (annotation vectors (B,
        L, D), the decoder state before bos)."""

    @abstractmethod
    def decode_step(
        self, prev: Tensor, state: State, memory: Tensor, grid_mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        """prev (B,) ids -> (logits (B, V), new state, attention over the grid (B, L))."""

    def grid_mask(self, memory: Tensor) -> Tensor:
        """Every grid cell is real: (B, L) True (the mask argument of the shared decoder-step
        contract)."""
        return torch.ones(memory.shape[:2], dtype=torch.bool, device=memory.device)

    def forward(self, images: Tensor, tgt_in: Tensor) -> tuple[Tensor, Tensor]:
        """Teacher forcing by looping decode_step: images (B, H, W), tgt_in (B, T) -> logits (B, T,
        V), α (B, T, L)."""
        memory, state = self.encode(images)
        mask = self.grid_mask(memory)
        logits, attn = [], []
        for t in range(tgt_in.shape[1]):
            step_logits, state, step_attn = self.decode_step(tgt_in[:, t], state, memory, mask)
            logits.append(step_logits)
            attn.append(step_attn)
        return torch.stack(logits, 1), torch.stack(attn, 1)
