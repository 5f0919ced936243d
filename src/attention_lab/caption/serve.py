"""onnxruntime-only captioning: image encoder + decoder-step graphs, decoding.py's search, attention
overlays.

Two kinds of export (meta.json "input"): digit canvases (grayscale, exactly the canvas size) and
photos (any size, read and squashed by caption/data/photos.py as prepare reads them; the exported
encoder holds the pretrained CNN). Never imports torch: serving needs numpy, onnxruntime, tokenizers
and Pillow.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, UnidentifiedImageError

from attention_lab.caption.data.photos import ImageError, read_photo
from attention_lab.infer.decoding import search
from attention_lab.infer.runtime import ExportedDecoder
from attention_lab.infer.tokenization import tokens_of

META_KEYS = (
    "height",
    "width",
    "grid",
    "max_len",
    "beam",
    "len_penalty",
    "bos_id",
    "eos_id",
    "has_attention",
    # what captioning reads from meta.json
    "encoder_state_outputs",
    "state_inputs",
    "state_outputs",
)


def read_image(
    source: str | Path | bytes, height: int, width: int, name: str | None = None
) -> np.ndarray:
    """A grayscale PNG/JPEG/... of exactly width × height pixels (ink bright on dark) -> float32 (H,
    W) in [0, 1]."""
    name, data = image_bytes(source, name, f"a {width}×{height} image")
    try:
        with Image.open(io.BytesIO(data)) as im:
            im.load()
            gray = im.convert("L")
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise ImageError(
            f"{name}: not a readable image ({err}); expected a {width}×{height} PNG"
        ) from err
    if gray.size != (width, height):
        raise ImageError(
            f"{name}: the image is {gray.size[0]}×{gray.size[1]} pixels, expected {width}×{height} "
            "(width × height, the canvas size the model was trained on)"
        )
    return np.asarray(gray, dtype=np.float32) / 255.0


def image_bytes(source: str | Path | bytes, name: str | None, expected: str) -> tuple[str, bytes]:
    """(name for messages, the file's bytes); an ImageError for a missing or empty file."""
    name = name or (str(source) if not isinstance(source, bytes) else "the uploaded image")
    if not isinstance(source, bytes) and not Path(source).is_file():
        raise ImageError(f"{name}: no such file")
    data = source if isinstance(source, bytes) else Path(source).read_bytes()
    if not data:
        raise ImageError(f"{name}: empty file, expected {expected}")
    return name, data


@dataclass
class Caption:
    """One caption and, per word, the attention over the encoder's grid (h, w)."""

    # " ".join(words): every emitted word (never <pad>, <s> or <unk>: the search bans them)
    text: str
    words: list[str]
    attention: np.ndarray  # (len(words), h, w); all zeros for a family without attention
    score: float
    has_attention: bool = True
    overlay: str | None = None  # where its attention overlay was written, if it was

    def to_dict(self) -> dict:
        return {
            "caption": self.text,
            "words": self.words,
            "attention": np.round(self.attention, 4).tolist(),
            "score": self.score,
            "has_attention": self.has_attention,
            "overlay": self.overlay,
        }


class OnnxCaptioner(ExportedDecoder):
    """Caption images with an exported folder (encoder.onnx, decoder_step.onnx, meta.json,
    tokenizer.json)."""

    task, meta_keys = "caption", META_KEYS

    def __init__(self, model_dir: str | Path, threads: int = 1):
        super().__init__(model_dir, threads)
        self.height, self.width = self.meta["height"], self.meta["width"]
        # exports before photos were canvases
        self.photo = self.meta.get("input", "canvas") == "photo"

    def read(self, source: str | Path | bytes, name: str | None = None) -> np.ndarray:
        """A file or its bytes -> the encoder's input: a photo of any size as uint8 RGB (H, W, 3),
        squashed as prepare squashes it; a canvas as float32 (H, W) in [0, 1], exactly the canvas
        size."""
        if not self.photo:
            return read_image(source, self.height, self.width, name)
        name, data = image_bytes(source, name, "a JPEG or PNG photo")
        return read_photo(
            data, self.height, self.meta["max_pixels"], name, cap="max_pixels (meta.json)"
        )

    def overlay(self, image: np.ndarray, caption: Caption) -> Image.Image:
        """caption's per-word attention over image (as read): photos at their input size, canvases
        enlarged 3×."""
        pixels = image / 255.0 if self.photo else image  # (H, W, 3) or (H, W) in [0, 1]
        return overlay(pixels, caption.words, caption.attention, scale=1 if self.photo else 3)

    def encode(
        self, batch: np.ndarray
    ) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, np.ndarray]]:
        """The encoder graph: images (B, H, W) float32 or photos (B, H, W, 3) uint8 -> (decoder
        state before bos, (memory (B, L, D), grid mask (B, L)))."""
        outs = dict(
            zip(
                [o.name for o in self.encoder.get_outputs()],
                self.encoder.run(None, {"image": batch}),
            )
        )
        memory = outs["memory"]
        state = tuple(outs[n] for n in self.meta["encoder_state_outputs"])
        return state, (memory, np.ones(memory.shape[:2], dtype=bool))  # every grid cell is real

    def caption(self, images: list[np.ndarray], beam: int | None = None) -> list[Caption]:
        """images as read(): canvases float32 (H, W) in [0, 1] or photos uint8 (H, W, 3)."""
        shape, dtype = (
            ((self.height, self.width, 3), np.uint8)
            if self.photo
            else ((self.height, self.width), np.float32)
        )
        batch = np.stack(images).astype(dtype)  # (B, H, W[, 3])
        if batch.shape[1:] != shape:
            raise ImageError(
                f"images must be {shape} arrays as read() returns them, got {batch.shape[1:]}"
            )
        state, memory = self.encode(batch)
        hyps = search(
            self.step,
            state,
            memory,
            np.full(len(batch), self.meta["max_len"]),
            beam or self.meta["beam"],
            self.meta["len_penalty"],
            self.meta["bos_id"],
            self.meta["eos_id"],
            self.banned,
        )
        h, w = self.meta["grid"]
        captions = []
        for hyp in hyps:
            # a word-level vocabulary: one word per token
            words = tokens_of(self.tokenizer, hyp.tokens)
            captions.append(
                Caption(
                    " ".join(words),
                    words,
                    hyp.attention.reshape(len(hyp.tokens), h, w),
                    float(hyp.score),
                    bool(self.meta["has_attention"]),
                )
            )
        return captions


