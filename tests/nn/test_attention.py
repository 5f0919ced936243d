"""attention.py: masked weights, context = weights @ values, multi-head attention against torch's
reference."""

import pytest
import torch

from attention_lab.nn.attention import (
    ATTENTIONS,
    GLOBAL_SCORES,
    LocalPredictive,
    MultiHeadAttention,
    SelfAttentivePooling,
    alibi_bias,
    alibi_slopes,
    attention_penalty,
    build_attention,
    masked_softmax,
)

B, S, D = 3, 5, 8


@pytest.fixture
def source():
    torch.manual_seed(0)
    keys = torch.randn(B, S, D)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    return keys, mask


@pytest.mark.parametrize("name", ["additive", "local_m", *sorted(GLOBAL_SCORES)])
def test_single_query_weights_are_a_distribution_over_real_keys(name, source):
    keys, mask = source
    attention = build_attention(name, D, D, attn_dim=6)
    values = torch.randn(B, S, 4)
    # window covers all
    context, weights = attention(torch.randn(B, D), keys, values, mask, position=torch.zeros(B))
    assert weights.shape == (B, S) and context.shape == (B, 4)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B))
    assert (weights[~mask] == 0).all()  # exactly zero, not merely small
    torch.testing.assert_close(context, torch.einsum("bs,bsd->bd", weights, values))


def test_additive_matches_bahdanau_formula(source):
    keys, mask = source
    attention = build_attention("additive", D, D, attn_dim=6)
    query = torch.randn(B, D)
    e = torch.tanh(
        query @ attention.W.weight.t()
        + (keys @ attention.U.weight.t() + attention.U.bias).transpose(0, 1)
    )
    e = (e @ attention.v.weight.t()).squeeze(-1).t()  # (B, S): vᵀ tanh(W s + U h_j)
    _, weights = attention(query, keys, keys, mask)
    torch.testing.assert_close(weights, e.masked_fill(~mask, float("-inf")).softmax(-1))


@pytest.mark.parametrize("name", sorted(ATTENTIONS))
def test_scores_have_gradients_for_every_parameter_and_input(name, source):
    keys, mask = source
    attention = build_attention(name, D, D, attn_dim=6)
    query, keys = torch.randn(B, D, requires_grad=True), keys.clone().requires_grad_()
    context, weights = attention(query, keys, keys, mask, position=torch.full((B,), 1.0))
    assert context.shape == (B, D) and weights.shape == (B, S)
    context.square().sum().backward()
    assert query.grad.abs().sum() > 0 and keys.grad.abs().sum() > 0
    for name_, p in attention.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name_


def test_luong_scores_match_the_paper(source):
    keys, _ = source
    h_t = torch.randn(B, D)
    dot = build_attention("dot", D, D).score(h_t, keys)
    torch.testing.assert_close(dot, torch.einsum("bd,bsd->bs", h_t, keys))  # h_tᵀ h̄_s
    general = build_attention("general", D, D)
    torch.testing.assert_close(
        general.score(h_t, general.project_keys(keys)),
        # h_tᵀ W_a h̄_s
        torch.einsum("bd,de,bse->bs", h_t, general.W_a.weight, keys),
    )
    concat = build_attention("concat", D, D, attn_dim=6)
    W_a = torch.cat([concat.W.weight, concat.U.weight], 1)  # (6, 2D) acting on [h_t; h̄_s]
    pairs = torch.cat([h_t.unsqueeze(1).expand(-1, S, -1), keys], -1)  # (B, S, 2D)
    # v_aᵀ tanh(W_a [h_t; h̄_s])
    expected = (torch.tanh(pairs @ W_a.t()) @ concat.v.weight.t()).squeeze(-1)
    torch.testing.assert_close(concat.score(h_t, concat.project_keys(keys)), expected)
    paper = build_attention("concat_identity", D, D)  # fn. 15: W_a's h̄_s block is the identity
    expected = (
        torch.tanh(h_t.unsqueeze(1) @ paper.W.weight.t() + keys) @ paper.v.weight.t()
    ).squeeze(-1)
    # v_aᵀ tanh(W h_t + h̄_s)
    torch.testing.assert_close(paper.score(h_t, paper.project_keys(keys)), expected)
    assert sum(p.numel() for p in paper.parameters()) == D * D + D  # W and v_a alone


