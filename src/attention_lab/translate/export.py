"""ONNX export of a translation model as two graphs (encoder, decoder step) and a
torch-vs-onnxruntime parity check. encoder.onnx: src (B, S) int64, src_mask (B, S) bool -> memory
(B, S', D), state_0 .. state_{n-1}; decoder_step.onnx: prev (B,) int64, state_0 .., memory, src_mask
-> logits (B, V), log_probs (B, V), new_state_0 .., attn (B, S). The folder also gets meta.json
(names, ids, defaults) and tokenizer.json, so serving needs nothing else."""

from __future__ import annotations

import json
import logging
import shutil
import warnings
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig
from torch import Tensor, nn

from attention_lab.infer.decoding import beam_search, greedy, max_decode_len, pad_batch
from attention_lab.infer.runtime import (
    DECODER_FILE,
    ENCODER_FILE,
    META_FILE,
    TOKENIZER_FILE,
    make_session,
    ort_step,
)
from attention_lab.infer.tokenization import NEVER_EMITTED
from attention_lab.nn.decoder_step import evaluating, torch_encode, torch_step
from attention_lab.nn.export import (
    SPECIAL_IDS,
    DecoderStepGraph,
    ExportError,
    all_dynamic,
    check_dynamic,
    max_diff,
    onnx_friendly,
)
from attention_lab.translate.serve import ort_encode

# export example: batch 3, source length 7, 4 decoded steps; all >= 2 and distinct
EXAMPLE_LENGTHS = [7, 4, 2]
EXAMPLE_STEPS = 4
PARITY_CASES = [[5], [9, 3], [11, 1, 6, 2, 8]]  # batches and lengths unlike the export example
PARITY_TOL = 1e-3


class EncoderGraph(nn.Module):
    """encode as one graph: (src, src_mask) -> (memory, *state)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, src: Tensor, src_mask: Tensor) -> tuple[Tensor, ...]:
        memory, state = self.model.encode(src, src_mask)  # (B, S', D), decoder state before bos
        return (memory, *state)


def _random_src(lengths: list[int], vocab_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return pad_batch([rng.integers(4, vocab_size, size=n).tolist() for n in lengths])


def _example_inputs(model: nn.Module) -> tuple[tuple[Tensor, Tensor], tuple]:
    """Encoder and decoder-step example inputs; the state has already grown by EXAMPLE_STEPS
    steps."""
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


def export_model(
    model: nn.Module,
    out_dir: str | Path,
    family: str,
    tokenizer_path: str | Path | None = None,
    max_len_ratio: float = 2.0,
    opset: int = 20,
    beam: int = 4,
    len_penalty: float = 1.0,
) -> dict:
    """Write encoder.onnx, decoder_step.onnx (+ .data), meta.json and tokenizer.json into out_dir;
    return paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with evaluating(model):
        (src, src_mask), (prev, state, memory, mask) = _example_inputs(model)
        n_state = len(state)
        state_in = [f"state_{i}" for i in range(n_state)]
        state_out = [f"new_state_{i}" for i in range(n_state)]
        with warnings.catch_warnings(), onnx_friendly(model) as table:
            warnings.simplefilter("ignore")
            # torchvision
            logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)
            torch.onnx.export(
                EncoderGraph(model),
                (src, src_mask),
                str(out_dir / ENCODER_FILE),
                dynamo=True,
                opset_version=opset,
                input_names=["src", "src_mask"],
                output_names=["memory", *state_in],
                external_data=True,
                dynamic_shapes=(all_dynamic(src), all_dynamic(src_mask)),
                custom_translation_table=table,
                verbose=False,
            )
            torch.onnx.export(
                DecoderStepGraph(model),
                (prev, state, memory, mask),
                str(out_dir / DECODER_FILE),
                dynamo=True,
                opset_version=opset,
                input_names=["prev", *state_in, "memory", "src_mask"],
                output_names=["logits", "log_probs", *state_out, "attn"],
                external_data=True,
                dynamic_shapes=(
                    all_dynamic(prev),
                    tuple(all_dynamic(s) for s in state),
                    all_dynamic(memory),
                    all_dynamic(mask),
                ),
                custom_translation_table=table,
                verbose=False,
            )
    check_dynamic(out_dir / ENCODER_FILE, {"src": [0, 1], "src_mask": [0, 1]})
    check_dynamic(
        out_dir / DECODER_FILE,
        {"prev": [0], "src_mask": [0, 1], "memory": [0], **{n: [0] for n in state_in}},
    )
    meta = {
        "task": "translate",
        "family": family,
        "has_attention": bool(model.has_attention),
        "vocab_size": int(model.vocab_size),
        **SPECIAL_IDS,
        "encoder_state_outputs": state_in,
        "state_inputs": state_in,
        "state_outputs": state_out,
        "max_len_ratio": float(max_len_ratio),
        "beam": int(beam),
        "len_penalty": float(len_penalty),
        "opset": opset,
        "source_special_tokens": False,
    }
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    if tokenizer_path is not None:
        shutil.copyfile(tokenizer_path, out_dir / TOKENIZER_FILE)
    return {
        "dir": out_dir,
        "encoder": out_dir / ENCODER_FILE,
        "decoder_step": out_dir / DECODER_FILE,
        "meta": out_dir / META_FILE,
        "tokenizer": out_dir / TOKENIZER_FILE if tokenizer_path else None,
    }


