"""DVC stage `export_<task>@<family>`: export one family to ONNX -> models/<family>/onnx/ (translate and caption:
encoder and decoder step; classify: one graph; plus meta.json, tokenizer.json, parity.json)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from omegaconf import DictConfig

from attention_lab.core import tracking
from attention_lab.core.files import atomic_path, read_json
from attention_lab.core.paths import onnx_dir, seed_dir, tokenizer_path
from attention_lab.core.task import get_task
from attention_lab.nn.export import ExportError
from attention_lab.stages.common import run_stage, stage_config


def checkpoint_path(cfg: DictConfig) -> Path:
    """The checkpoint that gets exported: the first seed's best.ckpt."""
    return seed_dir(cfg, cfg.seeds[0]) / "best.ckpt"


def log_to_mlflow(cfg: DictConfig, parity: dict) -> None:
    """The exported folder (graphs, tokenizer, meta, parity) as artifacts `onnx/` of the family's training run(s)."""
    import mlflow

    for seed in cfg.seeds:
        with tracking.reopen_run(cfg, read_json(seed_dir(cfg, seed) / "run.json")["run_id"]):
            mlflow.log_artifacts(str(onnx_dir(cfg)), artifact_path="onnx")
            identical = parity.get("greedy_identical", parity.get("prediction_identical"))
            mlflow.log_metrics({"onnx/max_abs_diff_logits": parity["max_abs_diff"]["logits"],
                                "onnx/identical": float(identical)})


def main(argv: list[str]) -> dict:
    """Export, check parity (fail loudly), and return parity.json's content; the folder is onnx_dir(cfg)."""
    cfg = stage_config(argv)
    ckpt = checkpoint_path(cfg)
    tokenizer = tokenizer_path(cfg)
    hooks = get_task(cfg.task.name)
    name = hooks.name
    tokenizer_stage = f"pretrain@{cfg.family}" if cfg.get("pretrained") else f"tokenize_{name}"
    for path, stage in ((ckpt, f"train_{name}@{cfg.family}"), (tokenizer, tokenizer_stage)):
        if not path.is_file():
            raise SystemExit(f"export_{name}@{cfg.family}: {path} not found (run the {stage} stage first)")
    from attention_lab.train.checkpoints import load_model

    model, trained = load_model(ckpt)
    try:
        with atomic_path(onnx_dir(cfg)) as tmp:
            parity = hooks.export(cfg, model, trained, tmp, tokenizer)
    except ExportError as err:
        raise SystemExit(f"export_{name}@{cfg.family}: {err}") from err
    log_to_mlflow(cfg, parity)
    print(f"export_{name}@{cfg.family}: {onnx_dir(cfg)} parity " + json.dumps(
        {k: v for k, v in parity.items() if k in ("max_abs_diff", "greedy_identical", "beam_identical",
                                                   "prediction_identical")}))
    return parity


if __name__ == "__main__":
    from attention_lab.train.checkpoints import CheckpointError

    run_stage("export", main, sys.argv[1:], CheckpointError)
