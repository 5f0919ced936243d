"""What every stage entry point shares: `task=NAME family=NAME` on the command line, the rest as
config overrides."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from omegaconf import DictConfig

from attention_lab.core.config import ConfigError, load_config
from attention_lab.core.readers import DataError
from attention_lab.core.task import NAMES


def run_stage(
    name: str, main: Callable[[list[str]], object], argv: list[str], *errors: type[Exception]
) -> None:
    """A stage's `__main__`: a bad config or corpus (or one of `errors`) ends it with the one line
    `<name>: error: <message>` and exit status 1, not a traceback; any other exception is a bug and
    keeps its traceback."""
    try:
        main(argv)
    except (ConfigError, DataError, *errors) as err:
        sys.exit(f"{name}: error: {err}")


def stage_config(argv: list[str], need_family: bool = True, tuned: bool = True) -> DictConfig:
    """`python -m attention_lab.stages.X task=translate family=bahdanau train.lr=3e-4` -> that
    family's config.

    `task` defaults to the first task (translate); `family` is required unless need_family is False;
    `corpus=<name>` (prepare, tokenize) picks a corpus of params.yaml `<task>.corpora`.
    """
    named = {
        k: a.split("=", 1)[1]
        for a in argv
        for k in ("task", "family", "corpus")
        if a.startswith(f"{k}=")
    }
    if need_family and "family" not in named:
        raise SystemExit(
            "usage: python -m attention_lab.stages.<stage> [task=<task>] family=<name> [key=value"
            " ...]"
        )
    rest = [a for a in argv if not a.startswith(("task=", "family=", "corpus="))]
    cfg = load_config(
        rest,
        family=named.get("family"),
        task=named.get("task", NAMES[0]),
        tuned=tuned,
        corpus=named.get("corpus"),
    )
    if cfg.trainer.accelerator in ("gpu", "cuda"):
        cuda_process(cfg)
    return cfg


def cuda_process(cfg: DictConfig) -> None:
    """A stage process that trains on a CUDA GPU, before its first kernel: deterministic cuBLAS (the
    workspace CUBLAS_WORKSPACE_CONFIG=:4096:8 that torch.use_deterministic_algorithms needs;
    Lightning sets it too, but only when it builds a Trainer) and, at precision 32-true, float32 in
    cuDNN's convolutions and RNNs too (torch lets them use TF32 by default; its matmuls are float32
    already), so a GPU run computes in the precision a CPU run does."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    if str(cfg.trainer.get("precision", "32-true")) in ("32-true", "32"):
        import torch

        torch.backends.cudnn.allow_tf32 = False
