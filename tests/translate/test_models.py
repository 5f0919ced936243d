"""models/: the encode / decode_step contract, padding invariance, stepwise == parallel, ONNX round
trip."""

import json

import numpy as np
import onnx
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from attention_lab.core.config import load_config
from attention_lab.infer.decoding import pad_batch
from attention_lab.infer.runtime import (
    DECODER_FILE,
    ENCODER_FILE,
    META_FILE,
    make_session,
    ort_step,
)
from attention_lab.nn.decoder_step import torch_encode, torch_step
from attention_lab.nn.export import max_diff
from attention_lab.translate.export import check_parity, export_model
from attention_lab.translate.models.bahdanau import RNNSearch
from attention_lab.translate.models.luong import LuongNMT
from attention_lab.translate.models.seq2seq import LSTMEncoder, LSTMEncoderDecoder
from attention_lab.translate.seq2seq import Seq2Seq
from attention_lab.translate.serve import ort_encode
from tests.conftest import ROOT
from tests.tiny_models import TINY, TRANSLATE, tiny_model

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out

V = 23
# name -> (family, kwargs over TINY): every translate family, local windows of 2 words (narrower
# than the test sentences, so padding meets the window's edges), Luong without input feeding and
# Bahdanau queried with the new state.
MODELS = {
    family: (family, {"window": 2} if family.startswith("luong_") else {}) for family in TRANSLATE
}
MODELS["luong_general_no_feeding"] = ("luong_general", {"input_feeding": False})
MODELS["bahdanau_new_query"] = ("bahdanau", {"query": "new"})
NO_ATTENTION = {"seq2seq_gru", "seq2seq_lstm"}
FAMILIES = [f for f in MODELS if (ROOT / "conf" / "model" / f"{f}.yaml").is_file()]


def tiny(name: str) -> Seq2Seq:
    family, kwargs = MODELS[name]
    return tiny_model(family, V, **kwargs)


