"""ONNX export of a document classifier as one graph, and a torch-vs-onnxruntime parity check.

model.onnx: ids (B, N, L) or (B, T) int64, mask (same shape) bool -> logits (B, C) and the family's
attention outputs (word, sentence, hops; see models/classifier.py). The folder also gets meta.json
and tokenizer.json.
"""

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

from attention_lab.classify.serve import MODEL_FILE, OnnxClassifier, document_arrays
from attention_lab.infer.runtime import META_FILE, TOKENIZER_FILE
from attention_lab.nn.export import ExportError, all_dynamic, check_dynamic, max_diff, onnx_friendly

# export example: 3 documents, words per sentence; all axes >= 2
EXAMPLE_SHAPES = [[5, 3, 2], [2, 4], [3]]
# unlike the example
PARITY_CASES = [[[4]], [[2, 7], [1, 1, 3]], [[6, 2, 5, 1], [3], [2, 2], [9, 1, 1]]]
PARITY_TOL = 1e-4


class ClassifierGraph(nn.Module):
    """forward as one graph: (ids, mask) -> the outputs named in output_names, in that order."""

    def __init__(self, model: nn.Module, names: list[str]):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, ids: Tensor, mask: Tensor) -> tuple[Tensor, ...]:
        out = self.model(ids, mask)
        return tuple(out[k] for k in self.names)


def random_documents(shapes: list[list[int]], vocab_size: int, seed: int) -> list[list[list[int]]]:
    """Documents of random word ids (>= 4, no specials) with the given words per sentence."""
    rng = np.random.default_rng(seed)
    return [[rng.integers(4, vocab_size, size=n).tolist() for n in doc] for doc in shapes]


def export_classifier(
    model: nn.Module,
    out_dir: str | Path,
    family: str,
    tokenizer_path: str | Path,
    labels: list[str],
    max_sentences: int,
    max_words: int,
    opset: int = 20,
    max_tokens: int | None = None,
) -> list[str]:
    """Write model.onnx (+ .data), meta.json and tokenizer.json into out_dir; return the graph's
    output names."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # the penalty is a training loss term only
    names = [k for k in model.output_names if k != "penalty"]
    ids, mask = (
        torch.from_numpy(a)
        for a in document_arrays(
            random_documents(EXAMPLE_SHAPES, model.vocab_size, 0), model.hierarchical
        )
    )
    model.eval()
    with warnings.catch_warnings(), onnx_friendly(model) as table:
        warnings.simplefilter("ignore")
        logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)
        torch.onnx.export(
            ClassifierGraph(model, names),
            (ids, mask),
            str(out_dir / MODEL_FILE),
            dynamo=True,
            opset_version=opset,
            input_names=["ids", "mask"],
            output_names=names,
            external_data=True,
            dynamic_shapes=(all_dynamic(ids), all_dynamic(mask)),
            custom_translation_table=table,
            verbose=False,
        )
    axes = list(range(ids.dim()))
    check_dynamic(out_dir / MODEL_FILE, {"ids": axes, "mask": axes})
    meta = {
        "task": "classify",
        "family": family,
        "labels": list(labels),
        "hierarchical": bool(model.hierarchical),
        "outputs": names,
        "vocab_size": int(model.vocab_size),
        "max_sentences": int(max_sentences),
        "max_words": int(max_words),
        "max_tokens": max_tokens,
        "opset": opset,
    }
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    shutil.copyfile(tokenizer_path, out_dir / TOKENIZER_FILE)
    return names


@torch.inference_mode()
def check_classifier_parity(model: nn.Module, out_dir: str | Path, tol: float = PARITY_TOL) -> dict:
    """Every output of torch and onnxruntime on documents shaped unlike the export example; same
    predicted class."""
    onnx_model = OnnxClassifier(out_dir)
    diffs, same = {}, True
    for k, shapes in enumerate(PARITY_CASES):
        ids, mask = document_arrays(
            random_documents(shapes, model.vocab_size, 100 + k), model.hierarchical
        )
        ours = onnx_model.session.run(None, {"ids": ids, "mask": mask})
        names = [o.name for o in onnx_model.session.get_outputs()]
        ref = model(torch.from_numpy(ids), torch.from_numpy(mask))
        for name, value in zip(names, ours):
            diffs[name] = max(diffs.get(name, 0.0), max_diff([ref[name].numpy()], [value]))
        same &= bool(
            (ref["logits"].argmax(-1).numpy() == ours[names.index("logits")].argmax(-1)).all()
        )
    return {
        "max_abs_diff": diffs,
        "prediction_identical": same,
        "tolerance": tol,
        "ok": same and all(d <= tol for d in diffs.values()),
    }


def export_and_check_classifier(
    model: nn.Module,
    out_dir: str | Path,
    family: str,
    tokenizer_path: str | Path,
    labels: list[str],
    max_sentences: int,
    max_words: int,
    opset: int = 20,
    max_tokens: int | None = None,
) -> dict:
    """export_classifier + check_classifier_parity; raise ExportError with the figures if parity
    fails."""
    export_classifier(
        model, out_dir, family, tokenizer_path, labels, max_sentences, max_words, opset, max_tokens
    )
    parity = check_classifier_parity(model, out_dir)
    (Path(out_dir) / "parity.json").write_text(
        json.dumps(parity, indent=2) + "\n", encoding="utf-8"
    )
    if not parity["ok"]:
        raise ExportError(
            f"{family}: ONNX parity failed (tolerance {PARITY_TOL}): max abs diff "
            f"{parity['max_abs_diff']}, prediction identical: {parity['prediction_identical']}"
        )
    return parity


def export(
    cfg: DictConfig, model: nn.Module, trained: DictConfig, out: Path, tokenizer: Path
) -> dict:
    """The export stage's hook: one graph, with the labels and input limits the family trained
    with."""
    t = trained.train
    return export_and_check_classifier(
        model,
        out,
        cfg.family,
        tokenizer,
        list(trained.task.labels),
        t.max_sentences,
        t.max_words,
        cfg.export.opset,
        max_tokens=t.get("max_tokens"),
    )