def test_local_m_gives_zero_weight_outside_the_window():
    torch.manual_seed(0)
    keys, query = torch.randn(2, 30, D), torch.randn(2, D)
    mask = torch.arange(30).unsqueeze(0) < torch.tensor([[30], [12]])
    attention = build_attention("local_m", D, D, window=3)
    _, weights = attention(query, keys, keys, mask, position=torch.tensor([10.0, 10.0]))
    # [p_t − D, p_t + D] with p_t = t = 10
    inside = (torch.arange(30) >= 7) & (torch.arange(30) <= 13)
    # second: 7..11 real
    assert (weights[:, ~inside] == 0).all() and (weights[:, inside] > 0).sum() == 7 + 5
    torch.testing.assert_close(weights.sum(-1), torch.ones(2))
    # window past the end
    _, beyond = attention(query, keys, keys, mask, position=torch.tensor([40.0, 40.0]))
    assert torch.equal(beyond, torch.zeros(2, 30))


def test_local_p_gaussian_factor_and_gradient_through_p_t():
    torch.manual_seed(0)
    keys, query = torch.randn(1, 20, D), torch.randn(1, D)
    mask = torch.ones(1, 20, dtype=torch.bool)
    attention = build_attention("local_p", D, D, window=4)
    assert isinstance(attention, LocalPredictive) and attention.sigma == 2.0  # σ = D / 2
    # S · sigmoid(v_pᵀ tanh(W_p h_t))
    p_t = attention.aligned_position(query, torch.tensor([20.0]), torch.zeros(1))
    expected_p = 20 * torch.sigmoid(attention.v_p(torch.tanh(attention.W_p(query)))).squeeze(-1)
    torch.testing.assert_close(p_t, expected_p)
    _, weights = attention(query, keys, keys, mask, position=torch.zeros(1))
    s = torch.arange(20.0)
    window = (s - p_t).abs() <= 4
    align = masked_softmax(
        attention.score(query, attention.project_keys(keys)), window.unsqueeze(0)
    )
    torch.testing.assert_close(weights, align * torch.exp(-((s - p_t) ** 2) / (2 * 2.0**2)))
    assert (weights[0, ~window] == 0).all()
    weights.sum().backward()  # the Gaussian carries a gradient to W_p and v_p through p_t
    assert attention.v_p.weight.grad.abs().sum() > 0 and attention.W_p.weight.grad.abs().sum() > 0


def test_local_attention_needs_the_position_and_a_known_score(source):
    keys, mask = source
    with pytest.raises(ValueError, match="position"):
        build_attention("local_m", D, D)(torch.randn(B, D), keys, keys, mask)
    with pytest.raises(ValueError, match="local attention score"):
        build_attention("local_p", D, D, score="additive")
    with pytest.raises(ValueError, match="window"):
        build_attention("local_m", D, D, window=-1)


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
    ours, ref = (
        MultiHeadAttention(D, heads=2).eval(),
        torch.nn.MultiheadAttention(D, 2, batch_first=True).eval(),
    )
    with torch.no_grad():
        ours.W_q.weight.copy_(ref.in_proj_weight[:D]), ours.W_q.bias.copy_(ref.in_proj_bias[:D])
        (
            ours.W_k.weight.copy_(ref.in_proj_weight[D : 2 * D]),
            ours.W_k.bias.copy_(ref.in_proj_bias[D : 2 * D]),
        )
        (
            ours.W_v.weight.copy_(ref.in_proj_weight[2 * D :]),
            ours.W_v.bias.copy_(ref.in_proj_bias[2 * D :]),
        )
        ours.W_o.weight.copy_(ref.out_proj.weight), ours.W_o.bias.copy_(ref.out_proj.bias)
    query = torch.randn(B, 4, D)
    # (B, 1, S) key padding
    out, weights = ours(query, keys, keys, mask.unsqueeze(1), need_weights=True)
    # torch: True = ignore; weights head-averaged
    ref_out, ref_weights = ref(query, keys, keys, key_padding_mask=~mask)
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


