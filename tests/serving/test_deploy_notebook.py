"""notebooks/03_deploy_onnx.ipynb: committed without outputs, runs on tiny random-weight exports
with onnxruntime only, draws its attention plots, and skips a task that has no exported model."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ROOT
from tests.tiny_models import export_tiny_models

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out

NOTEBOOK = ROOT / "notebooks" / "03_deploy_onnx.ipynb"


def execute(models: Path):
    """The notebook executed from the repository root with ATTENTION_LAB_MODELS=models (raises on a
    failing cell)."""
    nb = nbformat.read(NOTEBOOK, as_version=4)
    env = {**os.environ, "ATTENTION_LAB_MODELS": str(models), "OMP_NUM_THREADS": "1"}
    NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
    ).execute(env=env)
    return nb


def tagged(nb, tag: str):
    [cell] = [c for c in nb.cells if tag in c.metadata.get("tags", [])]
    return cell


def text(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def images(cell) -> list:
    return [o for o in cell.outputs if "image/png" in o.get("data", {})]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    return export_tiny_models(tmp_path_factory.mktemp("models"))


def test_committed_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.execution_count is None and not c.outputs for c in code)
    assert nb.metadata.kernelspec.name == "python3"


def test_runs_on_exported_models(models):
    nb = execute(models)
    listing = text(tagged(nb, "models"))
    assert all(family in listing for family in ("bahdanau", "han", "show_attend_tell"))
    translations = re.findall(
        r"^(greedy|beam 4) : (.*)$", text(tagged(nb, "translate")), re.MULTILINE
    )
    assert len(translations) == 6 and all(t.strip() for _, t in translations)
    assert images(tagged(nb, "translate-plot")), "the cross-attention heatmap"
    assert "label: " in text(tagged(nb, "classify"))
    assert len(images(tagged(nb, "classify-plot"))) == 2, "sentence/word bars and the document view"
    assert images(tagged(nb, "caption")), "the caption attention overlay"
    contract = text(tagged(nb, "contract"))
    assert "decoder_step.onnx" in contract and "log_probs" in contract and "raw step on" in contract
    assert re.search(r"translate, greedy .* ms", text(tagged(nb, "latency")))
    assert "torch imported: False" in text(tagged(nb, "no-torch"))


def test_skips_tasks_without_a_model(models, tmp_path):
    shutil.copytree(models / "han", tmp_path / "han")  # classify only
    nb = execute(tmp_path)
    assert "no translate model is exported" in text(tagged(nb, "translate"))
    assert not tagged(nb, "translate-plot").outputs
    assert "no caption model is exported" in text(tagged(nb, "caption"))
    assert images(tagged(nb, "classify-plot"))
    assert "raw run on the hand-written review" in text(tagged(nb, "contract"))
