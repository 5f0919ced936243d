"""DVC stage `export_<task>@<family>`: export one family to ONNX -> models/<family>/onnx/
(translate and caption: encoder and decoder step; classify: one graph; plus meta.json,
tokenizer.json, parity.json), from the first seed; every seed's own export, parity checked, goes
to its MLflow run as `onnx/`."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from omegaconf import DictConfig

from attention_lab.core import tracking
from attention_lab.core.files import atomic_path
from attention_lab.core.paths import onnx_dir, seed_dir, tokenizer_path
from attention_lab.core.task import get_task
from attention_lab.nn.export import ExportError
from attention_lab.stages.common import run_stage, stage_config


def checkpoint_path(cfg: DictConfig, seed: int | None = None) -> Path:
    """The checkpoint a seed's export reads: its best.ckpt (the first seed's by default)."""
    return seed_dir(cfg, cfg.seeds[0] if seed is None else seed) / "best.ckpt"


def log_to_mlflow(cfg: DictConfig, seed: int, folder: Path, parity: dict) -> None:
    """A seed's exported folder (graphs, tokenizer, meta, parity) as `onnx/` of its run."""
    import mlflow

    with tracking.reopen_run(cfg, seed_dir(cfg, seed)):
        mlflow.log_artifacts(str(folder), artifact_path="onnx")
        identical = parity.get("greedy_identical", parity.get("prediction_identical"))
        mlflow.log_metrics(
            {
                "onnx/max_abs_diff_logits": parity["max_abs_diff"]["logits"],
                "onnx/identical": float(identical),
            }
        )


def export_seed(cfg: DictConfig, seed: int, out: Path, tokenizer: Path) -> dict:
    """Export a seed's best checkpoint into `out` (a path not there yet) and check parity."""
    from attention_lab.train.checkpoints import load_model

    model, trained = load_model(checkpoint_path(cfg, seed))
    try:
        return get_task(cfg.task.name).export(cfg, model, trained, out, tokenizer)
    except ExportError as err:
        raise SystemExit(f"export_{cfg.task.name}@{cfg.family} (seed {seed}): {err}") from err


def main(argv: list[str]) -> dict:
    """Export every seed, check parity (fail loudly); the first seed's parity.json."""
    cfg = stage_config(argv)
    tokenizer = tokenizer_path(cfg)
    name = get_task(cfg.task.name).name
    tokenizer_stage = f"pretrain@{cfg.family}" if cfg.get("pretrained") else f"tokenize_{name}"
    needed = [(checkpoint_path(cfg, s), f"train_{name}@{cfg.family}") for s in cfg.seeds]
    for path, stage in [*needed, (tokenizer, tokenizer_stage)]:
        if not path.is_file():
            raise SystemExit(
                f"export_{name}@{cfg.family}: {path} not found (run the {stage} stage first)"
            )
    first, *others = cfg.seeds
    with atomic_path(onnx_dir(cfg)) as tmp:
        parity = export_seed(cfg, first, tmp, tokenizer)
    log_to_mlflow(cfg, first, onnx_dir(cfg), parity)
    for seed in others:  # each seed's run holds its own graphs; the served folder is the first's
        with tempfile.TemporaryDirectory(prefix=f"onnx-seed{seed}-") as scratch:
            own = export_seed(cfg, seed, Path(scratch) / "onnx", tokenizer)
            log_to_mlflow(cfg, seed, Path(scratch) / "onnx", own)
    print(
        f"export_{name}@{cfg.family}: {onnx_dir(cfg)} parity "
        + json.dumps(
            {
                k: v
                for k, v in parity.items()
                if k
                in ("max_abs_diff", "greedy_identical", "beam_identical", "prediction_identical")
            }
        )
    )
    return parity


if __name__ == "__main__":
    from attention_lab.train.checkpoints import CheckpointError

    run_stage("export", main, sys.argv[1:], CheckpointError)
