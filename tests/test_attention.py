"""attention.py: masked weights, context = weights @ values, multi-head attention against torch's reference."""

import pytest
import torch

from attention_lab.attention import ATTENTIONS, MultiHeadAttention, build_attention, masked_softmax

B, S, D = 3, 5, 8


@pytest.fixture
def source():
    torch.manual_seed(0)
    keys = torch.randn(B, S, D)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    return keys, mask


@pytest.mark.parametrize("name", sorted(ATTENTIONS))
def test_single_query_weights_are_a_distribution_over_real_keys(name, source):
    keys, mask = source
    attention = build_attention(name, D, D, attn_dim=6)
    values = torch.randn(B, S, 4)
    context, weights = attention(torch.randn(B, D), keys, values, mask)
    assert weights.shape == (B, S) and context.shape == (B, 4)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B))
    assert (weights[~mask] == 0).all()  # exactly zero, not merely small
    torch.testing.assert_close(context, torch.einsum("bs,bsd->bd", weights, values))


def test_additive_matches_bahdanau_formula(source):
    keys, mask = source
    attention = build_attention("additive", D, D, attn_dim=6)
    query = torch.randn(B, D)
    e = torch.tanh(query @ attention.W.weight.t() + (keys @ attention.U.weight.t() + attention.U.bias).transpose(0, 1))
    e = (e @ attention.v.weight.t()).squeeze(-1).t()  # (B, S): vᵀ tanh(W s + U h_j)
    _, weights = attention(query, keys, keys, mask)
    torch.testing.assert_close(weights, e.masked_fill(~mask, float("-inf")).softmax(-1))


def test_projected_keys_can_be_precomputed(source):
    keys, mask = source
    attention = build_attention("general", D, D)
    query = torch.randn(B, D)
    fresh = attention(query, keys, keys, mask)
    cached = attention(query, keys, keys, mask, projected_keys=attention.project_keys(keys))
    torch.testing.assert_close(fresh, cached)


def test_fully_masked_rows_give_zeros_not_nan():
    scores = torch.randn(2, 4, requires_grad=True)
    mask = torch.tensor([[True, False, True, False], [False] * 4])
    weights = masked_softmax(scores, mask)
    assert torch.equal(weights[1], torch.zeros(4)) and not weights.isnan().any()
    weights.sum().backward()
    assert not scores.grad.isnan().any()


def test_dot_attention_rejects_mismatched_sizes():
    with pytest.raises(ValueError):
        build_attention("dot", 4, 6)
    with pytest.raises(ValueError):
        build_attention("nope", 4, 4)


def test_multi_head_equals_torch_reference(source):
    keys, mask = source
    torch.manual_seed(1)
    ours, ref = MultiHeadAttention(D, heads=2).eval(), torch.nn.MultiheadAttention(D, 2, batch_first=True).eval()
    with torch.no_grad():
        ours.W_q.weight.copy_(ref.in_proj_weight[:D]), ours.W_q.bias.copy_(ref.in_proj_bias[:D])
        ours.W_k.weight.copy_(ref.in_proj_weight[D:2 * D]), ours.W_k.bias.copy_(ref.in_proj_bias[D:2 * D])
        ours.W_v.weight.copy_(ref.in_proj_weight[2 * D:]), ours.W_v.bias.copy_(ref.in_proj_bias[2 * D:])
        ours.W_o.weight.copy_(ref.out_proj.weight), ours.W_o.bias.copy_(ref.out_proj.bias)
    query = torch.randn(B, 4, D)
    out, weights = ours(query, keys, keys, mask.unsqueeze(1), need_weights=True)  # (B, 1, S) key padding
    ref_out, ref_weights = ref(query, keys, keys, key_padding_mask=~mask)  # torch: True = ignore; weights head-averaged
    assert weights.shape == (B, 2, 4, S)
    torch.testing.assert_close(out, ref_out)
    torch.testing.assert_close(weights.mean(1), ref_weights)
    assert (weights.masked_fill(mask[:, None, None], 0.0) == 0).all()  # padded keys: exactly zero


def test_sdpa_fast_path_equals_explicit_path(source):
    keys, mask = source
    torch.manual_seed(2)
    mha = MultiHeadAttention(D, heads=4).eval()
    causal = torch.ones(S, S, dtype=torch.bool).tril().unsqueeze(0)  # (1, S, S)
    for m in (mask.unsqueeze(1), causal, None):
        fast, none = mha(keys, keys, keys, m)
        explicit, weights = mha(keys, keys, keys, m, need_weights=True)
        assert none is None and weights.shape == (B, 4, S, S)
        torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)
