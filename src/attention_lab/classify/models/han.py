"""Hierarchical Attention Networks (Yang et al. 2016): words -> sentence vectors -> document vector,
attention at both.

Each sentence is read by the word encoder on its own (the batch is flattened to (B·N, L)); a padded
sentence (a document shorter than N sentences) gets all-zero word weights and a zero vector, and is
masked out of the sentence encoder and the sentence attention.
"""

from __future__ import annotations

from torch import Tensor, nn

from attention_lab.classify.models.classifier import DocumentClassifier
from attention_lab.nn.attention import SelfAttentivePooling
from attention_lab.nn.layers import BiRNN, RNNEncoder


class HAN(DocumentClassifier):
    """Yang et al. 2016: BiGRU word encoder + word attention (eq. 5-7), BiGRU sentence encoder +
    attention (eq. 8-10)."""

    hierarchical = True
    output_names = ("logits", "word", "sentence")

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        pad_id: int = 0,
        emb_dim: int = 100,
        word_hidden: int = 64,
        sentence_hidden: int = 64,
        attn_dim: int = 128,
        dropout: float = 0.1,
    ):
        super().__init__(vocab_size, num_classes, pad_id)
        # h_it = [→h_it; ←h_it]
        self.words = RNNEncoder(
            vocab_size, emb_dim, word_hidden, bidirectional=True, dropout=dropout, pad_id=pad_id
        )
        # W_w, b_w, u_w
        self.word_attn = SelfAttentivePooling(2 * word_hidden, attn_dim, hops=1, bias=True)
        self.sentences = BiRNN(2 * word_hidden, sentence_hidden, cell="gru")  # h_i = [→h_i; ←h_i]
        # W_s, b_s, u_s
        self.sentence_attn = SelfAttentivePooling(2 * sentence_hidden, attn_dim, hops=1, bias=True)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(2 * sentence_hidden, num_classes)  # p = softmax(W_c v + b_c) (eq. 11)

    def forward(self, ids: Tensor, mask: Tensor) -> dict[str, Tensor]:
        B, N, L = ids.shape
        words = self.words(ids.reshape(B * N, L), mask.reshape(B * N, L))  # (B·N, L, 2Hw)
        # s_i = Σ_t α_it h_it: (B·N, 1, 2Hw), (B·N, 1, L)
        s, alpha = self.word_attn(words, mask.reshape(B * N, L))
        sentence_mask = mask.any(-1)  # (B, N): a sentence is real if it has a word
        h = self.sentences(self.drop(s.reshape(B, N, -1)), sentence_mask)  # (B, N, 2Hs)
        v, beta = self.sentence_attn(h, sentence_mask)  # v = Σ_i α_i h_i: (B, 1, 2Hs), (B, 1, N)
        logits = self.out(self.drop(v[:, 0]))  # (B, C)
        return {"logits": logits, "word": alpha.reshape(B, N, L), "sentence": beta[:, 0]}
