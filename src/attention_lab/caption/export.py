"""ONNX export of a captioner as two graphs (image encoder, decoder step) and a torch-vs-onnxruntime
parity check: encoder.onnx takes a canvas (B, H, W) float32 in [0, 1] or a photo (B, S, S, 3) uint8
RGB (the graph then holds the frozen CNN) and returns memory (B, L, D) and state_0, state_1;
decoder_step.onnx takes prev (B,), the states, memory and the grid mask and returns logits,
log_probs, the new states and attn (B, L). The folder also gets meta.json and tokenizer.json. The
graphs' inputs and outputs in full: docs/design.md, "Why the modules are as they are"."""

from __future__ import annotations

import json
import logging
import shutil
import warnings
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig
from torch import Tensor, nn
from torch.export import Dim

from attention_lab.caption.data.features import ENCODERS, AnnotationEncoder
from attention_lab.caption.search import caption_batch, decode_limit
from attention_lab.caption.serve import OnnxCaptioner
from attention_lab.infer.runtime import DECODER_FILE, ENCODER_FILE, META_FILE, TOKENIZER_FILE
from attention_lab.nn.export import (
    SPECIAL_IDS,
    DecoderStepGraph,
    ExportError,
    all_dynamic,
    check_dynamic,
    max_diff,
)

PARITY_BATCHES = [1, 3, 5]  # unlike the export example's batch of 2
PARITY_TOL = 1e-4


