"""Model kinds keyed by meta.json's task, and discovery of exported folders (models/<family>/onnx)
to serve.

A new task slots in with one `register_kind(ModelKind(...))` here (how to load and describe its
folder), its answer in answers.py and one endpoint in app.py; folders of a task without a kind are
skipped with a reason, never half-served.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnxruntime as ort

from attention_lab.caption.serve import OnnxCaptioner
from attention_lab.classify.serve import MODEL_FILE, OnnxClassifier
from attention_lab.infer.runtime import (
    DECODER_FILE,
    ENCODER_FILE,
    META_FILE,
    TOKENIZER_FILE,
    read_meta,
)
from attention_lab.translate.serve import OnnxTranslator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelKind:
    """How to load and describe the exported folder of one task."""

    task: str
    files: tuple[str, ...]  # required besides meta.json
    # (folder, onnxruntime threads) -> runner
    load: Callable[[Path, int], Any]
    graphs: Callable[[Any], dict[str, ort.InferenceSession]]  # runner -> its sessions by file name
    input: str
    output: str


KINDS: dict[str, ModelKind] = {}


def register_kind(kind: ModelKind) -> None:
    KINDS[kind.task] = kind


register_kind(
    ModelKind(
        "translate",
        (ENCODER_FILE, DECODER_FILE, TOKENIZER_FILE),
        OnnxTranslator,
        lambda t: {ENCODER_FILE: t.encoder, DECODER_FILE: t.decoder},
        input="an English sentence (text); greedy (beam 1) or beam search",
        output=(
            "target tokens, the translation, cross-attention (source words x target tokens),"
            " latency"
        ),
    )
)
register_kind(
    ModelKind(
        "classify",
        (MODEL_FILE, TOKENIZER_FILE),
        OnnxClassifier,
        lambda c: {MODEL_FILE: c.session},
        input="a document (text), split into sentences and words by rule",
        output=(
            "label, class probabilities, word attention per sentence and sentence attention,"
            " latency"
        ),
    )
)
register_kind(
    ModelKind(
        "caption",
        (ENCODER_FILE, DECODER_FILE, TOKENIZER_FILE),
        OnnxCaptioner,
        lambda c: {ENCODER_FILE: c.encoder, DECODER_FILE: c.decoder},
        input=(
            "a photo model (image_input photo): a JPEG or PNG photo of any size; a canvas model: a"
            " grayscale PNG of its canvas size (width × height from meta), ink bright on dark"
        ),
        output="caption, words, attention grid per word, overlay PNG (base64), latency",
    )
)


def task_of(meta: dict) -> str:
    """The folder's task; translate exports predate the meta.json "task" key."""
    return meta.get("task", "translate")


def sha256(path: Path) -> str:
    """The file's sha256, hex (hashlib.file_digest: read in blocks)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def tensor_info(values) -> list[dict]:
    """onnxruntime NodeArg list -> [{name, type, shape}] (symbolic axes as names)."""
    return [{"name": v.name, "type": v.type, "shape": list(v.shape)} for v in values]


@dataclass
class LoadedModel:
    """A served model: its runner (OnnxTranslator, OnnxClassifier, ...) and what /models says about
    it."""

    name: str
    task: str
    path: Path
    source: str  # "folder" or "mlflow:models:/<name>/<version>"
    meta: dict
    runner: Any
    files: dict[str, str] = field(default_factory=dict)  # file name -> sha256

    @property
    def family(self) -> str:
        return self.meta.get("family", self.name)

    def info(self) -> dict:
        kind = KINDS[self.task]
        graphs = [
            {
                "file": f,
                "inputs": tensor_info(s.get_inputs()),
                "outputs": tensor_info(s.get_outputs()),
            }
            for f, s in kind.graphs(self.runner).items()
        ]
        return {
            "name": self.name,
            "task": self.task,
            "family": self.family,
            "source": self.source,
            "path": str(self.path),
            "input": kind.input,
            "output": kind.output,
            "graphs": graphs,
            "files": self.files,
            "labels": self.meta.get("labels"),
            "has_attention": has_attention(self),
            "image_input": self.meta.get("input", "canvas") if self.task == "caption" else None,
        }


def has_attention(model: LoadedModel) -> bool:
    """Whether the model returns attention weights (translate: meta flag; classify: a word
    output)."""
    if "has_attention" in model.meta:
        return bool(model.meta["has_attention"])
    return "word" in model.meta.get("outputs", [])


def load_model(
    folder: str | Path, name: str, threads: int = 1, source: str = "folder"
) -> LoadedModel:
    """Load one exported folder; ValueError when its task has no kind or a required file is
    missing."""
    folder = Path(folder)
    meta = read_meta(folder)
    task = task_of(meta)
    if task not in KINDS:
        raise ValueError(
            f"{folder}: task {task!r} has no serving endpoint (served: {', '.join(sorted(KINDS))})"
        )
    missing = [f for f in KINDS[task].files if not (folder / f).is_file()]
    if missing:
        raise ValueError(f"{folder}: missing {', '.join(missing)}")
    runner = KINDS[task].load(folder, threads)
    files = {p.name: sha256(p) for p in sorted(folder.iterdir()) if p.is_file()}
    return LoadedModel(name, task, folder, source, meta, runner, files)


def model_folders(root: str | Path) -> dict[str, Path]:
    """Exported folders under root by name: root itself, root/onnx, or every root/<family>/onnx."""
    root = Path(root)
    for single in (root, root / "onnx"):
        if (single / META_FILE).is_file():
            name = root.name if single != root or root.name != "onnx" else root.parent.name
            return {name: single}
    return {p.parent.parent.name: p.parent for p in sorted(root.glob(f"*/onnx/{META_FILE}"))}


def discover(root: str | Path, threads: int = 1) -> tuple[dict[str, LoadedModel], list[dict]]:
    """Load every exported folder under root -> (models by name, skipped folders with their
    reason)."""
    models, skipped = {}, []
    for name, folder in model_folders(root).items():
        try:
            models[name] = load_model(folder, name, threads)
        # a half-written export, a task without an endpoint: skip it, serve the rest
        except Exception as err:  # noqa: BLE001
            log.warning("skipping %s: %s", folder, err)
            skipped.append({"path": str(folder), "reason": str(err)})
    return models, skipped
