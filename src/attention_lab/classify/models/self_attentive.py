"""A Structured Self-Attentive Sentence Embedding (Lin et al. 2017): r attention hops over BiLSTM
states."""

from __future__ import annotations

from torch import Tensor, nn

from attention_lab.classify.models.classifier import DocumentClassifier
from attention_lab.nn.attention import SelfAttentivePooling, attention_penalty
from attention_lab.nn.layers import BiRNN


class SelfAttentive(DocumentClassifier):
    """Lin et al. 2017: H = BiLSTM(words), A = softmax(W_s2 tanh(W_s1 Hᵀ)) (eq. 6), M = A H (eq. 7),
    MLP on M."""

    output_names = ("logits", "word", "hops", "penalty")

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        pad_id: int = 0,
        emb_dim: int = 100,
        hidden_dim: int = 64,
        attn_dim: int = 64,
        hops: int = 4,
        mlp_dim: int = 256,
        dropout: float = 0.1,
    ):
        super().__init__(vocab_size, num_classes, pad_id)
        self.embed = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        self.drop = nn.Dropout(dropout)
        self.rnn = BiRNN(emb_dim, hidden_dim, cell="lstm")  # h_t = [→h_t; ←h_t], u = hidden_dim
        # W_s1 (d_a, 2u), W_s2 (r, d_a)
        self.attn = SelfAttentivePooling(2 * hidden_dim, attn_dim, hops, bias=False)
        self.mlp = nn.Sequential(
            nn.Linear(hops * 2 * hidden_dim, mlp_dim),
            nn.ReLU(),
            nn.Dropout(dropout),
            # the paper's 2-layer ReLU output MLP (§4)
            nn.Linear(mlp_dim, num_classes),
        )

    def forward(self, ids: Tensor, mask: Tensor) -> dict[str, Tensor]:
        H = self.rnn(self.drop(self.embed(ids)), mask)  # (B, T, 2u), zero at padding
        M, A = self.attn(H, mask)  # (B, r, 2u), (B, r, T)
        logits = self.mlp(self.drop(M.flatten(1)))  # (B, r·2u) -> (B, C)
        # P: eq. 8
        return {"logits": logits, "word": A.mean(1), "hops": A, "penalty": attention_penalty(A)}
