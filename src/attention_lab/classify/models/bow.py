"""`bow`: fastText's bag of tricks (Joulin et al. 2016), the attention-free baseline without word
order."""

from __future__ import annotations

from torch import Tensor, nn

from attention_lab.classify.models.classifier import DocumentClassifier

BIGRAM_HASH = 116049371  # fastText's multiplier for word n-gram hashing


class BagOfTricks(DocumentClassifier):
    """Joulin et al. 2016: the average of word and hashed word-bigram embeddings, then one linear
    layer (§2, §2.2)."""

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        pad_id: int = 0,
        emb_dim: int = 64,
        buckets: int = 20000,
        dropout: float = 0.1,
    ):
        super().__init__(vocab_size, num_classes, pad_id)
        self.buckets = buckets
        self.words = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_id)
        # the hashing trick: bigram ids share `buckets` rows
        self.bigrams = nn.Embedding(buckets, emb_dim)
        for table in (self.words, self.bigrams):  # fastText's init, U(-1/E, 1/E)
            nn.init.uniform_(table.weight, -1 / emb_dim, 1 / emb_dim)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(emb_dim, num_classes)

    def forward(self, ids: Tensor, mask: Tensor) -> dict[str, Tensor]:
        # (B, T - 1) from (w_t, w_t+1)
        bigram_ids = (ids[:, :-1] * BIGRAM_HASH + ids[:, 1:]) % self.buckets
        bigram_mask = mask[:, :-1] & mask[:, 1:]  # (B, T - 1)
        total = (self.words(ids) * mask.unsqueeze(-1)).sum(1)  # (B, E)
        total = total + (self.bigrams(bigram_ids) * bigram_mask.unsqueeze(-1)).sum(1)  # (B, E)
        # (B, 1) features per document
        count = (mask.sum(1) + bigram_mask.sum(1)).clamp_min(1).unsqueeze(-1)
        return {"logits": self.out(self.drop(total / count))}  # (B, C)
