"""The contract every document-classification family keeps: forward(ids, mask) -> dict of named outputs.

Inputs (padding id 0, mask True = real token, right-padded):
- flat (`hierarchical = False`): ids (B, T), all words of each document in order; mask (B, T).
- hierarchical (`hierarchical = True`): ids (B, N, L), N sentences of L words; mask (B, N, L). Sentences are
  right-padded too: a document with fewer than N sentences ends in fully masked ones.

Outputs: a dict whose keys are exactly `output_names` (in that order, which is also the ONNX output order):
- "logits" (B, C), always;
- "word": attention over the words, same shape as ids ((B, T) or (B, N, L), per sentence for hierarchical models);
- "sentence" (B, N): attention over the sentences (hierarchical attention);
- "hops" (B, r, T): every hop of a multi-hop attention, "word" being their mean;
- "penalty" (B,): the multi-hop redundancy penalty ‖AAᵀ − I‖²_F (the training task weighs it).
Every attention weight is exactly zero at padding and sums to 1 over the real positions of its row (a fully masked
row, e.g. a padded sentence, is all zeros).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from torch import Tensor, nn


class DocumentClassifier(nn.Module, ABC):
    """A document -> C-way classifier; see the module docstring for shapes and output names."""

    hierarchical: bool = False
    output_names: tuple[str, ...] = ("logits",)

    def __init__(self, vocab_size: int, num_classes: int, pad_id: int = 0):
        super().__init__()
        self.vocab_size, self.num_classes, self.pad_id = vocab_size, num_classes, pad_id

    @abstractmethod
    def forward(self, ids: Tensor, mask: Tensor) -> dict[str, Tensor]:
        """ids, mask (B, T) or (B, N, L) -> {name: tensor for name in output_names}."""
