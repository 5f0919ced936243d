"""The contract every document-classification family keeps: forward(ids, mask) -> dict of named
outputs. Inputs (padding id 0, mask True = real token, right-padded) are flat, ids (B, T), or
hierarchical, ids (B, N, L): N sentences of L words. The outputs are exactly `output_names`, in that
order (the ONNX output order): "logits" (B, C) always, and attention as "word", "sentence", "hops",
"penalty"; every attention weight is exactly zero at padding and sums to 1 over its row's real
positions. The contract in full: docs/design.md, "Why the modules are as they are"."""

from __future__ import annotations

from abc import ABC, abstractmethod

from torch import Tensor, nn


class DocumentClassifier(nn.Module, ABC):
    """A document -> C-way classifier; shapes and output names: the module docstring, in full
    docs/design.md."""

    hierarchical: bool = False
    output_names: tuple[str, ...] = ("logits",)

    def __init__(self, vocab_size: int, num_classes: int, pad_id: int = 0):
        super().__init__()
        self.vocab_size, self.num_classes, self.pad_id = vocab_size, num_classes, pad_id

    @abstractmethod
    def forward(self, ids: Tensor, mask: Tensor) -> dict[str, Tensor]:
        """ids, mask (B, T) or (B, N, L) -> {name: tensor for name in output_names}."""
