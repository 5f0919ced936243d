"""models/: the encode / decode_step contract, padding invariance, stepwise == parallel, ONNX round trip."""

from pathlib import Path

import numpy as np
import pytest
import torch
from hydra.utils import instantiate

from attention_lab.core.config import load_config
from attention_lab.core.export import onnx_friendly
from attention_lab.core.seq2seq import Seq2Seq
from attention_lab.translate.models.bahdanau import RNNSearch
from attention_lab.translate.models.luong import LuongNMT
from attention_lab.translate.models.seq2seq import LSTMEncoder, LSTMEncoderDecoder, RNNEncoderDecoder
from attention_lab.translate.models.transformer import Transformer

V = 23
ROOT = Path(__file__).resolve().parents[1]
LUONG = {"emb_dim": 8, "hidden_dim": 12, "layers": 2}
TINY = {
    "seq2seq_lstm": lambda: LSTMEncoderDecoder(V, emb_dim=8, hidden_dim=12, layers=2),
    "seq2seq_gru": lambda: RNNEncoderDecoder(V, emb_dim=8, hidden_dim=12, maxout_dim=6),
    "bahdanau": lambda: RNNSearch(V, emb_dim=8, enc_hidden_dim=6, dec_hidden_dim=10, attn_dim=7, maxout_dim=6),
    **{f"luong_{a}": (lambda a=a: LuongNMT(V, attention=a, window=2, **LUONG))
       for a in ("dot", "general", "concat", "local_m", "local_p")},
    "luong_general_no_feeding": lambda: LuongNMT(V, attention="general", input_feeding=False, **LUONG),
    "transformer": lambda: Transformer(V, d_model=16, heads=2, enc_layers=2, dec_layers=2, d_ff=24),
}
NO_ATTENTION = {"seq2seq_gru", "seq2seq_lstm"}
FAMILIES = [f for f in TINY if (ROOT / "conf" / "model" / f"{f}.yaml").is_file()]


def tiny(family: str) -> Seq2Seq:
    torch.manual_seed(0)
    return TINY[family]().eval()


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


@pytest.mark.parametrize("family", sorted(TINY))
def test_contract_shapes(family):
    model = tiny(family)
    src, src_mask = batch([5, 3, 4])
    tgt_in, _ = batch([6, 6, 6], generator_seed=1)
    memory, state = model.encode(src, src_mask)
    assert memory.dim() == 3 and memory.shape[0] == 3
    assert isinstance(state, tuple) and all(s.shape[0] == 3 for s in state)
    logits, state, attn = model.decode_step(tgt_in[:, 0], state, memory, src_mask)
    assert logits.shape == (3, V) and attn.shape == (3, 5) and attn.dtype == torch.float32
    reordered = tuple(s.index_select(0, torch.tensor([2, 2, 0])) for s in state)  # what beam search does
    model.decode_step(tgt_in[:, 1], reordered, memory.index_select(0, torch.tensor([2, 2, 0])), src_mask[[2, 2, 0]])
    logits, attn = model(src, src_mask, tgt_in)
    assert logits.shape == (3, 6, V) and attn.shape == (3, 6, 5)
    if model.has_attention:
        if not family.startswith("luong_local"):  # local-p's Gaussian scales a distribution; local-m's window moves on
            torch.testing.assert_close(attn.sum(-1), torch.ones(3, 6))
        assert (attn.masked_fill(src_mask.unsqueeze(1), 0) == 0).all()  # padded source positions: exactly zero
    else:
        assert (attn == 0).all()


