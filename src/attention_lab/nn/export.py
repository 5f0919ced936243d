"""What every task's ONNX export shares: the special ids in meta.json, recurrent layers as single
ONNX GRU / LSTM nodes (opaque ops, so torch.export neither unrolls them over time nor freezes a
length), dynamic axes and their check, and the parity error."""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from torch.export import Dim
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from attention_lab.nn.layers import PackedLSTM

SPECIAL_IDS = {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}


class ExportError(RuntimeError):
    """The exported graphs are unusable or disagree with the torch model."""


@torch.library.custom_op("attention_lab::gru", mutates_args=())
def opaque_gru(
    input: Tensor,
    hx: Tensor,
    params: list[Tensor],
    has_biases: bool,
    num_layers: int,
    dropout: float,
    train: bool,
    bidirectional: bool,
    batch_first: bool,
) -> tuple[Tensor, Tensor]:
    """aten.gru.input behind an opaque op: torch.export would unroll nn.GRU over time and freeze the
    length."""
    return torch._VF.gru(
        input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first
    )


@opaque_gru.register_fake
def _(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    hidden = hx.shape[2] * (2 if bidirectional else 1)
    return input.new_empty(*input.shape[:2], hidden), hx.new_empty(hx.shape)


def _opaque_gru_forward(
    self: nn.GRU, input: Tensor, hx: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    if hx is None:
        batch = input.shape[0] if self.batch_first else input.shape[1]
        hx = input.new_zeros(
            self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size
        )
    # aten.gru.input's positional order: ..., num_layers, dropout=0.0, train=False, bidirectional,
    # batch_first
    return opaque_gru(
        input,
        hx,
        list(self._flat_weights),
        self.bias,
        self.num_layers,
        0.0,
        False,
        self.bidirectional,
        self.batch_first,
    )


@torch.library.custom_op("attention_lab::lstm", mutates_args=())
def opaque_lstm(
    input: Tensor,
    hx: list[Tensor],
    params: list[Tensor],
    has_biases: bool,
    num_layers: int,
    bidirectional: bool,
    batch_first: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    """aten.lstm.input behind an opaque op, as opaque_gru: torch.export would unroll nn.LSTM over
    time."""
    # aten.lstm.input's positional order: ..., num_layers, dropout=0.0, train=False, bidirectional,
    # batch_first
    return torch._VF.lstm(
        input, hx, params, has_biases, num_layers, 0.0, False, bidirectional, batch_first
    )


@opaque_lstm.register_fake
def _(input, hx, params, has_biases, num_layers, bidirectional, batch_first):
    hidden = hx[0].shape[2] * (2 if bidirectional else 1)
    return (
        input.new_empty(*input.shape[:2], hidden),
        hx[0].new_empty(hx[0].shape),
        hx[1].new_empty(hx[1].shape),
    )


def _opaque_lstm_forward(self: nn.LSTM, input: Tensor, hx: tuple[Tensor, Tensor] | None = None):
    if hx is None:
        batch = input.shape[0] if self.batch_first else input.shape[1]
        zeros = input.new_zeros(
            self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size
        )
        hx = (zeros, zeros)
    out, h, c = opaque_lstm(
        input,
        list(hx),
        list(self._flat_weights),
        self.bias,
        self.num_layers,
        self.bidirectional,
        self.batch_first,
    )
    return out, (h, c)


def onnx_lstm(
    input, hx, params, has_biases: bool, num_layers: int, bidirectional: bool, batch_first: bool
):
    """opaque_lstm as ONNX LSTM nodes (onnxscript's own translation of aten.lstm)."""
    from onnxscript.function_libs.torch_lib.ops.core import aten_lstm

    # aten.lstm.input's positional order: ..., num_layers, dropout=0.0, train=False, bidirectional,
    # batch_first
    return aten_lstm(
        input, hx, params, has_biases, num_layers, 0.0, False, bidirectional, batch_first
    )


@torch.library.custom_op("attention_lab::packed_lstm", mutates_args=())
def packed_lstm(
    input: Tensor, lengths: Tensor, h0: Tensor, c0: Tensor, params: list[Tensor], num_layers: int
) -> tuple[Tensor, Tensor, Tensor]:
    """PackedLSTM.forward behind an opaque op: torch.export cannot trace pack_padded_sequence."""
    packed = pack_padded_sequence(input, lengths.cpu(), batch_first=True, enforce_sorted=False)
    order, undo = packed.sorted_indices, packed.unsorted_indices
    # aten.lstm.data's positional order: ..., params, has_biases, num_layers, dropout=0.0,
    # train=False, bidirectional=False
    data, h, c = torch._VF.lstm(
        packed.data,
        packed.batch_sizes,
        (h0[:, order], c0[:, order]),
        params,
        len(params) == 4 * num_layers,
        num_layers,
        0.0,
        False,
        False,
    )
    out = pad_packed_sequence(
        PackedSequence(data, packed.batch_sizes, order, undo),
        batch_first=True,
        total_length=input.shape[1],
    )[0]
    # (B, S, H) zero past each length, (L, B, H) x 2 at each length
    return out, h[:, undo], c[:, undo]


@packed_lstm.register_fake
def _(input, lengths, h0, c0, params, num_layers):
    return (
        input.new_empty(*input.shape[:2], h0.shape[2]),
        h0.new_empty(h0.shape),
        c0.new_empty(c0.shape),
    )


def _opaque_packed_lstm_forward(
    self: PackedLSTM, x: Tensor, lengths: Tensor, state: tuple[Tensor, Tensor] | None = None
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    if state is None:
        zeros = x.new_zeros(self.num_layers, x.shape[0], self.hidden_size)
        state = (zeros, zeros)
    out, h, c = packed_lstm(x, lengths, *state, list(self._flat_weights), self.num_layers)
    return out, (h, c)


def onnx_packed_lstm(input, lengths, h0, c0, params, num_layers: int):
    """packed_lstm as one ONNX LSTM node per layer; sequence_lens stops each sequence at its own
    length."""
    from onnxscript import INT32
    from onnxscript import opset18 as op

    hidden = h0.shape[2]
    # torch [i, f, g, o] -> ONNX [i, o, f, c]
    gates = [k * hidden + j for k in (0, 3, 1, 2) for j in range(hidden)]

    def iofc(w):  # (4H, ...) rows regrouped in ONNX gate order; folded into the weights at export
        return op.Gather(w, gates, axis=0)

    # (S, B, E), (B,) int32
    x, seq_lens = op.Transpose(input, perm=[1, 0, 2]), op.Cast(lengths, to=INT32.dtype)
    per_layer, hs, cs = len(params) // num_layers, [], []
    for layer in range(num_layers):
        # W_ih (4H, E), W_hh (4H, H)[, b_ih, b_hh (4H,)]
        w = params[layer * per_layer : (layer + 1) * per_layer]
        bias = (
            [op.Unsqueeze(op.Concat(iofc(w[2]), iofc(w[3]), axis=0), [0])]
            if per_layer == 4
            else [None]
        )
        # (S, 1, B, H), (1, B, H) x 2
        y, y_h, y_c = op.LSTM(
            x,
            op.Unsqueeze(iofc(w[0]), [0]),
            op.Unsqueeze(iofc(w[1]), [0]),
            *bias,
            seq_lens,
            op.Slice(h0, [layer], [layer + 1], axes=[0]),
            op.Slice(c0, [layer], [layer + 1], axes=[0]),
            hidden_size=hidden,
        )
        x = op.Squeeze(y, [1])  # (S, B, H)
        hs.append(y_h)
        cs.append(y_c)
    return op.Transpose(x, perm=[1, 0, 2]), op.Concat(*hs, axis=0), op.Concat(*cs, axis=0)


@contextlib.contextmanager
def onnx_friendly(model: nn.Module) -> Iterator[dict]:
    """Route nn.GRU, nn.LSTM and PackedLSTM through opaque ops that become ONNX GRU / LSTM nodes
    while exporting."""
    from onnxscript.function_libs.torch_lib.ops.core import aten_gru

    patched = []
    for m in model.modules():
        forward = {
            nn.GRU: _opaque_gru_forward,
            nn.LSTM: _opaque_lstm_forward,
            PackedLSTM: _opaque_packed_lstm_forward,
        }.get(type(m))
        if forward is not None:
            m.forward = types.MethodType(forward, m)
            patched.append(m)
    try:
        yield {
            torch.ops.attention_lab.gru.default: aten_gru,
            torch.ops.attention_lab.lstm.default: onnx_lstm,
            torch.ops.attention_lab.packed_lstm.default: onnx_packed_lstm,
        }
    finally:
        for m in patched:
            del m.forward


def all_dynamic(t: Tensor) -> dict[int, object]:
    """Dim.AUTO on every axis: batch and lengths stay symbolic, sizes fixed by the weights get
    specialized."""
    return {axis: Dim.AUTO for axis in range(t.dim())}


def check_dynamic(path: Path, axes: dict[str, list[int]]) -> None:
    """Fail if an axis that must vary (batch, lengths) was frozen to the example's size."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    dims = {i.name: i.type.tensor_type.shape.dim for i in graph.input}
    frozen = [
        f"{name}[{a}]"
        for name, want in axes.items()
        for a in want
        if dims[name][a].HasField("dim_value")
    ]
    if frozen:
        raise ExportError(
            f"{path}: axes {frozen} were frozen to the example size; the graph would not accept "
            "other batch sizes or lengths"
        )


def max_diff(a, b) -> float:
    """Max abs difference over pairs of arrays; inf when a pair's shapes differ."""
    worst = 0.0
    for x, y in zip(a, b):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        worst = max(
            worst, float(np.max(np.abs(x - y), initial=0.0)) if x.shape == y.shape else float("inf")
        )
    return worst


class DecoderStepGraph(nn.Module):
    """One decode_step with log-softmax: (prev, state, memory, src_mask) -> (logits, log_probs,
    *state, attn)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(
        self, prev: Tensor, state: tuple[Tensor, ...], memory: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, ...]:
        # (B, V), .., (B, S)
        logits, new_state, attn = self.model.decode_step(prev, state, memory, src_mask)
        return (logits, torch.log_softmax(logits, -1), *new_state, attn)