def overlay(
    image: np.ndarray,
    words: list[str],
    attention: np.ndarray,
    scale: int = 3,
    boxes: list[list[int]] | None = None,
) -> Image.Image:
    """Xu et al. 2015 Fig. 3 style: one panel per word, the attention grid (T, h, w) upsampled over
    the image (H, W) or (H, W, 3) in [0, 1] in red (each panel scaled to its own maximum), the word
    on the left; word t's gold box in green when given."""
    H, W = image.shape[:2]
    # (H, W, 3)
    base = np.clip(
        (image[..., None].repeat(3, -1) if image.ndim == 2 else image) * 255, 0, 255
    ).astype(np.float32)
    label_w, panels = 70, []
    for t, word in enumerate(words or ["(empty)"]):
        a = (
            attention[t]
            if t < len(attention)
            else np.zeros(attention.shape[1:] or (1, 1), np.float32)
        )
        # (H, W)
        up = np.asarray(Image.fromarray(a.astype(np.float32)).resize((W, H), Image.BILINEAR))
        up = up / up.max() if up.max() > 0 else up
        rgb = base * (1 - 0.6 * up[..., None]) + 0.6 * up[..., None] * np.array([255.0, 40.0, 0.0])
        panel = Image.fromarray(rgb.clip(0, 255).astype(np.uint8)).resize(
            (W * scale, H * scale), Image.NEAREST
        )
        if boxes and t < len(boxes):
            x0, y0, x1, y1 = boxes[t]
            ImageDraw.Draw(panel).rectangle(
                [x0 * scale, y0 * scale, x1 * scale - 1, y1 * scale - 1], outline=(0, 200, 0)
            )
        row = Image.new("RGB", (label_w + W * scale, H * scale), "white")
        row.paste(panel, (label_w, 0))
        ImageDraw.Draw(row).text((6, H * scale // 2 - 6), word, fill="black")
        panels.append(row)
    out = Image.new("RGB", (panels[0].width, sum(p.height + 4 for p in panels)), "white")
    for k, p in enumerate(panels):
        out.paste(p, (0, k * (p.height + 4)))
    return out
