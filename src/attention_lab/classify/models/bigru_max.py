"""`bigru_max`: a bidirectional GRU over the document's words with max pooling, the attention-free
baseline that reads word order."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attention_lab.classify.models.classifier import DocumentClassifier
from attention_lab.nn.layers import RNNEncoder


class BiGRUMax(DocumentClassifier):
    """A bidirectional GRU over the words, max pooling over time (real positions only), then one
    linear layer."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        pad_id: int = 0,
        emb_dim: int = 100,
        hidden_dim: int = 64,
        dropout: float = 0.2,
    ):
        super().__init__(vocab_size, num_classes, pad_id)
        self.encoder = RNNEncoder(
            vocab_size, emb_dim, hidden_dim, bidirectional=True, dropout=dropout, pad_id=pad_id
        )
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(2 * hidden_dim, num_classes)

    def forward(self, ids: Tensor, mask: Tensor) -> dict[str, Tensor]:
        states = self.encoder(ids, mask)  # (B, T, 2H), zero at padding
        # (B, 2H)
        pooled = states.masked_fill(~mask.unsqueeze(-1), torch.finfo(states.dtype).min).amax(1)
        pooled = pooled * mask.any(1, keepdim=True)  # an empty document pools to zeros, not -inf
        return {"logits": self.out(self.drop(pooled))}  # (B, C)