def test_alibi_slopes_are_press_et_als_geometric_sequences():
    assert alibi_slopes(4) == [1 / 4, 1 / 16, 1 / 64, 1 / 256]
    assert alibi_slopes(8) == [2.0**-k for k in range(1, 9)]
    # not a power of 2: the paper's code
    assert alibi_slopes(12) == alibi_slopes(8) + alibi_slopes(16)[0::2][:4]


def test_alibi_bias_is_minus_slope_times_distance_and_none_on_cls():
    bias = alibi_bias(6, 4)
    assert bias.shape == (1, 4, 6, 6)
    assert bias[0, :, 0, :].eq(0).all() and bias[0, :, :, 0].eq(0).all()  # [CLS] row and column
    i, j = torch.meshgrid(torch.arange(1, 6), torch.arange(1, 6), indexing="ij")
    for h, m in enumerate(alibi_slopes(4)):
        torch.testing.assert_close(bias[0, h, 1:, 1:], -m * (i - j).abs().float(), atol=0, rtol=0)
    assert torch.equal(alibi_bias(6, 4, skip=0)[0, 0, 0], -0.25 * torch.arange(6.0))


def test_alibi_near_keys_weigh_more_masked_keys_get_zero_and_both_paths_agree(source):
    keys, mask = source  # (B, S, D), (B, S)
    torch.manual_seed(3)
    mha = MultiHeadAttention(D, heads=4).eval()
    bias = alibi_bias(S, 4, skip=0)  # (1, h, S, S)
    with torch.no_grad():
        # every score 0: only the bias tells the keys apart
        mha.W_q.weight.zero_(), mha.W_q.bias.zero_()
    _, weights = mha(keys, keys, keys, None, need_weights=True, bias=bias)
    row = weights[0, :, 2]  # query 2 of document 0, every head: (h, S)
    assert (
        (row[:, 2] > row[:, 1]).all()
        and (row[:, 1] > row[:, 0]).all()
        and torch.allclose(row[:, 1], row[:, 3])
    )
    assert (row[0, 0] < row[-1, 0]).all()  # the steepest slope (head 0) discounts distance most

    mha = MultiHeadAttention(D, heads=4).eval()
    key_mask = mask.unsqueeze(1)  # (B, 1, S)
    fast, _ = mha(keys, keys, keys, key_mask, bias=bias)
    explicit, weights = mha(keys, keys, keys, key_mask, need_weights=True, bias=bias)
    torch.testing.assert_close(fast, explicit, atol=1e-5, rtol=1e-5)
    assert weights.masked_select(~mask[:, None, None, :]).eq(0).all()  # padded keys: exactly zero
    # other vectors at the padding
    changed = torch.where(mask.unsqueeze(-1), keys, torch.randn(B, S, D) * 100)
    again, _ = mha(keys, changed, changed, key_mask, bias=bias)
    # the fast path gives padding no weight either
    torch.testing.assert_close(again, fast, atol=0, rtol=0)


