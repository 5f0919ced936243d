"""`show_tell`: Show and Tell (Vinyals et al. 2015), a captioner without attention."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attention_lab.caption.models.captioner import Captioner
from attention_lab.nn.decoder_step import State


class ShowTell(Captioner):
    """Vinyals et al. 2015, eq. 10-12: x_{-1} = W_e CNN(I) starts the LSTM, then x_t = W_e S_t;
    p_{t+1} = softmax(W h_t).

    CNN(I) is one global vector: the fully connected layer over the whole feature grid (so position
    survives); with a pretrained CNN's cached annotations (feature_dim), their mean (the network's
    pooled image vector). `image_input: first` is the paper's (the image enters once, as x_{-1});
    `every_step` also feeds it beside every word, x_t = [W_e S_t; CNN(I)] (Mao et al. 2015's m-RNN,
    Donahue et al. 2015's LRCN): without attention, a caption of several digits must otherwise be
    read out of one input the LSTM saw before its first word."""

    has_attention = False

    def __init__(
        self,
        vocab_size: int,
        pad_id: int = 0,
        height: int = 32,
        width: int = 128,
        channels: list[int] = (16, 32, 64),
        emb_dim: int = 64,
        hidden_dim: int = 256,
        dropout: float = 0.1,
        image_input: str = "first",
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
        if image_input not in ("first", "every_step"):
            raise ValueError(f"image_input={image_input!r}: expected first or every_step")
        self.every_step = image_input == "every_step"
        cells = 1 if self.features else self.grid[0] * self.grid[1]
        # the global vector, in word-embedding space
        self.image_fc = nn.Linear(cells * self.cnn.out_dim, emb_dim)
        self.lstm = nn.LSTMCell(emb_dim * (2 if self.every_step else 1), hidden_dim)
        self.out = nn.Linear(hidden_dim, vocab_size)

    def image(self, memory: Tensor) -> Tensor:
        """CNN(I): (B, L, C) grid -> (B, E) global vector (from the pooled grid of a pretrained
        CNN)."""
        return self.drop(self.image_fc(memory.mean(1) if self.features else memory.flatten(1)))

    def encode(self, images: Tensor) -> tuple[Tensor, State]:
        memory = self.cnn(images)  # (B, L, C)
        x = self.image(memory)  # (B, E): x_{-1}
        if self.every_step:
            x = torch.cat([torch.zeros_like(x), x], -1)  # (B, 2E): no word yet, the image
        zeros = x.new_zeros(x.shape[0], self.hidden_dim)
        h, c = self.lstm(x, (zeros, zeros))  # the image is the LSTM's first input (eq. 10)
        return memory, (h, c)

    def decode_step(
        self, prev: Tensor, state: State, memory: Tensor, grid_mask: Tensor
    ) -> tuple[Tensor, State, Tensor]:
        x = self.drop(self.embed(prev))  # (B, E)
        if self.every_step:
            x = torch.cat([x, self.image(memory)], -1)  # (B, 2E)
        h, c = self.lstm(x, state)  # (B, H) x 2
        attn = grid_mask.to(memory.dtype) * 0.0  # (B, L): no attention
        return self.out(self.drop(h)), (h, c), attn
