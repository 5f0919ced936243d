"""benchmarks/gpu.py without a GPU: the copy it runs and the commands (a dry run), its refusal where
torch sees no GPU, and the section from a run's models and figures."""

from __future__ import annotations

import json

import pytest
import yaml

from benchmarks import gpu


def test_the_dry_run_makes_the_copy_and_names_its_commands(tmp_path, capsys):
    families = "bahdanau,bert,bert_minilm"
    assert (
        gpu.main(["--dry-run", "--work", str(tmp_path), "--families", families, "--jobs", "3"]) == 0
    )
    dest = tmp_path / "project"
    params = yaml.safe_load((dest / "params.yaml").read_text())
    assert (params["trainer"], params["profile"], params["seeds"]) == ("gpu", "tiny", [0])
    assert params["tasks"] == ["translate", "classify"] and params["translate"]["families"] == [
        "bahdanau"
    ]
    assert params["classify"]["families"] == [] and params["classify"]["pretrained"] == [
        "bert",
        "bert_minilm",
    ]
    assert params["classify"]["family_params"]["bert_minilm"]["train"]["max_tokens"] == 128
    assert (
        (dest / "dvc.yaml").is_file()
        and (dest / "src" / "attention_lab").is_dir()
        and not (dest / "tuned").exists()
    )
    printed = capsys.readouterr().out.splitlines()
    assert "dvc init -q" in printed[2] and printed[-1].endswith(
        "-m attention_lab.cli repro --jobs 3"
    )
    assert not (dest / "models").exists()  # nothing ran


def test_without_a_cuda_gpu_it_stops_before_copying(tmp_path, monkeypatch):
    monkeypatch.setattr("torch.cuda.is_available", lambda: False)
    with pytest.raises(SystemExit):
        gpu.main(["--work", str(tmp_path)])
    assert not (tmp_path / "project").exists()


def test_the_section_names_the_device_and_each_run_beside_the_committed_cpu_run(tmp_path):
    run = tmp_path / "models" / "bahdanau" / "checkpoints" / "seed0"
    run.mkdir(parents=True)
    (run / "train.json").write_text(
        json.dumps(
            {
                "steps": 500,
                "train_seconds": 25.0,
                "train_tokens_per_s": 9000.0,
                "best_val": 1.5,
                "best_val_metric": "val/loss",
                "stopped_by": "epoch cap",
            }
        )
    )
    (run / "config.yaml").write_text(
        yaml.safe_dump({"task": {"name": "translate"}, "trainer": {"accelerator": "gpu"}})
    )
    runs = gpu.trained(tmp_path)
    assert runs["bahdanau/seed0"]["updates_per_s"] == 20.0
    figures = {
        "command": "python benchmarks/gpu.py",
        "profile": "quick",
        "seeds": [0],
        "trainer": "gpu",
        "jobs": 12,
        "machine": {
            "gpu": "NVIDIA H100 80GB HBM3",
            "nvidia_smi": ["NVIDIA H100 80GB HBM3, 81559, 580.1"],
            "torch": "2.13.0+cu130",
            "cuda": "13.0",
            "cpu": "Xeon",
            "cores": 16,
            "python": "3.12.3",
            "date": "2026-12-01",
        },
        "run": {
            "exit": 0,
            "seconds": 600.0,
            "done": True,
            "stages_run": 60,
            "peak_gpu_memory_mib": 9000,
            "most_gpu_processes": 12,
            "runs": runs,
            "onnx_parity": {"bahdanau": True},
            "warnings": ["UserWarning: scatter_add_ does not have a deterministic implementation"],
            "tail": [],
        },
        "committed_cpu": {"bahdanau": 4500.0},
    }
    md = tmp_path / "benchmarks.md"
    md.write_text("# Speed benchmarks\n\n## 1. other\n")
    for _ in range(2):  # written again, the section is replaced, not repeated
        gpu.write_marked_section(md, gpu.SECTION, gpu.render(figures), figures)
    text = md.read_text()
    assert text.count("<!-- gpu:start -->") == 1 and "## 1. other" in text
    assert "## The pipeline on NVIDIA H100 80GB HBM3" in text and "| 1 of 1 |" in text
    assert (
        "| `bahdanau/seed0` | gpu | 500 (epoch cap) | 25.0 | 20.00 | 9,000 | 1.5000 val/loss |"
        " 4,500 |" in text
    )
    assert "scatter_add_" in text and "| 9,000 MiB |" in text
    assert json.loads(md.with_suffix(".json").read_text())["gpu"]["machine"]["cores"] == 16