def batch(lengths: list[int], generator_seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids (>= 4) right-padded with 0, and the True = real mask."""
    g = torch.Generator().manual_seed(generator_seed)
    ids = torch.randint(4, V, (len(lengths), max(lengths)), generator=g)
    mask = torch.arange(max(lengths)).unsqueeze(0) < torch.tensor(lengths).unsqueeze(1)
    return ids.masked_fill(~mask, 0), mask


@pytest.mark.parametrize("family", FAMILIES)
def test_config_instantiates_the_family(family):
    model = instantiate(load_config(family=family, root=ROOT).model, vocab_size=V, pad_id=0)
    assert isinstance(model, Seq2Seq) and model.vocab_size == V and model.pad_id == 0
    assert model.has_attention == (family not in NO_ATTENTION)
    assert all(p.dtype == torch.float32 for p in model.parameters())


@pytest.mark.parametrize("family", sorted(MODELS))
def test_contract_shapes(family):
    model = tiny(family)
    src, src_mask = batch([5, 3, 4])
    tgt_in, _ = batch([6, 6, 6], generator_seed=1)
    memory, state = model.encode(src, src_mask)
    assert memory.dim() == 3 and memory.shape[0] == 3
    assert isinstance(state, tuple) and all(s.shape[0] == 3 for s in state)
    logits, state, attn = model.decode_step(tgt_in[:, 0], state, memory, src_mask)
    assert logits.shape == (3, V) and attn.shape == (3, 5) and attn.dtype == torch.float32
    # what beam search does
    reordered = tuple(s.index_select(0, torch.tensor([2, 2, 0])) for s in state)
    model.decode_step(
        tgt_in[:, 1],
        reordered,
        memory.index_select(0, torch.tensor([2, 2, 0])),
        src_mask[[2, 2, 0]],
    )
    logits, attn = model(src, src_mask, tgt_in)
    assert logits.shape == (3, 6, V) and attn.shape == (3, 6, 5)
    if model.has_attention:
        # local-p's Gaussian scales a distribution; local-m's window moves on
        if not family.startswith("luong_local"):
            torch.testing.assert_close(attn.sum(-1), torch.ones(3, 6))
        # padded source positions: exactly zero
        assert (attn.masked_fill(src_mask.unsqueeze(1), 0) == 0).all()
    else:
        assert (attn == 0).all()


@pytest.mark.parametrize("family", sorted(MODELS))
def test_padding_does_not_change_results(family):
    model = tiny(family)
    src, src_mask = batch([4, 9, 6])
    tgt_in, _ = batch([5, 8, 7], generator_seed=1)
    with torch.no_grad():
        memory, _ = model.encode(src, src_mask)
        logits, attn = model(src, src_mask, tgt_in)
        for b, (s_len, t_len) in enumerate([(4, 5), (9, 8), (6, 7)]):
            one_src, one_mask, one_tgt = (
                src[b : b + 1, :s_len],
                src_mask[b : b + 1, :s_len],
                tgt_in[b : b + 1, :t_len],
            )
            one_memory, _ = model.encode(one_src, one_mask)
            if one_memory.shape[1] == s_len:  # per-position memory: compare the real positions
                torch.testing.assert_close(
                    memory[b : b + 1, :s_len], one_memory, atol=1e-5, rtol=1e-5
                )
            else:
                torch.testing.assert_close(memory[b : b + 1], one_memory, atol=1e-5, rtol=1e-5)
            one_logits, one_attn = model(one_src, one_mask, one_tgt)
            torch.testing.assert_close(logits[b : b + 1, :t_len], one_logits, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(
                attn[b : b + 1, :t_len, :s_len], one_attn, atol=1e-5, rtol=1e-5
            )


@pytest.mark.parametrize("family", sorted(MODELS))
def test_forward_equals_looping_decode_step(family):
    model = tiny(family)
    src, src_mask = batch([7, 4])
    tgt_in, _ = batch([6, 6], generator_seed=1)
    with torch.no_grad():
        logits, attn = model(src, src_mask, tgt_in)
        memory, state = model.encode(src, src_mask)
        for t in range(tgt_in.shape[1]):
            step_logits, state, step_attn = model.decode_step(tgt_in[:, t], state, memory, src_mask)
            torch.testing.assert_close(step_logits, logits[:, t], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(step_attn, attn[:, t], atol=1e-5, rtol=1e-5)


def test_input_feeding_widens_the_decoder_input():
    fed, plain = tiny("luong_general"), tiny("luong_general_no_feeding")
    sizes = TINY["luong_general"]
    # [E y_{t-1}; h̃_{t-1}] (Luong §3.3)
    assert fed.rnn.input_size == sizes["emb_dim"] + sizes["hidden_dim"]
    assert plain.rnn.input_size == sizes["emb_dim"]
    src, src_mask = batch([5, 3])
    with torch.no_grad():
        memory, state = fed.encode(src, src_mask)
        _, state, _ = fed.decode_step(torch.tensor([1, 1]), state, memory, src_mask)
        h_tilde = state[2]
        _, again, _ = fed.decode_step(torch.tensor([4, 4]), state, memory, src_mask)
        _, zeroed, _ = fed.decode_step(
            torch.tensor([4, 4]),
            (*state[:2], torch.zeros_like(h_tilde), state[3]),
            memory,
            src_mask,
        )
    # h̃_{t-1} reaches the LSTM
    assert h_tilde.abs().sum() > 0 and not torch.allclose(again[0], zeroed[0])


@pytest.mark.parametrize("reverse", [True, False])
def test_source_reversal_reads_within_each_length_and_keeps_padding(reverse):
    torch.manual_seed(0)
    sizes = TINY["seq2seq_lstm"]  # the family's encoder, without dropout
    encoder = LSTMEncoder(
        V,
        sizes["emb_dim"],
        sizes["hidden_dim"],
        sizes["layers"],
        dropout=0.0,
        reverse=reverse,
        pad_id=0,
    ).eval()
    src, src_mask = batch([5, 3])
    with torch.no_grad():
        states, h, _ = encoder(src, src_mask)
        one_states, one_h, _ = encoder(src[1:, :3], src_mask[1:, :3])
        # reads w3 w2 w1
        flipped = encoder.rnn(encoder.embed(src[1:, :3].flip(1)), torch.tensor([3]))[0].flip(1)
        straight = encoder.rnn(encoder.embed(src[1:, :3]), torch.tensor([3]))[0]
    # padding never leaks into the shorter sentence
    torch.testing.assert_close(states[1:, :3], one_states)
    torch.testing.assert_close(h[1:], one_h)
    assert (states[1, 3:] == 0).all()  # padded positions stay empty
    # position s = after reading word s
    torch.testing.assert_close(one_states, flipped if reverse else straight)


def test_sampled_forward_uses_gold_at_ratio_one_and_samples_below():
    model = tiny("luong_general")
    src, src_mask = batch([5, 3])
    tgt_in, _ = batch([6, 6], generator_seed=1)
    with torch.no_grad():
        teacher, _ = model(src, src_mask, tgt_in)
        torch.manual_seed(0)
        gold, _ = model.sampled_forward(src, src_mask, tgt_in, ratio=1.0)
        torch.manual_seed(0)
        mixed, _ = model.sampled_forward(src, src_mask, tgt_in, ratio=0.0)
    torch.testing.assert_close(gold, teacher, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mixed[:, 0], teacher[:, 0])  # the first input is always bos
    # later inputs are the model's own samples
    assert not torch.allclose(mixed[:, 1:], teacher[:, 1:])


def test_transformer_attention_maps():
    model = tiny("transformer")
    src, src_mask = batch([5, 3])
    tgt_in, _ = batch([4, 4], generator_seed=1)
    with torch.no_grad():
        maps = model.attention_maps(src, src_mask, tgt_in)
        _, attn = model(src, src_mask, tgt_in)
    assert [w.shape for w in maps["enc_self"]] == [(2, 2, 5, 5)] * 2
    assert [w.shape for w in maps["dec_self"]] == [(2, 2, 4, 4)] * 2
    assert [w.shape for w in maps["cross"]] == [(2, 2, 4, 5)] * 2
    assert (maps["dec_self"][0].triu(1) == 0).all()  # causal: no position sees a later one
    torch.testing.assert_close(maps["cross"][-1].mean(1), attn)


@pytest.mark.parametrize("family", sorted(MODELS))
def test_training_steps_reduce_the_loss(family):
    model = tiny(family).train()
    src, src_mask = batch([6, 5, 6, 3])
    tgt, _ = batch([7, 7, 7, 7], generator_seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(50):
        logits, _ = model(src, src_mask, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(
            logits.reshape(-1, V), tgt[:, 1:].reshape(-1), ignore_index=0
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


def dynamic_axes(path) -> dict[str, set[int]]:
    """{input name: its axes left symbolic} of an exported graph."""
    graph = onnx.load(str(path), load_external_data=False).graph
    return {
        i.name: {a for a, d in enumerate(i.type.tensor_type.shape.dim) if d.dim_param}
        for i in graph.input
    }


@pytest.mark.parametrize("family", sorted(MODELS))
def test_onnx_round_trip(family, tmp_path):
    """The export stage's path (translate.export): encoder and decoder-step graphs with dynamic
    batch, source and history length agree with torch in onnxruntime on batch sizes and lengths
    unlike the export example."""
    model = tiny(family)
    export_model(model, tmp_path, family)
    encoder, step = dynamic_axes(tmp_path / ENCODER_FILE), dynamic_axes(tmp_path / DECODER_FILE)
    states = sorted(n for n in step if n.startswith("state_"))
    with torch.no_grad():
        # memory (B, S, D), or one vector (B, 1, D)
        per_position = model.encode(*batch([4, 3]))[0].shape[1] > 1
    assert encoder["src"] == encoder["src_mask"] == step["src_mask"] == {0, 1} and step["prev"] == {
        0
    }
    assert step["memory"] >= ({0, 1} if per_position else {0})
    # caches grow
    assert states and all(step[n] >= ({0, 1} if family == "transformer" else {0}) for n in states)

    # encoder, 8 decoder steps, greedy and beam on 3 unseen batches
    parity = check_parity(model, tmp_path, tol=1e-4)
    assert parity["ok"] and parity["greedy_identical"], parity["max_abs_diff"]
    assert all(d <= 1e-4 for d in parity["max_abs_diff"].values()), parity["max_abs_diff"]
    assert {c["batch"] for c in parity["cases"]}.isdisjoint({3})  # the export example's batch size

    # and the decoder state itself, step by step, through the serving adapters (another batch size
    # and length)
    meta = json.loads((tmp_path / META_FILE).read_text())
    src, src_mask = pad_batch([[5, 9, 4, 7, 6, 8, 10], [4, 11], [7, 5, 9, 12, 6]])
    t_state, t_memory = torch_encode(model, src, src_mask)
    o_state, o_memory = ort_encode(make_session(tmp_path / ENCODER_FILE), meta, src, src_mask)
    assert max_diff(t_memory[:1], o_memory[:1]) <= 1e-4 and max_diff(t_state, o_state) <= 1e-4
    t_step, o_step = torch_step(model), ort_step(make_session(tmp_path / DECODER_FILE), meta)
    for prev in ([1, 1, 1], [5, 9, 2], [4, 7, 2]):
        prev = np.array(prev)
        t_out, t_state, t_attn = t_step(prev, t_state, t_memory)
        o_out, o_state, o_attn = o_step(prev, o_state, o_memory)
        assert max_diff([t_out, t_attn, *t_state], [o_out, o_attn, *o_state]) <= 1e-4


@pytest.mark.parametrize("cls", [LSTMEncoderDecoder, LuongNMT])
def test_lstm_families_learn_to_copy_through_the_encoder(cls):
    """The source reaches the decoder (Sutskever: only through the final (h, c)): a copy task is
    learned."""
    torch.manual_seed(0)
    # wider than TINY: room to copy
    model = cls(V, emb_dim=16, hidden_dim=48, layers=2, dropout=0.0).train()
    src, src_mask = batch([6] * 32, generator_seed=2)
    # bos x eos
    tgt = torch.cat([torch.ones(32, 1, dtype=torch.long), src, torch.full((32, 1), 2)], 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(200):
        logits, _ = model(src, src_mask, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    # a decoder that ignores the source cannot beat log(19) ≈ 2.9 on random tokens
    assert loss.item() < 0.5


@pytest.mark.parametrize("family", ["luong_dot", "luong_concat", "luong_local_p"])
def test_luong_initialisation(family):
    """The Luong families as Luong et al. §4.1 start them: every weight (attention's included)
    uniform in [-0.1, 0.1], the word embeddings N(0, 1) with zero padding rows; `init_range: null`
    keeps PyTorch's defaults."""
    torch.manual_seed(0)
    spec = OmegaConf.load(ROOT / "conf" / "model" / f"{family}.yaml")
    model = instantiate(spec, vocab_size=50, pad_id=0)
    tables = (model.embed.weight, model.encoder.embed.weight)
    weights = torch.cat(
        [p.flatten() for p in model.parameters() if all(p is not t for t in tables)]
    )
    assert weights.abs().max() <= 0.1 and weights.abs().max() > 0.099
    assert all(p.abs().max() > 0.09 for p in model.attention.parameters())
    for table in tables:
        assert not table[0].any() and 0.8 < table[1:].std() < 1.2
    torch.manual_seed(0)
    default = instantiate(spec, vocab_size=50, pad_id=0, init_range=None)
    # nn.Linear's bound, 1/sqrt(fan_in)
    assert default.W_s.weight.abs().max() <= spec.hidden_dim**-0.5


def test_sutskever_initialisation_and_clipping():
    """seq2seq_lstm as Sutskever et al. §3.4 train it: the LSTM and output weights uniform in
    [-0.08, 0.08] at start, the word embeddings N(0, 1) with zero padding rows (docs/tasks.md), and
    gradients clipped at norm 5 (params.yaml family_params; an explicit setting, never tuned)."""
    torch.manual_seed(0)
    model = instantiate(
        OmegaConf.load(ROOT / "conf" / "model" / "seq2seq_lstm.yaml"), vocab_size=50, pad_id=0
    )
    tables = (model.embed.weight, model.encoder.embed.weight)
    weights = torch.cat(
        [p.flatten() for p in model.parameters() if all(p is not t for t in tables)]
    )
    assert weights.abs().max() <= 0.08 and weights.abs().max() > 0.07
    for table in tables:
        assert not table[0].any() and 0.8 < table[1:].std() < 1.2
    cfg = load_config(root=ROOT, family="seq2seq_lstm")
    assert cfg.train.clip == 5.0 and "train.clip" in cfg.explicit


def test_bahdanau_initialisation():
    """`init: xavier` starts RNNsearch as Joey NMT does: every weight matrix within Glorot's bound
    (a GRU's per gate: fan_out is a third of its rows), every bias zero, the embeddings N(0, 1) as
    before; `init: torch`, the default, draws exactly what PyTorch's defaults draw."""
    spec = OmegaConf.load(ROOT / "conf" / "model" / "bahdanau.yaml")
    assert spec.init == "torch"
    torch.manual_seed(0)
    model = instantiate(spec, vocab_size=50, pad_id=0, init="xavier")
    for name, p in model.named_parameters():
        if "embed" in name:
            assert not p[0].any() and 0.8 < p[1:].std() < 1.2, name
        elif "bias" in name:
            assert not p.any(), name
        else:
            gates = 3 if "rnn" in name or name.startswith("cell.") else 1
            bound = (6 / (p.shape[1] + p.shape[0] // gates)) ** 0.5
            assert 0.95 * bound < p.abs().max() <= bound, name
    gru = model.encoder.forward_rnn.weight_ih_l0  # (3 × 128, 128): Xavier per gate, √(6 / 256)
    assert gru.abs().max() > 0.9 * (6 / 256) ** 0.5 > 128**-0.5  # wider than PyTorch's U(±1/√H)
    torch.manual_seed(0)
    default = instantiate(spec, vocab_size=50, pad_id=0)
    torch.manual_seed(0)
    plain = instantiate(
        {k: v for k, v in OmegaConf.to_container(spec).items() if k != "init"},
        vocab_size=50,
        pad_id=0,
    )
    assert all(
        torch.equal(a, b)
        for a, b in zip(default.state_dict().values(), plain.state_dict().values())
    )
    with pytest.raises(
        ValueError, match="model.init: expected one of torch, xavier, got 'orthogonal'"
    ):
        RNNSearch(50, init="orthogonal")


def test_bahdanau_query_order():
    """`query: new` asks the attention with the new state s_i (Luong's order), fed the last context:
    the first step's weights then differ from Bahdanau's order, which asks with s_{i-1}; both keep
    the decoder-step contract (above)."""
    torch.manual_seed(0)
    previous = tiny_model("bahdanau", V).eval()
    new = tiny_model("bahdanau", V, query="new").eval()
    new.load_state_dict(previous.state_dict())  # the same parameters: only the order differs
    src, mask = batch([5, 3])
    memory, state = new.encode(src, mask)
    assert len(state) == 2 and not state[1].any()  # (s_0, c_0 = 0)
    prev = torch.full((2,), 1)
    _, (s_new, c_new), alpha_new = new.decode_step(prev, state, memory, mask)
    _, _, alpha_prev = previous.decode_step(prev, state[:1], memory, mask)
    attended, projected = new.attention.unpack_memory(memory)
    expected, _ = new.attention(s_new, attended, attended, mask, projected_keys=projected)
    assert torch.allclose(c_new, expected) and not torch.allclose(alpha_new, alpha_prev)
    with pytest.raises(ValueError, match="model.query: expected one of previous, new, got 'both'"):
        RNNSearch(50, query="both")
