"""Greedy or beam captioning of a batch of images by a torch Captioner (evaluation, val/accuracy,
export parity), and its step cap from the training captions."""

from __future__ import annotations

import math

import numpy as np
import torch
from omegaconf import DictConfig

from attention_lab.core.files import read_json
from attention_lab.core.paths import tokenized_dir
from attention_lab.infer.decoding import Hypothesis, search
from attention_lab.infer.tokenization import NEVER_EMITTED
from attention_lab.nn.decoder_step import device_of, evaluating, to_numpy, torch_step


def caption_batch(
    model: torch.nn.Module,
    images: torch.Tensor,
    max_len: int,
    beam: int = 1,
    len_penalty: float = 1.0,
    bos: int = 1,
    eos: int = 2,
    banned: tuple[int, ...] = NEVER_EMITTED,
) -> list[Hypothesis]:
    """Caption a batch of images (B, H, W) float in [0, 1]; attention comes back over the grid cells
    (T, L). Never emits an id of `banned` (the evaluate stage passes its tokenizer's
    never_emitted(); the default is the same ids for every tokenizer trained here)."""
    with evaluating(model):
        with torch.inference_mode():
            # (B, L, D), decoder state before bos
            memory, state = model.encode(images.to(device_of(model)))
            mask = model.grid_mask(memory)
        hyps = search(
            torch_step(model),
            tuple(to_numpy(s) for s in state),
            (to_numpy(memory), to_numpy(mask)),
            np.full(len(images), max_len),
            beam,
            len_penalty,
            bos,
            eos,
            banned,
        )
    return hyps


def decode_limit(cfg: DictConfig) -> int:
    """Decoding steps at most, eos included: ceil(evaluate.max_len_ratio × the longest training
    caption, in tokens, every reference of a photo counted: the tokenize stage's stats.json
    `caption_tokens_max`) + 1, so a caption as long as the training ones is never cut (the built-in
    digits: 1.5 × 6 words + 1 = 10)."""
    longest = read_json(tokenized_dir(cfg) / "stats.json")["caption_tokens_max"]
    return math.ceil(cfg.evaluate.max_len_ratio * longest) + 1