def test_self_attentive_pooling_matches_lin_et_al(source):
    keys, mask = source
    pool = SelfAttentivePooling(D, 6, hops=3, bias=False)
    pooled, weights = pool(keys, mask)
    assert pooled.shape == (B, 3, D) and weights.shape == (B, 3, S)
    # W_s2 tanh(W_s1 Hᵀ): (B, r, S)
    scores = pool.W_s2.weight @ torch.tanh(pool.W_s1.weight @ keys.transpose(1, 2))
    # eq. 6
    torch.testing.assert_close(
        weights, scores.masked_fill(~mask.unsqueeze(1), float("-inf")).softmax(-1)
    )
    torch.testing.assert_close(pooled, weights @ keys)  # M = A H
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, 3))
    # padded positions: exactly zero, every hop
    assert (weights.masked_fill(mask.unsqueeze(1), 0) == 0).all()


def test_one_hop_pooling_with_bias_is_yang_et_al_word_attention(source):
    keys, mask = source
    pool = SelfAttentivePooling(D, 6, hops=1, bias=True)
    # u_it = tanh(W_w h_it + b_w): (B, S, 6)
    u = torch.tanh(keys @ pool.W_s1.weight.t() + pool.W_s1.bias)
    # softmax(u_itᵀ u_w): (B, S)
    alpha = (u @ pool.W_s2.weight[0]).masked_fill(~mask, float("-inf")).softmax(-1)
    pooled, weights = pool(keys, mask)
    torch.testing.assert_close(weights[:, 0], alpha)
    # s_i = Σ_t α_it h_it
    torch.testing.assert_close(pooled[:, 0], torch.einsum("bs,bsd->bd", alpha, keys))


def test_self_attentive_pooling_fully_masked_rows_and_gradients(source):
    keys, mask = source
    pool = SelfAttentivePooling(D, 6, hops=2)
    mask = mask.clone()
    mask[2] = False  # an empty sequence (e.g. a padded sentence)
    keys = keys.clone().requires_grad_()
    pooled, weights = pool(keys, mask)
    assert torch.equal(weights[2], torch.zeros(2, S)) and torch.equal(pooled[2], torch.zeros(2, D))
    (pooled.square().sum() + attention_penalty(weights).sum()).backward()
    assert not keys.grad.isnan().any() and keys.grad[:2].abs().sum() > 0
    for name, p in pool.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_attention_penalty_by_hand():
    one_hot = torch.eye(4)[[0, 2, 3]].unsqueeze(0)  # 3 hops on disjoint single positions: A Aᵀ = I
    assert torch.equal(attention_penalty(one_hot), torch.zeros(1))
    same = torch.tensor([[[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]]])  # A Aᵀ − I = [[-.5, .5], [.5, -.5]]
    # A Aᵀ − I = [[0, .2], [.2, .38 − 1]]
    spread = torch.tensor([[[1.0, 0.0, 0.0], [0.2, 0.3, 0.5]]])
    penalty = attention_penalty(torch.cat([same, spread]))
    torch.testing.assert_close(penalty, torch.tensor([1.0, 2 * 0.2**2 + 0.62**2]))


@pytest.mark.parametrize("name", sorted(ATTENTIONS))
def test_a_packed_memory_unpacks_to_the_keys_and_their_projection(name):
    """pack_memory = [keys; project_keys(keys)]; unpack_memory splits it back, whatever the
    projection's width."""
    torch.manual_seed(0)
    attn = build_attention(
        name, D, 6 if name in ("additive", "general", "concat") else D, attn_dim=7
    )
    keys = torch.randn(B, S, attn.key_dim)
    memory = attn.pack_memory(keys)
    unpacked, projected = attn.unpack_memory(memory)
    assert torch.equal(unpacked, keys) and torch.equal(projected, attn.project_keys(keys))
    assert memory.shape == (B, S, attn.key_dim + projected.shape[-1])


def test_the_config_rules_name_every_attention_of_the_registry():
    """core.config_rules checks model.attention against its own copy of the names (core does not
    import nn)."""
    from attention_lab.core import config_rules

    assert config_rules.ATTENTIONS == tuple(ATTENTIONS)
    assert config_rules.GLOBAL_SCORES == tuple(GLOBAL_SCORES)
