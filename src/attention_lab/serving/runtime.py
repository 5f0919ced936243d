"""What every task's onnxruntime side shares: the exported folder's file names, a CPU session, meta.json and
tokenizer.json read with named errors. Never imports torch."""

from __future__ import annotations

import json
from pathlib import Path

import onnxruntime as ort
from tokenizers import Tokenizer

ENCODER_FILE, DECODER_FILE, META_FILE, TOKENIZER_FILE = "encoder.onnx", "decoder_step.onnx", "meta.json", "tokenizer.json"


class ModelFileError(ValueError):
    """A file of an exported folder (graph, meta.json, tokenizer.json) is missing, truncated, corrupted or of another
    task."""


def make_session(path: str | Path, threads: int = 1) -> ort.InferenceSession:
    """A CPU session with the options benchmarks/speed.py chose by measurement (reports/benchmarks.md, section 1):
    one intra-op thread and basic graph optimisation had the lowest batch-1 decoding latency on this machine."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    if not Path(path).is_file():
        raise ModelFileError(f"{path}: no such ONNX file (re-run the export stage: dvc repro export_<task>@<family>)")
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime's InvalidProtobuf, Fail, ... have no common public base class
        raise ModelFileError(f"{path}: not a readable ONNX model, truncated or corrupted? ({type(err).__name__}: "
                             f"{str(err).splitlines()[0][:200]}); re-run its export stage") from err


def read_meta(model_dir: str | Path, task: str | None = None, required: tuple[str, ...] = ()) -> dict:
    """meta.json of an exported folder (of `task`, if given); a ModelFileError when it is not a JSON object, is another
    task's or lacks a key of `required`."""
    path = Path(model_dir) / META_FILE
    if not path.is_file():
        raise ModelFileError(f"{path}: no such file (re-run the export stage: dvc repro export_<task>@<family>)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, ValueError) as err:
        raise ModelFileError(f"{path}: not valid JSON ({err}); re-run its export stage") from err
    if not isinstance(meta, dict):
        raise ModelFileError(f"{path}: expected a JSON object, found {type(meta).__name__}; re-run its export stage")
    if task and meta.get("task", "translate") != task:  # translate exports predate the "task" key
        raise ModelFileError(f"{path}: not a {task} model (task {meta.get('task', 'translate')!r}); use "
                             f"`attention-lab {meta.get('task', 'translate')}` or a {task} export")
    if missing := [k for k in required if k not in meta]:
        raise ModelFileError(f"{path}: missing {', '.join(missing)} (written by another exporter?); re-run its "
                             "export stage")
    return meta


def read_tokenizer(path: str | Path) -> Tokenizer:
    """An exported tokenizer.json; a ModelFileError when it is not one."""
    try:
        return Tokenizer.from_file(str(path))
    except Exception as err:  # tokenizers raises a bare Exception for a missing, empty or malformed file
        raise ModelFileError(f"{path}: not a readable tokenizer ({str(err)[:200]}); re-run its export stage") from err
