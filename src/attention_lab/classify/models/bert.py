"""BERT (Devlin et al. 2018): a post-LN Transformer encoder over [CLS] A [SEP] B [SEP], plus its
pre-training heads. Names follow this repository (models/hf_bert.py maps a Hugging Face BertModel
checkpoint onto `Bert`); self-attention is the shared `MultiHeadAttention`. The options `positions`
(learned | alibi) and `layout` (post_ln | pre_ln) make it BERT or the twin of transformer_encoder;
`need_weights` returns one (B, heads, S, S) tensor per layer; `BertClassifier` builds [CLS] ids
[SEP] itself, with tensor ops only. The choices, and why: docs/design.md."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import Tensor, nn

from attention_lab.classify.models.classifier import DocumentClassifier
from attention_lab.nn.attention import MultiHeadAttention, alibi_bias
from attention_lab.nn.layers import EncoderLayer

POSITIONS = ("learned", "alibi")
LAYOUTS = ("post_ln", "pre_ln")


@dataclass
class BertConfig:
    """Sizes of a BERT encoder; BERT-base is hidden=768, layers=12, heads=12, intermediate=3072."""

    vocab_size: int
    hidden: int = 128
    layers: int = 2
    heads: int = 4
    intermediate: int = 256
    max_positions: int = 512
    type_vocab_size: int = 2
    dropout: float = 0.1  # on embeddings and on each sublayer's output
    attention_dropout: float = 0.1  # on the attention weights
    layer_norm_eps: float = 1e-12  # post_ln's LayerNorms (pre_ln: EncoderLayer's, PyTorch's 1e-5)
    pad_id: int = 0
    # learned (BERT: position embeddings) | alibi (a distance bias on the scores)
    positions: str = "learned"
    # post_ln (BERT's BertLayer) | pre_ln (core/layers.EncoderLayer + a final LayerNorm)
    layout: str = "post_ln"

    def __post_init__(self):
        if self.positions not in POSITIONS or self.layout not in LAYOUTS:
            raise ValueError(
                f"BertConfig: positions {self.positions!r} (one of {POSITIONS}), layout"
                f" {self.layout!r} (one of {LAYOUTS})"
            )

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> BertConfig:
        return cls(**d)


def _init_weights(module: nn.Module) -> None:
    """BERT's initialisation: Linear/Embedding weights N(0, 0.02), biases 0, LayerNorm 1/0, padding
    row 0."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx].zero_()
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class BertEmbeddings(nn.Module):
    """Devlin 2018 §3, Fig. 2: input = LayerNorm(token + segment + position embeddings), then
    dropout (alibi: no position embeddings; pre_ln: no LayerNorm, each block normalises its own
    input)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word = nn.Embedding(config.vocab_size, config.hidden, padding_idx=config.pad_id)
        learned = config.positions == "learned"
        self.position = nn.Embedding(config.max_positions, config.hidden) if learned else None
        self.segment = nn.Embedding(config.type_vocab_size, config.hidden)
        post_ln = config.layout == "post_ln"
        self.norm = (
            nn.LayerNorm(config.hidden, eps=config.layer_norm_eps) if post_ln else nn.Identity()
        )
        self.drop = nn.Dropout(config.dropout)

    def forward(self, ids: Tensor, segments: Tensor) -> Tensor:
        """ids, segments (B, S) -> (B, S, H); positions 0..S-1."""
        x = self.word(ids) + self.segment(segments)  # (B, S, H)
        if self.position is not None:
            x = x + self.position(torch.arange(ids.shape[1], device=ids.device))  # (S,) -> (S, H)
        return self.drop(self.norm(x))


class BertLayer(nn.Module):
    """One post-LN encoder layer: x = LN(x + Attn(x)); x = LN(x + W_2 GELU(W_1 x)) (Vaswani §3.1,
    BERT §3)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attn = MultiHeadAttention(
            config.hidden, config.heads, dropout=config.attention_dropout
        )
        self.norm1 = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.ffn = nn.Sequential(
            nn.Linear(config.hidden, config.intermediate),
            nn.GELU(),
            nn.Linear(config.intermediate, config.hidden),
        )
        self.norm2 = nn.LayerNorm(config.hidden, eps=config.layer_norm_eps)
        self.drop = nn.Dropout(config.dropout)

    def forward(
        self, x: Tensor, keys: Tensor, need_weights: bool = False, bias: Tensor | None = None
    ) -> tuple[Tensor, Tensor | None]:
        """x (B, S, H), key mask (B, 1, S), score bias (1, heads, S, S) | None -> (B, S, H),
        self-attention (B, heads, S, S) | None."""
        a, weights = self.attn(x, x, x, keys, need_weights, bias)
        x = self.norm1(x + self.drop(a))
        return self.norm2(x + self.drop(self.ffn(x))), weights