@pytest.mark.parametrize("family", sorted(TINY))
def test_padding_does_not_change_results(family):
    model = tiny(family)
    src, src_mask = batch([4, 9, 6])
    tgt_in, _ = batch([5, 8, 7], generator_seed=1)
    with torch.no_grad():
        memory, _ = model.encode(src, src_mask)
        logits, attn = model(src, src_mask, tgt_in)
        for b, (s_len, t_len) in enumerate([(4, 5), (9, 8), (6, 7)]):
            one_src, one_mask, one_tgt = src[b:b + 1, :s_len], src_mask[b:b + 1, :s_len], tgt_in[b:b + 1, :t_len]
            one_memory, _ = model.encode(one_src, one_mask)
            if one_memory.shape[1] == s_len:  # per-position memory: compare the real positions
                torch.testing.assert_close(memory[b:b + 1, :s_len], one_memory, atol=1e-5, rtol=1e-5)
            else:
                torch.testing.assert_close(memory[b:b + 1], one_memory, atol=1e-5, rtol=1e-5)
            one_logits, one_attn = model(one_src, one_mask, one_tgt)
            torch.testing.assert_close(logits[b:b + 1, :t_len], one_logits, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(attn[b:b + 1, :t_len, :s_len], one_attn, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", sorted(TINY))
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
    assert fed.rnn.input_size == LUONG["emb_dim"] + LUONG["hidden_dim"]  # [E y_{t-1}; h̃_{t-1}] (Luong §3.3)
    assert plain.rnn.input_size == LUONG["emb_dim"]
    src, src_mask = batch([5, 3])
    with torch.no_grad():
        memory, state = fed.encode(src, src_mask)
        _, state, _ = fed.decode_step(torch.tensor([1, 1]), state, memory, src_mask)
        h_tilde = state[2]
        _, again, _ = fed.decode_step(torch.tensor([4, 4]), state, memory, src_mask)
        _, zeroed, _ = fed.decode_step(torch.tensor([4, 4]), (*state[:2], torch.zeros_like(h_tilde), state[3]),
                                       memory, src_mask)
    assert h_tilde.abs().sum() > 0 and not torch.allclose(again[0], zeroed[0])  # h̃_{t-1} reaches the LSTM


@pytest.mark.parametrize("reverse", [True, False])
def test_source_reversal_reads_within_each_length_and_keeps_padding(reverse):
    torch.manual_seed(0)
    encoder = LSTMEncoder(V, 8, 12, 2, 0.0, reverse, pad_id=0).eval()
    src, src_mask = batch([5, 3])
    with torch.no_grad():
        states, h, _ = encoder(src, src_mask)
        one_states, one_h, _ = encoder(src[1:, :3], src_mask[1:, :3])
        flipped = encoder.rnn(encoder.embed(src[1:, :3].flip(1)), torch.tensor([3]))[0].flip(1)  # reads w3 w2 w1
        straight = encoder.rnn(encoder.embed(src[1:, :3]), torch.tensor([3]))[0]
    torch.testing.assert_close(states[1:, :3], one_states)  # padding never leaks into the shorter sentence
    torch.testing.assert_close(h[1:], one_h)
    assert (states[1, 3:] == 0).all()  # padded positions stay empty
    torch.testing.assert_close(one_states, flipped if reverse else straight)  # position s = after reading word s


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
    assert not torch.allclose(mixed[:, 1:], teacher[:, 1:])  # later inputs are the model's own samples


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


@pytest.mark.parametrize("family", sorted(TINY))
def test_training_steps_reduce_the_loss(family):
    model = tiny(family).train()
    src, src_mask = batch([6, 5, 6, 3])
    tgt, _ = batch([7, 7, 7, 7], generator_seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(50):
        logits, _ = model(src, src_mask, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.7 * losses[0]


@pytest.mark.parametrize("family", sorted(TINY))
def test_onnx_round_trip(family, tmp_path):
    """Encoder and decoder-step graphs with dynamic batch, source and history length agree with torch in onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    model = tiny(family)

    class Encoder(torch.nn.Module):
        def forward(self, src, src_mask):
            memory, state = model.encode(src, src_mask)
            return memory, *state

    class DecoderStep(torch.nn.Module):
        def forward(self, prev, memory, src_mask, *state):
            logits, state, attn = model.decode_step(prev, state, memory, src_mask)
            return logits, attn, *state

    batch_dim, src_len = torch.export.Dim("batch", min=1), torch.export.Dim("src_len", min=1)
    src, src_mask = batch([4, 3])  # example batch and lengths >= 2, or the axis freezes at 1
    with torch.no_grad():
        memory, state = model.encode(src, src_mask)
        _, state, _ = model.decode_step(torch.tensor([1, 1]), state, memory, src_mask)
    names = [f"state{i}" for i in range(len(state))]
    memory_dims = {0: batch_dim, 1: src_len} if memory.shape[1] > 1 else {0: batch_dim}
    history = torch.export.Dim("history", min=1)  # the Transformer's caches grow by one position per step
    state_dims = tuple({0: batch_dim, 1: history} if family == "transformer" else {0: batch_dim} for s in state)
    with onnx_friendly(model) as table:  # GRU and packed LSTM as single ONNX nodes
        torch.onnx.export(Encoder().eval(), (src, src_mask), tmp_path / "encoder.onnx", dynamo=True,
                          input_names=["src", "src_mask"], output_names=["memory", *names],
                          dynamic_shapes={"src": {0: batch_dim, 1: src_len}, "src_mask": {0: batch_dim, 1: src_len}},
                          custom_translation_table=table)
        torch.onnx.export(DecoderStep().eval(), (torch.tensor([5, 6]), memory, src_mask, *state),
                          tmp_path / "decoder_step.onnx", dynamo=True,
                          input_names=["prev", "memory", "src_mask", *names],
                          output_names=["logits", "attn", *[f"new_{n}" for n in names]],
                          dynamic_shapes={"prev": {0: batch_dim}, "memory": memory_dims, "src_mask": {0: batch_dim, 1: src_len},
                                          "state": state_dims}, custom_translation_table=table)

    src, src_mask = batch([7, 2, 5], generator_seed=3)  # another batch size and source length
    encoder = ort.InferenceSession(str(tmp_path / "encoder.onnx"), providers=["CPUExecutionProvider"])
    step = ort.InferenceSession(str(tmp_path / "decoder_step.onnx"), providers=["CPUExecutionProvider"])
    memory, *state = encoder.run(None, {"src": src.numpy(), "src_mask": src_mask.numpy()})
    with torch.no_grad():
        torch_memory, torch_state = model.encode(src, src_mask)
        np.testing.assert_allclose(memory, torch_memory.numpy(), atol=1e-4)
        for prev in ([1, 1, 1], [5, 9, 2], [4, 7, 2]):
            prev = torch.tensor(prev)
            feeds = {"prev": prev.numpy(), "memory": memory, "src_mask": src_mask.numpy(), **dict(zip(names, state))}
            logits, attn, *state = step.run(None, feeds)
            torch_logits, torch_state, torch_attn = model.decode_step(prev, torch_state, torch_memory, src_mask)
            np.testing.assert_allclose(logits, torch_logits.numpy(), atol=1e-4)
            np.testing.assert_allclose(attn, torch_attn.numpy(), atol=1e-4)
            for ours, theirs in zip(state, torch_state):
                np.testing.assert_allclose(ours, theirs.numpy(), atol=1e-4)


@pytest.mark.parametrize("cls", [LSTMEncoderDecoder, LuongNMT])
def test_lstm_families_learn_to_copy_through_the_encoder(cls):
    """The source reaches the decoder (Sutskever: only through the final (h, c)): a copy task is learned."""
    torch.manual_seed(0)
    model = cls(V, emb_dim=16, hidden_dim=48, layers=2, dropout=0.0).train()
    src, src_mask = batch([6] * 32, generator_seed=2)
    tgt = torch.cat([torch.ones(32, 1, dtype=torch.long), src, torch.full((32, 1), 2)], 1)  # bos x eos
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(200):
        logits, _ = model(src, src_mask, tgt[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tgt[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.5  # a decoder that ignores the source cannot beat log(19) ≈ 2.9 on random tokens
