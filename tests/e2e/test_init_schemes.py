"""benchmarks/init_schemes.py: each scheme draws what its paper says on our real models, and the verdict is read
from the figures."""

from __future__ import annotations

import torch

from attention_lab.translate.models.bahdanau import RNNSearch
from attention_lab.translate.models.luong import LuongNMT


def test_bahdanau_paper_scheme():
    from benchmarks.init_schemes import bahdanau_paper

    torch.manual_seed(0)
    model = RNNSearch(vocab_size=50, emb_dim=8, enc_hidden_dim=6, dec_hidden_dim=10, attn_dim=4, maxout_dim=4)
    embed = model.embed.weight.clone()
    bahdanau_paper(model)
    for gate in model.cell.weight_hh.chunk(3, 0):  # (10, 10) each: orthogonal
        assert torch.allclose(gate @ gate.T, torch.eye(10), atol=1e-5)
    assert not model.attention.v.weight.any() and not model.cell.bias_ih.any()
    assert model.attention.W.weight.std() < 0.005 and 0.005 < model.output.W_o.weight.std() < 0.02
    assert torch.equal(model.embed.weight, embed)  # embeddings kept


def test_luong_paper_and_xavier_keep_embeddings():
    from benchmarks.init_schemes import luong_paper, xavier

    model = LuongNMT(vocab_size=50, emb_dim=8, hidden_dim=6, layers=1, attention="concat")
    embed = model.embed.weight.clone()
    luong_paper(model)
    assert all(p.abs().max() <= 0.1 for n, p in model.named_parameters() if "embed" not in n)
    xavier(model)
    assert not model.W_s.bias.any() and torch.equal(model.embed.weight, embed)


def test_each_family_is_marked_with_the_scheme_its_config_trains_with():
    from benchmarks.init_schemes import DEFAULTS, own_scheme, verdict

    assert own_scheme("bahdanau") == DEFAULTS and own_scheme("luong_concat") == "Luong et al. §4.1"
    own = {"bahdanau": DEFAULTS}
    assert verdict({"bahdanau": {DEFAULTS: [0.8, 0.9], "x": [1.0, 0.9]}}, own) == (
        "Lowest validation loss after these updates: `bahdanau`: its own scheme ended lowest (PyTorch defaults).")
    assert "not its own scheme (PyTorch defaults) ended lowest (x)" in verdict(
        {"bahdanau": {DEFAULTS: [0.8, 0.9], "x": [0.7, 0.8]}}, own)
