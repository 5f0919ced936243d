"""Trained models back from Lightning checkpoints without Lightning, and without running pickled code."""

from __future__ import annotations

import pickle
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from attention_lab.tokenization import PAD


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated, corrupted or not one of ours."""


def load_model(path: str | Path) -> tuple[torch.nn.Module, DictConfig]:
    """The trained model (eval mode, CPU) and the resolved config it was trained with; weights_only=True loading."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint (run the train stage first)")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        hparams, state = ckpt["hyper_parameters"], ckpt["state_dict"]
        cfg = OmegaConf.create(hparams["cfg"])
        classes = {"num_classes": len(cfg.task.labels)} if "labels" in cfg.task else {}  # classify: its labels
        model = instantiate(cfg.model, vocab_size=hparams["vocab_size"], pad_id=PAD, **classes)
        model.load_state_dict({k.removeprefix("model."): v for k, v in state.items() if k.startswith("model.")})
    except (pickle.UnpicklingError, EOFError, RuntimeError, KeyError, TypeError, ValueError) as err:
        raise CheckpointError(f"{path}: not a readable attention-lab checkpoint ({type(err).__name__}: {err})") from err
    return model.eval(), cfg


def count_parameters(model: torch.nn.Module) -> int:
    """Trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