class Bert(nn.Module):
    """The BERT encoder and pooler: (ids, mask, segments) -> (hidden (B, S, H), pooled (B, H),
    attentions)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        if config.layout == "post_ln":
            self.layers = nn.ModuleList(BertLayer(config) for _ in range(config.layers))
            self.norm = nn.Identity()
        else:  # transformer_encoder's block and final LayerNorm
            self.layers = nn.ModuleList(
                EncoderLayer(
                    config.hidden,
                    config.heads,
                    config.intermediate,
                    config.dropout,
                    config.attention_dropout,
                )
                for _ in range(config.layers)
            )
            self.norm = nn.LayerNorm(config.hidden)
        self.pooler = nn.Linear(config.hidden, config.hidden)
        self.apply(_init_weights)

    def forward(
        self,
        ids: Tensor,
        mask: Tensor,
        segments: Tensor | None = None,
        need_weights: bool = False,
        last_only: bool = False,
    ) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
        """ids (B, S) long, mask (B, S) bool True = real, segments (B, S) | None (all 0).

        attentions: one (B, heads, S, S) per layer with `need_weights`, only the last layer's with
        `last_only` too (the other layers then run the fused kernel), else ().
        """
        segments = torch.zeros_like(ids) if segments is None else segments
        x = self.embeddings(ids, segments)  # (B, S, H)
        keys = mask.unsqueeze(1)  # (B, 1, S): every query sees the real keys only
        alibi = self.config.positions == "alibi"
        # (1, heads, S, S)
        bias = alibi_bias(ids.shape[1], self.config.heads, ids.device) if alibi else None
        attentions = []
        for i, layer in enumerate(self.layers):
            need = need_weights and (not last_only or i == len(self.layers) - 1)
            x, weights = layer(x, keys, need, bias)  # (B, S, H)
            if need:
                attentions.append(weights)
        x = self.norm(x)  # pre_ln's final LayerNorm
        # BERT §3: the [CLS] vector through a tanh layer, (B, H)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        return x, pooled, tuple(attentions)


class BertPretraining(nn.Module):
    """Devlin 2018 §3.1: masked-LM head (decoder tied to the word embeddings) + a sentence-pair head
    on the pooled output (next-sentence prediction, or ALBERT's sentence-order prediction)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.bert = Bert(config)
        self.transform = nn.Sequential(
            nn.Linear(config.hidden, config.hidden),
            nn.GELU(),
            nn.LayerNorm(config.hidden, eps=config.layer_norm_eps),
        )
        self.decoder = nn.Linear(config.hidden, config.vocab_size)  # its own output bias
        self.pair = nn.Linear(config.hidden, 2)
        self.apply(_init_weights)
        # tied: logits = h E^T + b (Press & Wolf 2017)
        self.decoder.weight = self.bert.embeddings.word.weight

    def forward(
        self, ids: Tensor, mask: Tensor, segments: Tensor | None = None
    ) -> tuple[Tensor, Tensor]:
        """ids, mask, segments (B, S) -> (MLM logits (B, S, V), pair logits (B, 2))."""
        hidden, pooled, _ = self.bert(ids, mask, segments)
        return self.decoder(self.transform(hidden)), self.pair(pooled)


class BertClassifier(DocumentClassifier):
    """Devlin 2018 §4.1: logits = W dropout(pooled [CLS]) + b over [CLS] w_1 .. w_n [SEP]; "word" is
    the last layer's [CLS]-row attention over w_1 .. w_T, mean over heads, renormalised to sum to 1
    over the real words; "attentions" (not while training) is every layer's self-attention, (B,
    layers, heads, T + 2, T + 2)."""

    hierarchical = False
    output_names = ("logits", "word", "attentions")

    def __init__(
        self,
        vocab_size: int,
        num_classes: int,
        pad_id: int = 0,
        hidden: int = 128,
        layers: int = 2,
        heads: int = 4,
        intermediate: int = 256,
        max_positions: int = 512,
        dropout: float = 0.1,
        attention_dropout: float = 0.1,
        layer_norm_eps: float = 1e-12,
        cls_id: int = 2,
        sep_id: int = 3,
        positions: str = "learned",
        layout: str = "post_ln",
    ):
        super().__init__(vocab_size, num_classes, pad_id)
        self.config = BertConfig(
            vocab_size=vocab_size,
            hidden=hidden,
            layers=layers,
            heads=heads,
            intermediate=intermediate,
            max_positions=max_positions,
            type_vocab_size=2,  # segments A and B (sentence pairs)
            dropout=dropout,
            attention_dropout=attention_dropout,
            layer_norm_eps=layer_norm_eps,
            pad_id=pad_id,
            positions=positions,
            layout=layout,
        )
        self.cls_id, self.sep_id = cls_id, sep_id
        self.bert = Bert(self.config)
        self.drop = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, num_classes)
        self.apply(_init_weights)

    @property
    def max_tokens(self) -> int:
        """Document tokens that fit beside [CLS] and [SEP]."""
        return self.config.max_positions - 2

    def bert_inputs(self, ids: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
        """ids, mask (B, T) right-padded -> [CLS] ids [SEP] pad.., its mask (B, T + 2); [SEP] at
        position length + 1."""
        B = ids.shape[0]
        sep_at = (mask.sum(1) + 1).unsqueeze(1)  # (B, 1)
        # (B, T+2)
        ids = torch.cat(
            [ids.new_full((B, 1), self.cls_id), ids, ids.new_full((B, 1), self.pad_id)], 1
        )
        ids = ids.scatter(1, sep_at, ids.new_full((B, 1), self.sep_id))
        mask = torch.cat([mask.new_ones(B, 1), mask, mask.new_zeros(B, 1)], 1)  # (B, T + 2)
        return ids, mask.scatter(1, sep_at, mask.new_ones(B, 1))

    def forward(self, ids: Tensor, mask: Tensor) -> dict[str, Tensor]:
        x, m = self.bert_inputs(ids, mask)  # (B, T + 2)
        _, pooled, attentions = self.bert(x, m, need_weights=True, last_only=self.training)
        logits = self.out(self.drop(pooled))  # (B, C)
        # [CLS] row over positions 1..T, [SEP] dropped: (B, T)
        word = attentions[-1][:, :, 0, 1:-1].mean(1) * mask
        out = {"logits": logits, "word": word / word.sum(-1, keepdim=True).clamp_min(1e-9)}
        # training needs the last layer's only (the others run the fused kernel)
        if not self.training:
            out["attentions"] = torch.stack(attentions, 1)  # (B, layers, heads, T + 2, T + 2)
        return out

    def attention_maps(self, ids: Tensor, mask: Tensor) -> tuple[Tensor, ...]:
        """Every layer's self-attention over [CLS] ids [SEP]: (B, heads, T + 2, T + 2) each (for
        bertviz)."""
        x, m = self.bert_inputs(ids, mask)
        return self.bert(x, m, need_weights=True)[2]