class ImageEncoderGraph(nn.Module):
    """encode as one graph: image -> (memory, *state)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, image: Tensor) -> tuple[Tensor, ...]:
        memory, state = self.model.encode(image)  # (B, L, D), (h, c)
        return (memory, *state)


class PhotoCaptioner(nn.Module):
    """A photo model (trained on cached annotations) with its frozen CNN in front, so one encode
    reads pixels: encode(uint8 RGB photos (B, S, S, 3)) = model.encode(CNN(photos)); decode_step and
    the grid are the model's, and so is S = grid × stride, the data.image_size its annotations were
    cached at (meta.json's height and width)."""

    def __init__(self, model: nn.Module, encoder: str, max_pixels: int):
        super().__init__()
        self.model, self.cnn = model, AnnotationEncoder(encoder)
        h, w = model.grid
        if h != w or model.cnn.stride != ENCODERS[encoder][1]:
            raise ExportError(
                f"a photo model needs a square grid at {encoder}'s stride {ENCODERS[encoder][1]},"
                f" got {h}×{w} at stride {model.cnn.stride}"
            )
        self.encoder, self.size, self.max_pixels = encoder, h * model.cnn.stride, max_pixels
        self.vocab_size, self.has_attention, self.grid = (
            model.vocab_size,
            model.has_attention,
            model.grid,
        )

    def encode(self, photos: Tensor) -> tuple[Tensor, tuple[Tensor, ...]]:
        # (B, L, D) annotations a_i, decoder state before bos
        return self.model.encode(self.cnn(photos))

    def decode_step(
        self, prev: Tensor, state: tuple[Tensor, ...], memory: Tensor, grid_mask: Tensor
    ):
        return self.model.decode_step(prev, state, memory, grid_mask)  # (B, V), state, (B, L)

    def grid_mask(self, memory: Tensor) -> Tensor:
        return self.model.grid_mask(memory)


def random_photos(batch: int, size: int, seed: int) -> np.ndarray:
    """Noise photos with a few coloured blocks, uint8 RGB (B, S, S, 3)."""
    rng = np.random.default_rng(seed)
    photos = rng.integers(0, 80, (batch, size, size, 3), dtype=np.uint8)
    for b in range(batch):
        for x, y in rng.integers(0, size * 3 // 4, (3, 2)):
            photos[b, y : y + size // 4, x : x + size // 4] = rng.integers(
                60, 256, 3, dtype=np.uint8
            )
    return photos


def example_images(model: nn.Module, batch: int, seed: int) -> np.ndarray:
    """Encoder-graph inputs for `model`: random_photos for a PhotoCaptioner, random_images canvases
    otherwise."""
    if isinstance(model, PhotoCaptioner):
        return random_photos(batch, model.size, seed)
    return random_images(batch, *(g * model.cnn.stride for g in model.grid), seed)


def input_meta(model: nn.Module) -> dict:
    """meta.json's description of the encoder's input: a photo (any size, squashed) or a canvas
    (exact size)."""
    if isinstance(model, PhotoCaptioner):
        return {
            "input": "photo",
            "encoder": model.encoder,
            "height": model.size,
            "width": model.size,
            "max_pixels": int(model.max_pixels),
        }
    height, width = (g * model.cnn.stride for g in model.grid)
    return {"input": "canvas", "height": height, "width": width}


def random_images(batch: int, height: int, width: int, seed: int) -> np.ndarray:
    """Noise canvases with a few bright blocks, float32 (B, H, W) in [0, 1]."""
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 0.2, (batch, height, width)).astype(np.float32)
    for b in range(batch):
        for x in rng.integers(0, width - 12, 3):
            images[b, 8:20, x : x + 12] = rng.uniform(0.5, 1.0)
    return images


def export_captioner(
    model: nn.Module,
    out_dir: str | Path,
    family: str,
    tokenizer_path: str | Path | None,
    max_len: int,
    opset: int = 20,
    beam: int = 1,
    len_penalty: float = 1.0,
) -> dict:
    """Write encoder.onnx, decoder_step.onnx (+ .data), meta.json and tokenizer.json into out_dir;
    return meta."""
    if getattr(model, "features", False):
        raise ExportError(
            f"{family}: reads cached annotations of a pretrained CNN (data "
            "image_captions or coco_captions); export PhotoCaptioner(model, "
            "data.encoder, data.max_pixels), the CNN and the model as one path"
        )
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.eval()
    image = torch.from_numpy(example_images(model, 2, 0))
    with torch.inference_mode():
        memory, state = model.encode(image)
        prev = torch.tensor([5, 6])
        _, state, _ = model.decode_step(
            torch.tensor([1, 1]), state, memory, model.grid_mask(memory)
        )
    state, memory = tuple(s.clone() for s in state), memory.clone()
    mask = model.grid_mask(memory)
    state_in, state_out = (
        [f"state_{i}" for i in range(len(state))],
        [f"new_state_{i}" for i in range(len(state))],
    )
    batch = {0: Dim("batch", min=1, max=4096)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("torch.onnx._internal.exporter._registration").setLevel(logging.ERROR)
        torch.onnx.export(
            ImageEncoderGraph(model),
            (image,),
            str(out_dir / ENCODER_FILE),
            dynamo=True,
            opset_version=opset,
            input_names=["image"],
            output_names=["memory", *state_in],
            external_data=True,
            dynamic_shapes=(batch,),
            verbose=False,
        )
        torch.onnx.export(
            DecoderStepGraph(model),
            (prev, state, memory, mask),
            str(out_dir / DECODER_FILE),
            dynamo=True,
            opset_version=opset,
            input_names=["prev", *state_in, "memory", "src_mask"],
            output_names=["logits", "log_probs", *state_out, "attn"],
            external_data=True,
            dynamic_shapes=(
                all_dynamic(prev),
                tuple(all_dynamic(s) for s in state),
                all_dynamic(memory),
                all_dynamic(mask),
            ),
            verbose=False,
        )
    check_dynamic(out_dir / ENCODER_FILE, {"image": [0]})
    check_dynamic(
        out_dir / DECODER_FILE,
        {"prev": [0], "memory": [0], "src_mask": [0], **{n: [0] for n in state_in}},
    )
    meta = {
        "task": "caption",
        "family": family,
        "has_attention": bool(model.has_attention),
        "vocab_size": int(model.vocab_size),
        **SPECIAL_IDS,
        **input_meta(model),
        "grid": list(model.grid),
        "encoder_state_outputs": state_in,
        "state_inputs": state_in,
        "state_outputs": state_out,
        "max_len": int(max_len),
        "beam": int(beam),
        "len_penalty": float(len_penalty),
        "opset": opset,
    }
    (out_dir / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    if tokenizer_path is not None:
        shutil.copyfile(tokenizer_path, out_dir / TOKENIZER_FILE)
    return meta


def check_caption_parity(
    model: nn.Module, out_dir: str | Path, steps: int = 6, tol: float = PARITY_TOL, seed: int = 1
) -> dict:
    """torch vs onnxruntime on batches unlike the export example: encoder outputs, `steps` decoder
    steps fed the same tokens, and the greedy captions; writes and returns parity.json (ok = greedy
    identical, every diff <= tol)."""
    out_dir = Path(out_dir)
    ort = OnnxCaptioner(out_dir)
    decoder_names = ["logits", "log_probs", *ort.meta["state_outputs"], "attn"]
    model.eval()
    diffs = {"memory": 0.0, "state": 0.0, "logits": 0.0, "log_probs": 0.0, "attn": 0.0}
    greedy_same, cases = True, []
    rng = np.random.default_rng(seed)
    for k, batch in enumerate(PARITY_BATCHES):
        images = example_images(model, batch, seed + k)
        with torch.inference_mode():
            memory, state = model.encode(torch.from_numpy(images))
        o_state, (o_memory, mask) = ort.encode(images)
        case = {
            "batch": batch,
            "memory": max_diff([memory.numpy()], [o_memory]),
            "state": max_diff([s.numpy() for s in state], o_state),
        }
        t_state = state
        for _ in range(steps):
            prev = rng.integers(3, model.vocab_size, size=batch).astype(np.int64)
            with torch.inference_mode():
                logits, t_state, attn = model.decode_step(
                    torch.from_numpy(prev), t_state, memory, torch.from_numpy(mask)
                )
            o_out = dict(
                zip(
                    decoder_names,
                    ort.decoder.run(
                        decoder_names,
                        {
                            "prev": prev,
                            "memory": o_memory,
                            "src_mask": mask,
                            **dict(zip(ort.meta["state_inputs"], o_state)),
                        },
                    ),
                )
            )
            o_state = tuple(o_out[n] for n in ort.meta["state_outputs"])
            t_out = {
                "logits": logits.numpy(),
                "log_probs": torch.log_softmax(logits, -1).numpy(),
                "attn": attn.numpy(),
            }
            for key in ("logits", "log_probs", "attn"):
                case[key] = max(case.get(key, 0.0), max_diff([t_out[key]], [o_out[key]]))
        t_greedy = [
            h.tokens for h in caption_batch(model, torch.from_numpy(images), ort.meta["max_len"])
        ]
        o_ids = [
            [ort.tokenizer.token_to_id(w) for w in c.words]
            for c in ort.caption(list(images), beam=1)
        ]
        case["greedy_identical"] = t_greedy == o_ids
        greedy_same &= case["greedy_identical"]
        diffs = {key: max(worst, case[key]) for key, worst in diffs.items()}
        cases.append(case)
    parity = {
        "ok": greedy_same and all(v <= tol for v in diffs.values()),
        "tolerance": tol,
        "max_abs_diff": diffs,
        "greedy_identical": greedy_same,
        "steps_per_case": steps,
        "cases": cases,
    }
    (out_dir / "parity.json").write_text(json.dumps(parity, indent=2) + "\n", encoding="utf-8")
    return parity


def export_and_check_captioner(
    model: nn.Module,
    out_dir: str | Path,
    family: str,
    tokenizer_path: str | Path,
    max_len: int,
    opset: int = 20,
    tol: float = PARITY_TOL,
    **meta,
) -> dict:
    """export_captioner + check_caption_parity; raise ExportError with the figures if parity
    fails."""
    export_captioner(model, out_dir, family, tokenizer_path, max_len, opset, **meta)
    parity = check_caption_parity(model, out_dir, tol=tol)
    if not parity["ok"]:
        raise ExportError(
            f"{family}: ONNX parity failed (tolerance {tol}): max abs diff"
            f" {parity['max_abs_diff']}, greedy identical: {parity['greedy_identical']}"
        )
    return parity


def export(
    cfg: DictConfig, model: nn.Module, trained: DictConfig, out: Path, tokenizer: Path
) -> dict:
    """The export stage's hook: image-encoder and decoder-step graphs with the evaluation's decoding
    settings (its decode_limit, from the training captions, as meta.json `max_len`); a photo model
    gets its frozen CNN (data.encoder) in front."""
    e = cfg.evaluate
    if model.features:
        model = PhotoCaptioner(model, cfg.data.encoder, cfg.data.max_pixels)
    return export_and_check_captioner(
        model,
        out,
        cfg.family,
        tokenizer,
        decode_limit(cfg),
        cfg.export.opset,
        beam=e.beam,
        len_penalty=e.len_penalty,
    )
