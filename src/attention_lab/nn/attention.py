"""Every attention of the timeline behind one interface: `forward(query, keys, values, mask) ->
(context, weights)`. Masks are boolean with True = real token (attend); masked keys get exactly zero
weight, and a row whose keys are all masked gets all-zero weights (never NaN). A scorer subclasses
`Attention` with a class attribute `name`, which registers it in `ATTENTIONS`; callers use
`build_attention(name, ...)`. The classes with their papers and equations: docs/design.md, "Where
the code lives"."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def masked_softmax(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Softmax over the last axis that gives masked keys exactly 0 and fully masked rows all zeros
    (no NaN)."""
    if mask is None:
        return scores.softmax(-1)
    # finite fill: an all-masked row stays finite
    scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    return scores.softmax(-1).masked_fill(~mask, 0.0)


# name -> scorer, in definition order: each subclass with a `name` adds itself
ATTENTIONS: dict[str, type[Attention]] = {}
# the scorers local attention may use for its content score
GLOBAL_SCORES: dict[str, type[Attention]] = {}


class Attention(nn.Module, ABC):
    """One decoder query over a source: keys (B, S, Dk), values (B, S, Dv), mask (B, S) -> context,
    weights."""

    # the name in ATTENTIONS, build_attention and `model.attention`
    name: ClassVar[str] = ""
    # Luong et al. 2015 eq. 8 scores: also a local attention's content score
    global_score: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if cls.__dict__.get("name"):  # its own name, not a parent's
            ATTENTIONS[cls.name] = cls
            if cls.global_score:
                GLOBAL_SCORES[cls.name] = cls

    def __init__(self, key_dim: int):
        super().__init__()
        self.key_dim = key_dim  # Dk: where unpack_memory splits a memory

    def project_keys(self, keys: Tensor) -> Tensor:
        """The part of the score that depends on the source only; a decoder computes it once per
        sentence."""
        return keys

    def pack_memory(self, keys: Tensor) -> Tensor:
        """keys (B, S, Dk) -> memory [keys; project_keys(keys)] (B, S, Dk + P): what a decoder's
        encode returns."""
        return torch.cat([keys, self.project_keys(keys)], -1)

    def unpack_memory(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """pack_memory's memory (B, S, Dk + P) -> (keys (B, S, Dk), projected keys (B, S, P))."""
        return memory[..., : self.key_dim], memory[..., self.key_dim :]

    @abstractmethod
    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        """Alignment scores e (B, S) of query (B, Dq) against projected keys (B, S, *)."""

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        projected_keys: Tensor | None = None,
        position: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """context (B, Dv) = Σ_j α_j values_j with α = softmax(score) (Bahdanau eq. 5-6); returns
        (context, α (B, S))."""
        if projected_keys is None:
            projected_keys = self.project_keys(keys)
        weights = masked_softmax(self.score(query, projected_keys), mask)  # (B, S)
        return _weighted_sum(weights, values), weights


def _weighted_sum(weights: Tensor, values: Tensor) -> Tensor:
    """(B, S) weights over (B, S, Dv) values -> (B, Dv)."""
    return torch.bmm(weights.unsqueeze(1), values).squeeze(1)  # (B, 1, S) @ (B, S, Dv) -> (B, Dv)


class AdditiveAttention(Attention):
    """Bahdanau et al. 2015, eq. 6 (A.1.2): e_ij = vᵀ tanh(W s_{i-1} + U h_j)."""

    name = "additive"

    def __init__(
        self, query_dim: int, key_dim: int, attn_dim: int | None = None, bias: bool = True
    ):
        super().__init__(key_dim)
        attn_dim = attn_dim or query_dim
        self.W = nn.Linear(query_dim, attn_dim, bias=False)
        self.U = nn.Linear(key_dim, attn_dim, bias=bias)
        self.v = nn.Linear(attn_dim, 1, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        """U h_j for every source position: (B, S, Dk) -> (B, S, A)."""
        return self.U(keys)

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        # (B, 1, A) + (B, S, A) -> (B, S, A)
        hidden = torch.tanh(self.W(query).unsqueeze(1) + projected_keys)
        return self.v(hidden).squeeze(-1)  # (B, S)


class DotAttention(Attention):
    """Luong et al. 2015, eq. 8 (dot): score(h_t, h_s) = h_tᵀ h_s; query and key sizes must
    match."""

    name = "dot"
    global_score = True

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int | None = None):
        super().__init__(key_dim)
        if query_dim != key_dim:
            raise ValueError(
                f"dot attention needs query_dim == key_dim, got {query_dim} and {key_dim}"
            )

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        # (B, S, D) @ (B, D, 1) -> (B, S)
        return torch.bmm(projected_keys, query.unsqueeze(-1)).squeeze(-1)


class GeneralAttention(Attention):
    """Luong et al. 2015, eq. 8 (general): score(h_t, h_s) = h_tᵀ W_a h_s, with W_a h_s precomputed
    per sentence."""

    name = "general"
    global_score = True

    score = DotAttention.score

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int | None = None):
        super().__init__(key_dim)
        self.W_a = nn.Linear(key_dim, query_dim, bias=False)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.W_a(keys)  # (B, S, Dq)


