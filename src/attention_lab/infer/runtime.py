"""What every task's onnxruntime side shares: the exported folder's file names, a CPU session,
meta.json and tokenizer.json read with named errors, and an encoder + decoder-step folder read for
the search (translation and captioning). Never imports torch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from attention_lab.infer.decoding import Arrays, StepFn
from attention_lab.infer.tokenization import never_emitted

ENCODER_FILE, DECODER_FILE, META_FILE, TOKENIZER_FILE = (
    "encoder.onnx",
    "decoder_step.onnx",
    "meta.json",
    "tokenizer.json",
)


class ModelFileError(ValueError):
    """A file of an exported folder (graph, meta.json, tokenizer.json) is missing, truncated,
    corrupted or of another task."""


def make_session(path: str | Path, threads: int = 1) -> ort.InferenceSession:
    """A CPU session with the options benchmarks/speed.py chose by measurement
    (reports/benchmarks.md, section 1): one intra-op thread and basic graph optimisation had the
    lowest batch-1 decoding latency on this machine."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    if not Path(path).is_file():
        raise ModelFileError(
            f"{path}: no such ONNX file (re-run the export stage: dvc repro export_<task>@<family>)"
        )
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    # onnxruntime's InvalidProtobuf, Fail, ... have no common public base class
    except Exception as err:
        raise ModelFileError(
            f"{path}: not a readable ONNX model, truncated or corrupted? ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:200]}); re-run its export stage"
        ) from err


def read_meta(
    model_dir: str | Path, task: str | None = None, required: tuple[str, ...] = ()
) -> dict:
    """meta.json of an exported folder (of `task`, if given); a ModelFileError when it is not a JSON
    object, is another task's or lacks a key of `required`."""
    path = Path(model_dir) / META_FILE
    if not path.is_file():
        raise ModelFileError(
            f"{path}: no such file (re-run the export stage: dvc repro export_<task>@<family>)"
        )
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise ModelFileError(f"{path}: not valid JSON ({err}); re-run its export stage") from err
    if not isinstance(meta, dict):
        raise ModelFileError(
            f"{path}: expected a JSON object, found {type(meta).__name__}; re-run its export stage"
        )
    if task and meta.get("task", "translate") != task:  # translate exports predate the "task" key
        raise ModelFileError(
            f"{path}: not a {task} model (task {meta.get('task', 'translate')!r}); use "
            f"`attention-lab {meta.get('task', 'translate')}` or a {task} export"
        )
    if missing := [k for k in required if k not in meta]:
        raise ModelFileError(
            f"{path}: missing {', '.join(missing)} (written by another exporter?); re-run its "
            "export stage"
        )
    return meta


def read_tokenizer(path: str | Path) -> Tokenizer:
    """An exported tokenizer.json; a ModelFileError when it is not one."""
    try:
        return Tokenizer.from_file(str(path))
    # tokenizers raises a bare Exception for a missing, empty or malformed file
    except Exception as err:
        raise ModelFileError(
            f"{path}: not a readable tokenizer ({str(err)[:200]}); re-run its export stage"
        ) from err


def ort_step(decoder: ort.InferenceSession, meta: dict) -> StepFn:
    """A decoding.py step function over the decoder-step graph (which returns log-probs itself)."""
    state_in, state_out = meta["state_inputs"], meta["state_outputs"]
    outputs = ["log_probs", *state_out, "attn"]

    def step(
        prev: np.ndarray, state: Arrays, memory: Arrays
    ) -> tuple[np.ndarray, Arrays, np.ndarray]:
        feed = {
            "prev": prev.astype(np.int64),
            "memory": memory[0],
            "src_mask": memory[1],
            **dict(zip(state_in, state)),
        }
        log_probs, *new_state, attn = decoder.run(outputs, feed)
        return log_probs, tuple(new_state), attn

    return step


class ExportedDecoder:
    """An exported encoder + decoder-step folder (encoder.onnx, decoder_step.onnx, meta.json,
    tokenizer.json) read for decoding.search: both sessions, the step over the decoder graph and the
    tokens the search never emits. A subclass names its task and the meta.json keys it reads."""

    task: str
    meta_keys: tuple[str, ...]

    def __init__(self, model_dir: str | Path, threads: int = 1):
        self.model_dir = Path(model_dir)
        missing = [
            f
            for f in (ENCODER_FILE, DECODER_FILE, META_FILE, TOKENIZER_FILE)
            if not (self.model_dir / f).is_file()
        ]
        if missing:
            raise FileNotFoundError(
                f"{self.model_dir}: not an exported model folder, missing {', '.join(missing)} "
                f"(run the export stage: dvc repro export_{self.task}@<family>)"
            )
        self.meta = read_meta(self.model_dir, self.task, self.meta_keys)
        self.tokenizer = read_tokenizer(self.model_dir / TOKENIZER_FILE)
        self.encoder = make_session(self.model_dir / ENCODER_FILE, threads)
        self.decoder = make_session(self.model_dir / DECODER_FILE, threads)
        self.step = ort_step(self.decoder, self.meta)
        # <pad>, <s>, <unk>: the search never outputs them
        self.banned = never_emitted(self.tokenizer)
