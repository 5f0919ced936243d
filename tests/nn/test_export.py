"""export.py (core): recurrent layers as single ONNX LSTM nodes; a packed LSTM keeps its lengths
(sequence_lens)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

from attention_lab.nn.export import onnx_friendly
from attention_lab.nn.layers import PackedLSTM

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class PackedLSTMGraph(torch.nn.Module):
    """(x (B, S, 5), mask (B, S)) -> outputs (B, S, 7), h_n, c_n (2, B, 7) of a 2-layer
    PackedLSTM."""

    def __init__(self):
        super().__init__()
        self.rnn = PackedLSTM(5, 7, 2, batch_first=True)

    def forward(self, x, mask):
        outputs, (h, c) = self.rnn(x, mask.sum(1))
        return outputs, h, c


def test_packed_lstm_exports_as_lstm_with_sequence_lens(tmp_path):
    """ONNX LSTM sequence_lens == packed sequences: zero outputs past each length, final state at
    each length."""
    torch.manual_seed(0)
    module = PackedLSTMGraph().eval()
    lengths = torch.tensor([6, 3, 5, 2])
    x, mask = torch.randn(4, 6, 5), torch.arange(6) < lengths[:, None]
    path = tmp_path / "lstm.onnx"
    with onnx_friendly(module) as table:
        torch.onnx.export(
            module,
            (x, mask),
            str(path),
            dynamo=True,
            opset_version=20,
            input_names=["x", "mask"],
            output_names=["outputs", "h", "c"],
            custom_translation_table=table,
            dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO}, {0: Dim.AUTO, 1: Dim.AUTO}),
            verbose=False,
        )
    assert "forward" not in vars(module.rnn)  # the patch is undone
    graph = onnx.load(str(path)).graph
    assert [n.op_type for n in graph.node].count("LSTM") == 2
    # sequence_lens wired
    assert all(len(n.input) >= 5 and n.input[4] for n in graph.node if n.op_type == "LSTM")
    dims = {i.name: i.type.tensor_type.shape.dim for i in graph.input}
    # batch, length
    assert not [d for name in ("x", "mask") for d in dims[name][:2] if d.HasField("dim_value")]

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