class ConcatAttention(AdditiveAttention):
    """Luong et al. 2015, eq. 8 (concat): v_aᵀ tanh(W_a [h_t; h̄_s]) = v_aᵀ tanh(W h_t + U h̄_s),
    W_a = [W U], no bias."""

    name = "concat"
    global_score = True

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int | None = None):
        super().__init__(query_dim, key_dim, attn_dim, bias=False)


class ConcatIdentityAttention(AdditiveAttention):
    """Luong et al. 2015, eq. 8 as built (fn. 15): concat with W_a's h̄_s block fixed to the
    identity, v_aᵀ tanh(W h_t + h̄_s); the attention size is the key size."""

    name = "concat_identity"
    global_score = True

    def __init__(self, query_dim: int, key_dim: int, attn_dim: int | None = None):
        super().__init__(query_dim, key_dim, key_dim, bias=False)
        self.U = nn.Identity()  # the h̄_s block of W_a: I (B, S, Dk) -> (B, S, Dk)


class LocalAttention(Attention, ABC):
    """Luong et al. 2015, §3.2: a content score (dot | general | concat) restricted to [p_t − D, p_t
    + D]."""

    def __init__(
        self,
        query_dim: int,
        key_dim: int,
        attn_dim: int | None = None,
        window: int = 10,
        score: str = "general",
    ):
        super().__init__(key_dim)
        if window < 0:
            raise ValueError(f"local attention window D must be >= 0, got {window}")
        if score not in GLOBAL_SCORES:
            raise ValueError(
                f"unknown local attention score '{score}'; choose one of {sorted(GLOBAL_SCORES)}"
            )
        self.window = window
        self.content = GLOBAL_SCORES[score](query_dim, key_dim, attn_dim)

    def project_keys(self, keys: Tensor) -> Tensor:
        return self.content.project_keys(keys)

    def score(self, query: Tensor, projected_keys: Tensor) -> Tensor:
        return self.content.score(query, projected_keys)

    @abstractmethod
    def aligned_position(self, query: Tensor, lengths: Tensor, position: Tensor) -> Tensor:
        """p_t (B,) float: the source position the window is centred on."""

    def factor(self, distance: Tensor) -> Tensor:
        """Multiplies the in-window softmax: 1 for local-m; a Gaussian for local-p."""
        return torch.ones_like(distance)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        projected_keys: Tensor | None = None,
        position: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """a_t(s) = align(h_t, h̄_s) · factor(s − p_t) over the window, zero outside it (eq. 7 and
        10)."""
        if position is None:
            raise ValueError(f"{type(self).__name__} needs the decoder position t")
        if projected_keys is None:
            projected_keys = self.project_keys(keys)
        B, S = keys.shape[:2]
        mask = torch.ones(B, S, dtype=torch.bool, device=keys.device) if mask is None else mask
        # (B,)
        p_t = self.aligned_position(query, mask.sum(1).to(query.dtype), position.to(query.dtype))
        # (B, S)
        distance = torch.arange(S, device=keys.device, dtype=query.dtype).unsqueeze(
            0
        ) - p_t.unsqueeze(1)
        window = mask & (distance.abs() <= self.window)  # (B, S)
        # (B, S)
        weights = masked_softmax(self.score(query, projected_keys), window) * self.factor(distance)
        return _weighted_sum(weights, values), weights


