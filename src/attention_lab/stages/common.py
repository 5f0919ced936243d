"""What every stage entry point shares: `family=NAME` on the command line, the rest as config overrides."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from attention_lab.config import load_config


def stage_config(argv: list[str], need_family: bool = True) -> DictConfig:
    """`python -m attention_lab.stages.X family=bahdanau train.lr=3e-4` -> composed config for that family."""
    family = next((a.split("=", 1)[1] for a in argv if a.startswith("family=")), None)
    if need_family and not family:
        raise SystemExit("usage: python -m attention_lab.stages.<stage> family=<name> [key=value ...]")
    return load_config([a for a in argv if not a.startswith("family=")], family=family)


def seed_dir(cfg: DictConfig, seed: int, family: str | None = None) -> Path:
    """models/<family>/checkpoints/seed<k>: best.ckpt, last.ckpt, train.json, run.json (MLflow run id)."""
    return Path(cfg.root) / cfg.paths.models / (family or cfg.family) / "checkpoints" / f"seed{seed}"


def onnx_dir(cfg: DictConfig) -> Path:
    """models/<family>/onnx: the self-contained folder that serving loads."""
    return Path(cfg.root) / cfg.paths.models / cfg.family / "onnx"