def check_parity(
    model: nn.Module,
    out_dir: str | Path,
    cases: list[list[int]] | None = None,
    steps: int = 8,
    tol: float = PARITY_TOL,
    max_len_ratio: float = 2.0,
    seed: int = 1,
) -> dict:
    """Compare torch and onnxruntime on batches/lengths unlike the export example; write and return
    parity.json.

    Per case: encoder outputs; `steps` decoder steps fed the same tokens (each runtime carries its
    own state); greedy and beam-4 search token sequences. ok = greedy identical and every max abs
    diff <= tol.
    """
    out_dir = Path(out_dir)
    meta = json.loads((out_dir / META_FILE).read_text(encoding="utf-8"))
    encoder, decoder = make_session(out_dir / ENCODER_FILE), make_session(out_dir / DECODER_FILE)
    names = [o.name for o in decoder.get_outputs()]
    diffs = {"memory": 0.0, "state": 0.0, "logits": 0.0, "log_probs": 0.0, "attn": 0.0}
    report_cases, greedy_same, beam_same = [], True, True
    rng = np.random.default_rng(seed)
    with evaluating(model):
        for k, lengths in enumerate(cases or PARITY_CASES):
            src, src_mask = _random_src(lengths, model.vocab_size, seed + k)
            t_state, t_memory = torch_encode(model, src, src_mask)
            o_state, o_memory = ort_encode(encoder, meta, src, src_mask)
            case = {
                "batch": len(lengths),
                "src_lens": lengths,
                "memory": max_diff(t_memory[:1], o_memory[:1]),
                "state": max_diff(t_state, o_state),
            }
            t_step, case_diff = torch_step(model), {"logits": 0.0, "log_probs": 0.0, "attn": 0.0}
            for _ in range(steps):
                prev = rng.integers(3, model.vocab_size, size=len(lengths)).astype(np.int64)
                with torch.inference_mode():
                    logits, new_t, attn = model.decode_step(
                        torch.from_numpy(prev),
                        tuple(torch.from_numpy(s) for s in t_state),
                        torch.from_numpy(t_memory[0]),
                        torch.from_numpy(src_mask),
                    )
                    t_out = {
                        "logits": logits.numpy(),
                        "log_probs": torch.log_softmax(logits, -1).numpy(),
                        "attn": attn.numpy(),
                    }
                feed = {
                    "prev": prev,
                    "memory": o_memory[0],
                    "src_mask": src_mask,
                    **dict(zip(meta["state_inputs"], o_state)),
                }
                o_out = dict(zip(names, decoder.run(None, feed)))
                for key, worst in case_diff.items():
                    case_diff[key] = max(worst, max_diff([t_out[key]], [o_out[key]]))
                t_state = tuple(s.numpy() for s in new_t)
                o_state = tuple(o_out[n] for n in meta["state_outputs"])
            case.update(case_diff)
            max_len = max_decode_len(src_mask, max_len_ratio)
            t_state, t_memory = torch_encode(model, src, src_mask)
            o_state, o_memory = ort_encode(encoder, meta, src, src_mask)
            o_step = ort_step(decoder, meta)
            t_greedy = [
                h.tokens for h in greedy(t_step, t_state, t_memory, max_len, banned=NEVER_EMITTED)
            ]
            o_greedy = [
                h.tokens for h in greedy(o_step, o_state, o_memory, max_len, banned=NEVER_EMITTED)
            ]
            t_beam = [
                h.tokens
                for h in beam_search(
                    t_step,
                    t_state,
                    t_memory,
                    max_len,
                    beam=4,
                    len_penalty=1.0,
                    banned=NEVER_EMITTED,
                )
            ]
            o_beam = [
                h.tokens
                for h in beam_search(
                    o_step,
                    o_state,
                    o_memory,
                    max_len,
                    beam=4,
                    len_penalty=1.0,
                    banned=NEVER_EMITTED,
                )
            ]
            case.update(
                greedy_identical=t_greedy == o_greedy,
                beam_identical=t_beam == o_beam,
                greedy_lengths=[len(t) for t in t_greedy],
            )
            greedy_same &= case["greedy_identical"]
            beam_same &= case["beam_identical"]
            for key, worst in diffs.items():
                diffs[key] = max(worst, case[key])
            report_cases.append(case)
    ok = greedy_same and all(v <= tol for v in diffs.values())
    parity = {
        "ok": ok,
        "tolerance": tol,
        "max_abs_diff": diffs,
        "greedy_identical": greedy_same,
        "beam_identical": beam_same,
        "cases": report_cases,
        "steps_per_case": steps,
        "export_example": {
            "batch": len(EXAMPLE_LENGTHS),
            "src_len": max(EXAMPLE_LENGTHS),
            "state_steps": EXAMPLE_STEPS,
        },
    }
    (out_dir / "parity.json").write_text(json.dumps(parity, indent=2) + "\n", encoding="utf-8")
    return parity


def export_and_check(
    model: nn.Module,
    out_dir: str | Path,
    family: str,
    tokenizer_path: str | Path | None = None,
    max_len_ratio: float = 2.0,
    opset: int = 20,
    tol: float = PARITY_TOL,
    **meta,
) -> dict:
    """export_model + check_parity; raise ExportError with the figures if parity fails."""
    export_model(model, out_dir, family, tokenizer_path, max_len_ratio, opset, **meta)
    parity = check_parity(model, out_dir, tol=tol, max_len_ratio=max_len_ratio)
    if not parity["ok"]:
        raise ExportError(
            f"{family}: ONNX parity failed (tolerance {tol}): max abs diff"
            f" {parity['max_abs_diff']}, greedy identical: {parity['greedy_identical']}"
        )
    return parity


def export(
    cfg: DictConfig, model: nn.Module, trained: DictConfig, out: Path, tokenizer: Path
) -> dict:
    """The export stage's hook: encoder and decoder-step graphs with the evaluation's decoding
    settings."""
    e = cfg.evaluate
    return export_and_check(
        model,
        out,
        cfg.family,
        tokenizer,
        e.max_len_ratio,
        cfg.export.opset,
        beam=e.beam,
        len_penalty=e.len_penalty,
    )