class LocalMonotonic(LocalAttention):
    """Luong et al. 2015, §3.2 local-m: p_t = t (source and target roughly monotonically
    aligned)."""

    name = "local_m"

    def aligned_position(self, query: Tensor, lengths: Tensor, position: Tensor) -> Tensor:
        return position


class LocalPredictive(LocalAttention):
    """Luong et al. 2015, §3.2 local-p: p_t = S · sigmoid(v_pᵀ tanh(W_p h_t)) (eq. 9), factor
    exp(−(s − p_t)²/2σ²), σ = D/2 (eq. 10); the Gaussian keeps the weights differentiable in p_t."""

    name = "local_p"

    def __init__(
        self,
        query_dim: int,
        key_dim: int,
        attn_dim: int | None = None,
        window: int = 10,
        score: str = "general",
    ):
        super().__init__(query_dim, key_dim, attn_dim, window, score)
        self.W_p = nn.Linear(query_dim, attn_dim or query_dim, bias=False)
        self.v_p = nn.Linear(attn_dim or query_dim, 1, bias=False)
        self.sigma = max(window / 2, 0.5)

    def aligned_position(self, query: Tensor, lengths: Tensor, position: Tensor) -> Tensor:
        # (B,) in [0, S]
        return lengths * torch.sigmoid(self.v_p(torch.tanh(self.W_p(query))).squeeze(-1))

    def factor(self, distance: Tensor) -> Tensor:
        return torch.exp(-distance.square() / (2 * self.sigma**2))


def build_attention(
    name: str, query_dim: int, key_dim: int, attn_dim: int | None = None, **options
) -> Attention:
    """The single-query attention registered under `name` (see ATTENTIONS); options: window, score
    (local only)."""
    if name not in ATTENTIONS:
        raise ValueError(f"unknown attention '{name}'; choose one of {sorted(ATTENTIONS)}")
    return ATTENTIONS[name](query_dim, key_dim, attn_dim, **options)


class MultiHeadAttention(nn.Module):
    """Vaswani et al. 2017, §3.2.2: MultiHead(Q, K, V) = Concat(head_1..head_h) W^O, head_i =
    Attention(QW_i^Q, KW_i^K, VW_i^V)."""

    def __init__(self, d_model: int, heads: int, dropout: float = 0.0):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model={d_model} is not divisible by heads={heads}")
        self.heads, self.d_k, self.dropout = heads, d_model // heads, dropout
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def _split(self, x: Tensor) -> Tensor:
        B, L, _ = x.shape
        return x.view(B, L, self.heads, self.d_k).transpose(1, 2)  # (B, L, D) -> (B, h, L, d_k)

    def forward(
        self,
        query: Tensor,
        keys: Tensor,
        values: Tensor,
        mask: Tensor | None = None,
        need_weights: bool = False,
        bias: Tensor | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """query (B, Q, D), keys/values (B, K, D), mask broadcastable to (B, Q, K), bias (B|1, h|1,
        Q, K) added to the scores QKᵀ/√d_k (ALiBi's distances) -> (out (B, Q, D), weights (B, h, Q,
        K) | None); masked keys get 0.

        Without `need_weights` it runs F.scaled_dot_product_attention; with it, the explicit softmax
        of eq. 1.
        """
        B, Q, D = query.shape
        q, k, v = (
            self._split(self.W_q(query)),
            self._split(self.W_k(keys)),
            self._split(self.W_v(values)),
        )
        # (B, 1, Q|1, K): same mask for every head
        head_mask = None if mask is None else mask.unsqueeze(1)
        p = self.dropout if self.training else 0.0
        if need_weights:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, Q, K)
            weights = masked_softmax(scores if bias is None else scores + bias, head_mask)
            out = F.dropout(weights, p, self.training) @ v  # (B, h, Q, d_k)
        else:
            weights = None
            attn_mask = head_mask if bias is None else score_mask(bias.to(q.dtype), head_mask)
            # (B, h, Q, d_k)
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p)
        out = out.transpose(1, 2).reshape(B, Q, D)  # concat heads: (B, Q, h * d_k)
        return self.W_o(out), weights


