"""ONNX export of a translation model as two graphs (encoder, decoder step) and a torch-vs-onnxruntime parity check.

encoder.onnx:      src (B, S) int64, src_mask (B, S) bool -> memory (B, S', D), state_0 .. state_{n-1}
decoder_step.onnx: prev (B,) int64, state_0 .., memory, src_mask -> logits (B, V), log_probs (B, V),
                   new_state_0 .., attn (B, S)
The folder also gets meta.json (names, ids, defaults) and tokenizer.json, so serving needs nothing else.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import types
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from torch.export import Dim
from torch.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

from attention_lab.decoding import beam_search, greedy, max_decode_len, pad_batch
from attention_lab.models.lstm_seq2seq import PackedLSTM
from attention_lab.search import torch_encode, torch_step
from attention_lab.serving.translator import (
    DECODER_FILE,
    ENCODER_FILE,
    META_FILE,
    TOKENIZER_FILE,
    make_session,
    ort_encode,
    ort_step,
)

SPECIAL_IDS = {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}
EXAMPLE_LENGTHS = [7, 4, 2]   # export example: batch 3, source length 7, 4 decoded steps; all >= 2 and distinct
EXAMPLE_STEPS = 4
PARITY_CASES = [[5], [9, 3], [11, 1, 6, 2, 8]]   # batches and lengths unlike the export example
PARITY_TOL = 1e-3


class ExportError(RuntimeError):
    """The exported graphs are unusable or disagree with the torch model."""


@torch.library.custom_op("attention_lab::gru", mutates_args=())
def opaque_gru(input: Tensor, hx: Tensor, params: list[Tensor], has_biases: bool, num_layers: int, dropout: float,
               train: bool, bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor]:
    """aten.gru.input behind an opaque op: torch.export would unroll nn.GRU over time and freeze the length."""
    return torch._VF.gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first)


@opaque_gru.register_fake
def _(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    hidden = hx.shape[2] * (2 if bidirectional else 1)
    return input.new_empty(*input.shape[:2], hidden), hx.new_empty(hx.shape)


def _opaque_gru_forward(self: nn.GRU, input: Tensor, hx: Tensor | None = None) -> tuple[Tensor, Tensor]:
    if hx is None:
        batch = input.shape[0] if self.batch_first else input.shape[1]
        hx = input.new_zeros(self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)
    return opaque_gru(input, hx, list(self._flat_weights), self.bias, self.num_layers, 0.0, False,
                      self.bidirectional, self.batch_first)


@torch.library.custom_op("attention_lab::lstm", mutates_args=())
def opaque_lstm(input: Tensor, hx: list[Tensor], params: list[Tensor], has_biases: bool, num_layers: int,
                bidirectional: bool, batch_first: bool) -> tuple[Tensor, Tensor, Tensor]:
    """aten.lstm.input behind an opaque op, as opaque_gru: torch.export would unroll nn.LSTM over time."""
    return torch._VF.lstm(input, hx, params, has_biases, num_layers, 0.0, False, bidirectional, batch_first)


@opaque_lstm.register_fake
def _(input, hx, params, has_biases, num_layers, bidirectional, batch_first):
    hidden = hx[0].shape[2] * (2 if bidirectional else 1)
    return input.new_empty(*input.shape[:2], hidden), hx[0].new_empty(hx[0].shape), hx[1].new_empty(hx[1].shape)


def _opaque_lstm_forward(self: nn.LSTM, input: Tensor, hx: tuple[Tensor, Tensor] | None = None):
    if hx is None:
        batch = input.shape[0] if self.batch_first else input.shape[1]
        zeros = input.new_zeros(self.num_layers * (2 if self.bidirectional else 1), batch, self.hidden_size)
        hx = (zeros, zeros)
    out, h, c = opaque_lstm(input, list(hx), list(self._flat_weights), self.bias, self.num_layers,
                            self.bidirectional, self.batch_first)
    return out, (h, c)


def onnx_lstm(input, hx, params, has_biases: bool, num_layers: int, bidirectional: bool, batch_first: bool):
    """opaque_lstm as ONNX LSTM nodes (onnxscript's own translation of aten.lstm)."""
    from onnxscript.function_libs.torch_lib.ops.core import aten_lstm

    return aten_lstm(input, hx, params, has_biases, num_layers, 0.0, False, bidirectional, batch_first)


@torch.library.custom_op("attention_lab::packed_lstm", mutates_args=())
def packed_lstm(input: Tensor, lengths: Tensor, h0: Tensor, c0: Tensor, params: list[Tensor],
                num_layers: int) -> tuple[Tensor, Tensor, Tensor]:
    """PackedLSTM.forward behind an opaque op: torch.export cannot trace pack_padded_sequence."""
    packed = pack_padded_sequence(input, lengths.cpu(), batch_first=True, enforce_sorted=False)
    order, undo = packed.sorted_indices, packed.unsorted_indices
    data, h, c = torch._VF.lstm(packed.data, packed.batch_sizes, (h0[:, order], c0[:, order]), params,
                                len(params) == 4 * num_layers, num_layers, 0.0, False, False)
    out = pad_packed_sequence(PackedSequence(data, packed.batch_sizes, order, undo), batch_first=True,
                              total_length=input.shape[1])[0]
    return out, h[:, undo], c[:, undo]  # (B, S, H) zero past each length, (L, B, H) x 2 at each length


@packed_lstm.register_fake
def _(input, lengths, h0, c0, params, num_layers):
    return input.new_empty(*input.shape[:2], h0.shape[2]), h0.new_empty(h0.shape), c0.new_empty(c0.shape)


def _opaque_packed_lstm_forward(self: PackedLSTM, x: Tensor, lengths: Tensor,
                                state: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    if state is None:
        zeros = x.new_zeros(self.num_layers, x.shape[0], self.hidden_size)
        state = (zeros, zeros)
    out, h, c = packed_lstm(x, lengths, *state, list(self._flat_weights), self.num_layers)
    return out, (h, c)


def onnx_packed_lstm(input, lengths, h0, c0, params, num_layers: int):
    """packed_lstm as one ONNX LSTM node per layer; sequence_lens stops each sequence at its own length."""
    from onnxscript import INT32
    from onnxscript import opset18 as op

    hidden = h0.shape[2]
    gates = [k * hidden + j for k in (0, 3, 1, 2) for j in range(hidden)]  # torch [i, f, g, o] -> ONNX [i, o, f, c]

    def iofc(w):  # (4H, ...) rows regrouped in ONNX gate order; folded into the weights at export
        return op.Gather(w, gates, axis=0)

    x, seq_lens = op.Transpose(input, perm=[1, 0, 2]), op.Cast(lengths, to=INT32.dtype)  # (S, B, E), (B,) int32
    per_layer, hs, cs = len(params) // num_layers, [], []
    for layer in range(num_layers):
        w = params[layer * per_layer:(layer + 1) * per_layer]  # W_ih (4H, E), W_hh (4H, H)[, b_ih, b_hh (4H,)]
        bias = [op.Unsqueeze(op.Concat(iofc(w[2]), iofc(w[3]), axis=0), [0])] if per_layer == 4 else [None]
        y, y_h, y_c = op.LSTM(x, op.Unsqueeze(iofc(w[0]), [0]), op.Unsqueeze(iofc(w[1]), [0]), *bias, seq_lens,
                              op.Slice(h0, [layer], [layer + 1], axes=[0]), op.Slice(c0, [layer], [layer + 1], axes=[0]),
                              hidden_size=hidden)  # (S, 1, B, H), (1, B, H) x 2
        x = op.Squeeze(y, [1])  # (S, B, H)
        hs.append(y_h)
        cs.append(y_c)
    return op.Transpose(x, perm=[1, 0, 2]), op.Concat(*hs, axis=0), op.Concat(*cs, axis=0)


@contextlib.contextmanager
def onnx_friendly(model: nn.Module) -> Iterator[dict]:
    """Route nn.GRU, nn.LSTM and PackedLSTM through opaque ops that become ONNX GRU / LSTM nodes while exporting."""
    from onnxscript.function_libs.torch_lib.ops.core import aten_gru

    patched = []
    for m in model.modules():
        forward = {nn.GRU: _opaque_gru_forward, nn.LSTM: _opaque_lstm_forward,
                   PackedLSTM: _opaque_packed_lstm_forward}.get(type(m))
        if forward is not None:
            m.forward = types.MethodType(forward, m)
            patched.append(m)
    try:
        yield {torch.ops.attention_lab.gru.default: aten_gru, torch.ops.attention_lab.lstm.default: onnx_lstm,
               torch.ops.attention_lab.packed_lstm.default: onnx_packed_lstm}
    finally:
        for m in patched:
            del m.forward


class EncoderGraph(nn.Module):
    """encode as one graph: (src, src_mask) -> (memory, *state)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, ...]:
        memory, state = self.model.encode(src, src_mask)  # (B, S', D), decoder state before bos
        return (memory, *state)


class DecoderStepGraph(nn.Module):
    """One decode_step with log-softmax: (prev, state, memory, src_mask) -> (logits, log_probs, *state, attn)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, prev: Tensor, state: tuple[Tensor, ...], memory: Tensor, src_mask: Tensor) -> tuple[Tensor, ...]:
        logits, new_state, attn = self.model.decode_step(prev, state, memory, src_mask)  # (B, V), .., (B, S)
        return (logits, torch.log_softmax(logits, -1), *new_state, attn)


def _all_dynamic(t: Tensor) -> dict[int, object]:
    """Dim.AUTO on every axis: batch and lengths stay symbolic, sizes fixed by the weights get specialized."""
    return {axis: Dim.AUTO for axis in range(t.dim())}


def _random_src(lengths: list[int], vocab_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return pad_batch([rng.integers(4, vocab_size, size=n).tolist() for n in lengths])


def _example_inputs(model: nn.Module) -> tuple[tuple[Tensor, Tensor], tuple]:
    """Encoder and decoder-step example inputs; the state has already grown by EXAMPLE_STEPS steps."""
    src, src_mask = (torch.from_numpy(a) for a in _random_src(EXAMPLE_LENGTHS, model.vocab_size, 0))
    gen = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        memory, state = model.encode(src, src_mask)
        for _ in range(EXAMPLE_STEPS):
            prev = torch.randint(4, model.vocab_size, (len(EXAMPLE_LENGTHS),), generator=gen)
            _, state, _ = model.decode_step(prev, state, memory, src_mask)
    prev = torch.randint(4, model.vocab_size, (len(EXAMPLE_LENGTHS),), generator=gen)
    state = tuple(s.clone() for s in state)
    return (src, src_mask), (prev, state, memory.clone(), src_mask)


def _check_dynamic(path: Path, axes: dict[str, list[int]]) -> None:
    """Fail if an axis that must vary (batch, lengths) was frozen to the example's size."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    dims = {i.name: i.type.tensor_type.shape.dim for i in graph.input}
    frozen = [f"{name}[{a}]" for name, want in axes.items() for a in want if dims[name][a].HasField("dim_value")]
    if frozen:
        raise ExportError(f"{path}: axes {frozen} were frozen to the example size; the graph would not accept "
                          "other batch sizes or lengths")


def export_model(model: nn.Module, out_dir: str | Path, family: str, tokenizer_path: str | Path | None = None,
                 max_len_ratio: float = 2.0, opset: int = 20, beam: int = 4, len_penalty: float = 1.0) -> dict:
    """Write encoder.onnx, decoder_step.onnx (+ .data), meta.json and tokenizer.json into out_dir; return paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    was_training = model.training
    model.eval()
    try:
        (src, src_mask), (prev, state, memory, mask) = _example_inputs(model)
        n_state = len(state)
        state_in = [f"state_{i}" for i in range(n_state)]
        state_out = [f"new_state_{i}" for i in range(n_state)]
        with warnings.catch_warnings(), onnx_friendly(model) as table:
            warnings.simplefilter("ignore")
            logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)  # torchvision
            torch.onnx.export(
                EncoderGraph(model), (src, src_mask), str(out_dir / ENCODER_FILE), dynamo=True, opset_version=opset,
                input_names=["src", "src_mask"], output_names=["memory", *state_in], external_data=True,
                dynamic_shapes=(_all_dynamic(src), _all_dynamic(src_mask)), custom_translation_table=table,
                verbose=False)
            torch.onnx.export(
                DecoderStepGraph(model), (prev, state, memory, mask), str(out_dir / DECODER_FILE), dynamo=True,
                opset_version=opset, input_names=["prev", *state_in, "memory", "src_mask"],
                output_names=["logits", "log_probs", *state_out, "attn"], external_data=True,
                dynamic_shapes=(_all_dynamic(prev), tuple(_all_dynamic(s) for s in state), _all_dynamic(memory),
                                _all_dynamic(mask)), custom_translation_table=table, verbose=False)
    finally:
        model.train(was_training)
    _check_dynamic(out_dir / ENCODER_FILE, {"src": [0, 1], "src_mask": [0, 1]})
    _check_dynamic(out_dir / DECODER_FILE, {"prev": [0], "src_mask": [0, 1], "memory": [0],
                                            **{n: [0] for n in state_in}})
    meta = {"task": "translate", "family": family, "has_attention": bool(model.has_attention),
            "vocab_size": int(model.vocab_size),
            **SPECIAL_IDS, "encoder_state_outputs": state_in, "state_inputs": state_in, "state_outputs": state_out,
            "max_len_ratio": float(max_len_ratio), "beam": int(beam), "len_penalty": float(len_penalty),
            "opset": opset, "source_special_tokens": False}
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    if tokenizer_path is not None:
        shutil.copyfile(tokenizer_path, out_dir / TOKENIZER_FILE)
    return {"dir": out_dir, "encoder": out_dir / ENCODER_FILE, "decoder_step": out_dir / DECODER_FILE,
            "meta": out_dir / META_FILE, "tokenizer": out_dir / TOKENIZER_FILE if tokenizer_path else None}


def _max_diff(a, b) -> float:
    """Max abs difference over pairs of arrays; inf when a pair's shapes differ."""
    worst = 0.0
    for x, y in zip(a, b):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        worst = max(worst, float(np.max(np.abs(x - y), initial=0.0)) if x.shape == y.shape else float("inf"))
    return worst


def check_parity(model: nn.Module, out_dir: str | Path, cases: list[list[int]] | None = None, steps: int = 8,
                 tol: float = PARITY_TOL, max_len_ratio: float = 2.0, seed: int = 1) -> dict:
    """Compare torch and onnxruntime on batches/lengths unlike the export example; write and return parity.json.

    Per case: encoder outputs; `steps` decoder steps fed the same tokens (each runtime carries its own state);
    greedy and beam-4 search token sequences. ok = greedy identical and every max abs diff <= tol.
    """
    out_dir = Path(out_dir)
    meta = json.loads((out_dir / META_FILE).read_text(encoding="utf-8"))
    encoder, decoder = make_session(out_dir / ENCODER_FILE), make_session(out_dir / DECODER_FILE)
    names = [o.name for o in decoder.get_outputs()]
    was_training = model.training
    model.eval()
    diffs = {"memory": 0.0, "state": 0.0, "logits": 0.0, "log_probs": 0.0, "attn": 0.0}
    report_cases, greedy_same, beam_same = [], True, True
    rng = np.random.default_rng(seed)
    try:
        for k, lengths in enumerate(cases or PARITY_CASES):
            src, src_mask = _random_src(lengths, model.vocab_size, seed + k)
            t_state, t_memory = torch_encode(model, src, src_mask)
            o_state, o_memory = ort_encode(encoder, meta, src, src_mask)
            case = {"batch": len(lengths), "src_lens": lengths,
                    "memory": _max_diff(t_memory[:1], o_memory[:1]), "state": _max_diff(t_state, o_state)}
            t_step, case_diff = torch_step(model), {"logits": 0.0, "log_probs": 0.0, "attn": 0.0}
            for _ in range(steps):
                prev = rng.integers(3, model.vocab_size, size=len(lengths)).astype(np.int64)
                with torch.inference_mode():
                    logits, new_t, attn = model.decode_step(
                        torch.from_numpy(prev), tuple(torch.from_numpy(s) for s in t_state),
                        torch.from_numpy(t_memory[0]), torch.from_numpy(src_mask))
                    t_out = {"logits": logits.numpy(), "log_probs": torch.log_softmax(logits, -1).numpy(),
                             "attn": attn.numpy()}
                feed = {"prev": prev, "memory": o_memory[0], "src_mask": src_mask,
                        **dict(zip(meta["state_inputs"], o_state))}
                o_out = dict(zip(names, decoder.run(None, feed)))
                for key, worst in case_diff.items():
                    case_diff[key] = max(worst, _max_diff([t_out[key]], [o_out[key]]))
                t_state = tuple(s.numpy() for s in new_t)
                o_state = tuple(o_out[n] for n in meta["state_outputs"])
            case.update(case_diff)
            max_len = max_decode_len(src_mask, max_len_ratio)
            t_state, t_memory = torch_encode(model, src, src_mask)
            o_state, o_memory = ort_encode(encoder, meta, src, src_mask)
            o_step = ort_step(decoder, meta)
            t_greedy = [h.tokens for h in greedy(t_step, t_state, t_memory, max_len)]
            o_greedy = [h.tokens for h in greedy(o_step, o_state, o_memory, max_len)]
            t_beam = [h.tokens for h in beam_search(t_step, t_state, t_memory, max_len, beam=4, len_penalty=1.0)]
            o_beam = [h.tokens for h in beam_search(o_step, o_state, o_memory, max_len, beam=4, len_penalty=1.0)]
            case.update(greedy_identical=t_greedy == o_greedy, beam_identical=t_beam == o_beam,
                        greedy_lengths=[len(t) for t in t_greedy])
            greedy_same &= case["greedy_identical"]
            beam_same &= case["beam_identical"]
            for key, worst in diffs.items():
                diffs[key] = max(worst, case[key])
            report_cases.append(case)
    finally:
        model.train(was_training)
    ok = greedy_same and all(v <= tol for v in diffs.values())
    parity = {"ok": ok, "tolerance": tol, "max_abs_diff": diffs, "greedy_identical": greedy_same,
              "beam_identical": beam_same, "cases": report_cases, "steps_per_case": steps,
              "export_example": {"batch": len(EXAMPLE_LENGTHS), "src_len": max(EXAMPLE_LENGTHS),
                                 "state_steps": EXAMPLE_STEPS}}
    (out_dir / "parity.json").write_text(json.dumps(parity, indent=2) + "\n", encoding="utf-8")
    return parity


def export_and_check(model: nn.Module, out_dir: str | Path, family: str, tokenizer_path: str | Path | None = None,
                     max_len_ratio: float = 2.0, opset: int = 20, tol: float = PARITY_TOL, **meta) -> dict:
    """export_model + check_parity; raise ExportError with the figures if parity fails."""
    export_model(model, out_dir, family, tokenizer_path, max_len_ratio, opset, **meta)
    parity = check_parity(model, out_dir, tol=tol, max_len_ratio=max_len_ratio)
    if not parity["ok"]:
        raise ExportError(f"{family}: ONNX parity failed (tolerance {tol}): max abs diff {parity['max_abs_diff']}, "
                          f"greedy identical: {parity['greedy_identical']}")
    return parity
