"""A Transformer encoder classifier (Vaswani et al. 2017, §3.1) with a learned [CLS] vector read out
for the class. The [CLS] vector is a parameter prepended at position 0 (words at 1..T) that attends
to the words and to itself, and every word attends to it, as in BERT; the layers are the translation
Transformer's pre-LN EncoderLayer, with a final LayerNorm. `positions`: "alibi" (conf/model) or
"sinusoidal" (the class's default). "word" is the last layer's [CLS]-row attention over the words,
mean over heads, renormalised over the words to sum to 1."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attention_lab.classify.models.classifier import DocumentClassifier
from attention_lab.nn.attention import alibi_bias
from attention_lab.nn.layers import EncoderLayer, sinusoids

POSITIONS = ("alibi", "sinusoidal")


class TransformerEncoderClassifier(DocumentClassifier):
    """Encoder stack over [CLS] w_1 .. w_T; logits = W LayerNorm(x_CLS) + b."""

    output_names = ("logits", "word")

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        pad_id: int = 0,
        d_model: int = 128,
        heads: int = 4,
        layers: int = 2,
        d_ff: int = 256,
        dropout: float = 0.1,
        positions: str = "sinusoidal",
    ):
        super().__init__(vocab_size, num_classes, pad_id)
        if positions not in POSITIONS:
            raise ValueError(
                f"unknown positions {positions!r}; choose one of {', '.join(POSITIONS)}"
            )
        # ALiBi has no parameters
        self.d_model, self.heads, self.positions = d_model, heads, positions
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        # so that √d-scaled embeddings have unit variance
        nn.init.normal_(self.embed.weight, std=d_model**-0.5)
        self.cls = nn.Parameter(torch.randn(d_model))  # unit variance, like the scaled embeddings
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            EncoderLayer(d_model, heads, d_ff, dropout) for _ in range(layers)
        )
        self.norm = nn.LayerNorm(d_model)
        self.out = nn.Linear(d_model, num_classes)

    def forward(self, ids: Tensor, mask: Tensor) -> dict[str, Tensor]:
        B, T = ids.shape
        # (B, 1 + T, D)
        x = torch.cat([self.cls.expand(B, 1, -1), self.embed(ids) * math.sqrt(self.d_model)], 1)
        bias = None  # (1, h, 1 + T, 1 + T) with ALiBi
        if self.positions == "sinusoidal":
            # positions 0..T (§3.5)
            x = x + sinusoids(torch.arange(T + 1, device=ids.device), self.d_model)
        else:
            # -m·|i - j| between words; none on [CLS]
            bias = alibi_bias(T + 1, self.heads, ids.device)
        x = self.drop(x)
        # (B, 1, 1 + T): [CLS] is always real
        keys = torch.cat([mask.new_ones(B, 1), mask], 1).unsqueeze(1)
        for i, layer in enumerate(self.layers):
            # (B, 1 + T, D)
            x, weights = layer(x, keys, need_weights=i == len(self.layers) - 1, bias=bias)
        logits = self.out(self.norm(x[:, 0]))  # (B, C)
        # last layer, [CLS] row, over the words, mean over heads: (B, T)
        word = weights[:, :, 0, 1:].mean(1)
        return {"logits": logits, "word": word / word.sum(-1, keepdim=True).clamp_min(1e-9)}
