"""Trained models back from Lightning checkpoints without Lightning, and without running pickled
code."""

from __future__ import annotations

import pickle
import re
import zipfile
from pathlib import Path

import torch
from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from attention_lab.infer.tokenization import PAD


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, truncated, corrupted or not one of ours."""


def read_checkpoint(path: str | Path) -> dict:
    """A checkpoint's contents on the CPU, loaded with weights_only=True (tensors and plain data
    only: a pickled object that would run code is refused); CheckpointError naming the file if it is
    missing, truncated or corrupted.

    The zip members' CRC-32s are checked first: torch.load alone reads a checkpoint with flipped
    bytes in its tensors without complaint.
    """
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint (run the train stage first)")
    try:
        with zipfile.ZipFile(path) as archive:
            if (bad := archive.testzip()) is not None:
                raise CheckpointError(
                    f"{path}: corrupted (member {bad} fails its CRC-32 check); re-run its train "
                    "stage"
                )
        return torch.load(path, map_location="cpu", weights_only=True)
    except CheckpointError:
        raise
    except (zipfile.BadZipFile, EOFError) as err:
        raise CheckpointError(
            f"{path}: truncated or not a checkpoint ({type(err).__name__}: {err}); re-run its "
            "train stage"
        ) from err
    # weights_only=True refuses anything but tensors and plain data
    except pickle.UnpicklingError as err:
        named = re.search(r"GLOBAL (\S+)", str(err))
        what = f"the global {named.group(1)}, " if named else ""
        raise CheckpointError(
            f"{path}: refused, it pickles {what}not only tensors and plain data (unpickled, a "
            "checkpoint of unknown origin can run code: load one only with weights_only=True)"
        ) from err
    except (MemoryError, OSError):
        raise
    # torch's reader: RuntimeError, AssertionError, ... on damaged archives
    except Exception as err:
        raise CheckpointError(
            f"{path}: not a readable checkpoint, truncated or corrupted? ({type(err).__name__}: "
            f"{str(err).splitlines()[0][:300] if str(err) else ''}); re-run its train stage"
        ) from err


def load_model(path: str | Path) -> tuple[torch.nn.Module, DictConfig]:
    """The trained model (eval mode, CPU) and the resolved config it was trained with (see
    read_checkpoint)."""
    path = Path(path)
    ckpt = read_checkpoint(path)
    try:
        hparams, state = ckpt["hyper_parameters"], ckpt["state_dict"]
        cfg = OmegaConf.create(hparams["cfg"])
        # classify: its labels
        classes = {"num_classes": len(cfg.task.labels)} if "labels" in cfg.task else {}
        model = instantiate(cfg.model, vocab_size=hparams["vocab_size"], pad_id=PAD, **classes)
        model.load_state_dict(
            {k.removeprefix("model."): v for k, v in state.items() if k.startswith("model.")}
        )
    except (RuntimeError, KeyError, TypeError, ValueError) as err:
        raise CheckpointError(
            f"{path}: not a readable attention-lab checkpoint ({type(err).__name__}: {err})"
        ) from err
    return model.eval(), cfg


def count_parameters(model: torch.nn.Module) -> int:
    """Trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
