"""What every stage entry point shares: `task=NAME family=NAME` on the command line, the rest as config overrides."""

from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig

from attention_lab.config import load_config


def stage_config(argv: list[str], need_family: bool = True) -> DictConfig:
    """`python -m attention_lab.stages.X task=translate family=bahdanau train.lr=3e-4` -> that family's config.

    `task` defaults to translate; `family` is required unless need_family is False.
    """
    named = {k: a.split("=", 1)[1] for a in argv for k in ("task", "family") if a.startswith(f"{k}=")}
    if need_family and "family" not in named:
        raise SystemExit("usage: python -m attention_lab.stages.<stage> [task=<task>] family=<name> [key=value ...]")
    rest = [a for a in argv if not a.startswith(("task=", "family="))]
    return load_config(rest, family=named.get("family"), task=named.get("task", "translate"))


def seed_dir(cfg: DictConfig, seed: int, family: str | None = None) -> Path:
    """models/<family>/checkpoints/seed<k>: best.ckpt, last.ckpt, train.json, run.json (MLflow run id)."""
    return Path(cfg.root) / cfg.paths.models / (family or cfg.family) / "checkpoints" / f"seed{seed}"


def onnx_dir(cfg: DictConfig) -> Path:
    """models/<family>/onnx: the self-contained folder that serving loads."""
    return Path(cfg.root) / cfg.paths.models / cfg.family / "onnx"
