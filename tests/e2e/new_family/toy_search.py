"""A family added in three edits (docs/design.md): RNNsearch (Bahdanau et al. 2015) whose decoder
scores the annotations with Luong et al.'s general attention, score(s, h) = sᵀ W_a h (2015, eq. 8),
instead of the additive one."""

from __future__ import annotations

from attention_lab.nn.attention import build_attention
from attention_lab.translate.models.bahdanau import RNNSearch


class GeneralSearch(RNNSearch):
    """RNNsearch with general attention: the same encoder, decoder and deep output, another
    score."""

    def __init__(self, vocab_size: int, pad_id: int = 0, **sizes):
        super().__init__(vocab_size, pad_id, **sizes)
        self.attention = build_attention("general", self.cell.hidden_size, self.annotation_dim)
