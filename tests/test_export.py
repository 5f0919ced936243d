"""export.py: encoder + decoder-step ONNX graphs per family, parity with torch on unseen batch sizes and lengths."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf
from torch.export import Dim

from attention_lab.core.export import onnx_friendly
from attention_lab.core.layers import PackedLSTM
from attention_lab.translate.export import check_parity, export_model

TINY = {
    "seq2seq_gru": {"emb_dim": 16, "hidden_dim": 24, "maxout_dim": 12},
    "bahdanau": {"emb_dim": 16, "enc_hidden_dim": 12, "dec_hidden_dim": 20, "attn_dim": 18, "maxout_dim": 14},
    "transformer": {"d_model": 16, "heads": 2, "enc_layers": 2, "dec_layers": 2, "d_ff": 32},
    **{family: {"emb_dim": 16, "hidden_dim": 24, "layers": 2}
       for family in ("seq2seq_lstm", "luong_dot", "luong_general", "luong_concat", "luong_local_m", "luong_local_p")},
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def tiny_model(family: str, vocab_size: int = 50, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = OmegaConf.load(f"conf/model/{family}.yaml")
    return instantiate(cfg, vocab_size=vocab_size, pad_id=0, **TINY[family]).eval()


@pytest.mark.parametrize("family", sorted(TINY))
def test_export_parity(family, tmp_path):
    model = tiny_model(family)
    paths = export_model(model, tmp_path, family, max_len_ratio=1.5)
    for name in ("encoder", "decoder_step"):
        onnx.checker.check_model(str(paths[name]))
        assert (tmp_path / f"{name}.onnx.data").is_file()
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["family"] == family and meta["vocab_size"] == 50 and meta["eos_id"] == 2
    assert meta["has_attention"] == model.has_attention and len(meta["state_inputs"]) == len(meta["state_outputs"])

    cases = [[1], [2, 9], [13, 1, 5, 3, 8, 6]]     # batch 1 and 6, lengths 1..13: none is the export example
    parity = check_parity(model, tmp_path, cases=cases, max_len_ratio=1.5)
    assert parity == json.loads((tmp_path / "parity.json").read_text())
    diff = parity["max_abs_diff"]
    assert diff["logits"] <= 1e-4 and diff["attn"] <= 1e-4 and diff["memory"] <= 1e-4, diff
    assert parity["greedy_identical"] and parity["beam_identical"] and parity["ok"]
    assert [c["batch"] for c in parity["cases"]] == [1, 2, 6]
    assert any(sum(c["greedy_lengths"]) > 0 for c in parity["cases"])


class PackedLSTMGraph(torch.nn.Module):
    """(x (B, S, 5), mask (B, S)) -> outputs (B, S, 7), h_n, c_n (2, B, 7) of a 2-layer PackedLSTM."""

    def __init__(self):
        super().__init__()
        self.rnn = PackedLSTM(5, 7, 2, batch_first=True)

    def forward(self, x, mask):
        outputs, (h, c) = self.rnn(x, mask.sum(1))
        return outputs, h, c


def test_packed_lstm_exports_as_lstm_with_sequence_lens(tmp_path):
    """ONNX LSTM sequence_lens == packed sequences: zero outputs past each length, final state at each length."""
    torch.manual_seed(0)
    module = PackedLSTMGraph().eval()
    lengths = torch.tensor([6, 3, 5, 2])
    x, mask = torch.randn(4, 6, 5), torch.arange(6) < lengths[:, None]
    path = tmp_path / "lstm.onnx"
    with onnx_friendly(module) as table:
        torch.onnx.export(module, (x, mask), str(path), dynamo=True, opset_version=20, input_names=["x", "mask"],
                          output_names=["outputs", "h", "c"], custom_translation_table=table,
                          dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO}, {0: Dim.AUTO, 1: Dim.AUTO}), verbose=False)
    assert "forward" not in vars(module.rnn)   # the patch is undone
    graph = onnx.load(str(path)).graph
    assert [n.op_type for n in graph.node].count("LSTM") == 2
    assert all(len(n.input) >= 5 and n.input[4] for n in graph.node if n.op_type == "LSTM")   # sequence_lens wired
    dims = {i.name: i.type.tensor_type.shape.dim for i in graph.input}
    assert not [d for name in ("x", "mask") for d in dims[name][:2] if d.HasField("dim_value")]   # batch, length

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for lens in ([9, 1, 4], [3]):
        lengths = torch.tensor(lens)
        x, mask = torch.randn(len(lens), max(lens), 5), torch.arange(max(lens)) < lengths[:, None]
        with torch.inference_mode():
            expected = [t.numpy() for t in module(x, mask)]
        got = session.run(None, {"x": x.numpy(), "mask": mask.numpy()})
        for want, have in zip(expected, got):
            assert want.shape == have.shape
            np.testing.assert_allclose(have, want, atol=1e-5, rtol=0)
        assert all(np.all(got[0][b, n:] == 0) for b, n in enumerate(lens))


def test_parity_failure_is_reported(tmp_path):
    model = tiny_model("bahdanau")
    export_model(model, tmp_path, "bahdanau")
    with torch.no_grad():
        model.output.W_o.bias.add_(torch.randn_like(model.output.W_o.bias))   # torch drifts from the graph
    parity = check_parity(model, tmp_path, cases=[[4, 2]])
    assert not parity["ok"] and parity["max_abs_diff"]["logits"] > 1e-3


@pytest.mark.slow
def test_export_stage_end_to_end(project):
    """prepare -> tokenize -> train (1 tiny epoch) -> export stage -> a self-contained serving folder."""
    from attention_lab.serving import OnnxTranslator
    from attention_lab.stages import export, prepare, tokenize, train

    prepare.main(["data.n_train=120", "data.n_valid=20"])
    tokenize.main(["data.n_train=120", "tokenize.vocab_size=200"])
    train.main(["family=bahdanau", "model.emb_dim=16", "model.enc_hidden_dim=16", "model.dec_hidden_dim=32",
                "model.attn_dim=16", "model.maxout_dim=16", "data.n_train=120", "data.n_valid=20",
                "train.val_bleu_sentences=5", "train.batch_size=32", "train.max_epochs=1"])
    parity = export.main(["family=bahdanau"])
    out = project / "models" / "bahdanau" / "onnx"
    assert parity["ok"] and json.loads((out / "parity.json").read_text()) == parity
    assert {p.name for p in out.iterdir()} >= {"encoder.onnx", "encoder.onnx.data", "decoder_step.onnx",
                                               "decoder_step.onnx.data", "meta.json", "tokenizer.json"}
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".onnx")]   # atomic: no leftovers
    result = OnnxTranslator(out).translate(["the old man reads a book"], beam=2)[0]
    assert result.source_words == ["the", "old", "man", "reads", "a", "book"]


def test_export_stage_needs_a_checkpoint(project):
    from attention_lab.stages import export

    with pytest.raises(SystemExit, match="train_translate@bahdanau"):
        export.main(["family=bahdanau"])