def score_mask(bias: Tensor, mask: Tensor | None) -> Tensor:
    """An additive float mask for F.scaled_dot_product_attention: bias (.., Q, K) where mask is
    True, the dtype's finite minimum where it is False (exp underflows to exactly 0, as
    masked_softmax gives)."""
    if mask is None:
        return bias
    return torch.where(mask, bias, torch.finfo(bias.dtype).min)  # broadcast: (B, h, Q, K)


def alibi_slopes(heads: int) -> list[float]:
    """Press et al. 2022, §3: head k of h gets m_k = 2^(-8k/h) (h a power of 2: 1/4, 1/16, 1/64,
    1/256 for h = 4); otherwise the 2^⌊log2 h⌋ slopes, then every other slope of the 2^(⌊log2 h⌋+1)
    ones (the paper's code)."""
    n = 2 ** math.floor(math.log2(heads))
    slopes = [2 ** (-8 * k / n) for k in range(1, n + 1)]
    return slopes if n == heads else slopes + alibi_slopes(2 * n)[0::2][: heads - n]


def alibi_bias(
    length: int, heads: int, device: torch.device | None = None, skip: int = 1
) -> Tensor:
    """Press et al. 2022, §3 (ALiBi), made symmetric for an encoder: bias_ij = -m_h·|i - j|, (1, h,
    S, S) for S = length; the first `skip` positions ([CLS]) get no bias, as query or as key."""
    positions = torch.arange(length, device=device)  # (S,)
    distance = (positions.unsqueeze(1) - positions.unsqueeze(0)).abs()  # (S, S)
    # (S, S): neither is [CLS]
    real = (positions >= skip).unsqueeze(1) & (positions >= skip).unsqueeze(0)
    slopes = torch.tensor(alibi_slopes(heads), device=device).view(heads, 1, 1)  # (h, 1, 1)
    return (-slopes * (distance * real)).unsqueeze(0)  # (1, h, S, S)


class SelfAttentivePooling(nn.Module):
    """Lin et al. 2017, eq. 5-6: A = softmax(W_s2 tanh(W_s1 Hᵀ)) (r hops), M = A H; keys (B, T, D)
    -> (M, A).

    Yang et al. 2016's word and sentence attention (eq. 5-10: u = tanh(W h + b), α = softmax(uᵀ
    u_w), s = Σ α h) is the one-hop case with bias: u_w is the single row of W_s2. Lin et al. use no
    bias (bias=False).
    """

    def __init__(self, key_dim: int, attn_dim: int, hops: int = 1, bias: bool = True):
        super().__init__()
        self.W_s1 = nn.Linear(key_dim, attn_dim, bias=bias)
        # row k is the context vector of hop k (u_w in Yang)
        self.W_s2 = nn.Linear(attn_dim, hops, bias=False)

    def forward(self, keys: Tensor, mask: Tensor | None) -> tuple[Tensor, Tensor]:
        """keys (B, T, D), mask (B, T) -> (pooled M (B, r, D), weights A (B, r, T)), A zero at
        masked keys."""
        # (B, T, A) -> (B, T, r) -> (B, r, T)
        scores = self.W_s2(torch.tanh(self.W_s1(keys))).transpose(1, 2)
        weights = masked_softmax(scores, None if mask is None else mask.unsqueeze(1))  # (B, r, T)
        return weights @ keys, weights  # (B, r, T) @ (B, T, D) -> (B, r, D)


def attention_penalty(weights: Tensor) -> Tensor:
    """Lin et al. 2017, eq. 8: P = ‖A Aᵀ − I‖²_F per example; weights A (B, r, T) -> (B,)."""
    eye = torch.eye(weights.shape[1], dtype=weights.dtype, device=weights.device)  # (r, r)
    return (weights @ weights.transpose(1, 2) - eye).square().sum((1, 2))
