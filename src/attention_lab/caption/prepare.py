"""The caption task's prepare and tokenize hooks: digit canvases or your photos (`cfg.data.source`),
their summary, and the tokenizer trained on the training split."""

from __future__ import annotations

import numpy as np
from omegaconf import DictConfig, OmegaConf
from tokenizers import Tokenizer

from attention_lab.core.config import ConfigError
from attention_lab.core.paths import user_path
from attention_lab.infer.tokenization import encode, train_word_tokenizer

SPLITS = ("train", "valid", "test")
PHOTO_SOURCES = ("image_captions", "coco_captions")  # Flickr8k's layout, COCO's


def splits(cfg: DictConfig) -> dict[str, tuple[list[dict], np.ndarray]]:
    """Digit canvases: (rows {"caption", "digits", "boxes", ...}, images (N, H, W) uint8) per split;
    photos: (rows {"image", "caption", "captions"}, annotation vectors (N, L, D) float16) per
    split."""
    from attention_lab.caption.data.digits import generated_canvases

    d = cfg.data
    if d.source in PHOTO_SOURCES:
        return photo_splits(cfg)
    if d.source != "generated":
        raise ConfigError(
            f"data.source={d.source!r}: expected generated, {' or '.join(PHOTO_SOURCES)}"
        )
    canvases = generated_canvases(
        d.seed,
        d.n_train,
        d.n_valid,
        d.n_test_per_bucket,
        [tuple(b) for b in cfg.task.buckets],
        d.height,
        d.width,
        tuple(d.digit_size),
        d.max_gap,
        d.max_offset,
        d.noise,
        tuple(d.scan_fractions),
    )
    if d.get("encoder") is None:
        return canvases
    return {
        split: (rows, canvas_features(cfg, images)) for split, (rows, images) in canvases.items()
    }


def canvas_features(cfg: DictConfig, images: np.ndarray) -> np.ndarray:
    """Digit canvases (N, H, W) uint8 through the photo path's frozen ImageNet CNN (a corpus's
    `data.encoder`, as Vinyals et al. 2015 read images): each upscaled by the encoder's stride /
    data.feature_stride (nearest neighbour) and grey in all three channels -> annotation vectors (N,
    L, D) float16, one per feature_stride pixels of the canvas."""
    from attention_lab.caption.data.features import ENCODERS, annotations

    d = cfg.data
    if d.encoder not in ENCODERS:
        raise ConfigError(f"data.encoder={d.encoder!r}: expected one of {', '.join(ENCODERS)}")
    dim, stride = ENCODERS[d.encoder]
    scale = stride // d.get("feature_stride", stride)
    if (
        d.get("feature_dim") != dim
        or scale < 1
        or stride % d.feature_stride
        or d.height % d.feature_stride
        or d.width % d.feature_stride
    ):
        raise ConfigError(
            f"data.feature_dim/feature_stride must be {dim} and a divisor of {stride} (and of the "
            f"canvas's {d.height}×{d.width}) for {d.encoder}, got {d.get('feature_dim')}/"
            f"{d.get('feature_stride')}"
        )
    chunks = []
    for i in range(0, len(images), 256):  # memory stays flat for any number of canvases
        big = images[i : i + 256].repeat(scale, axis=1).repeat(scale, axis=2)  # (n, H·s, W·s)
        chunks.append(
            annotations(np.repeat(big[..., None], 3, axis=3), d.encoder, d.get("feature_batch", 32))
        )
    return np.concatenate(chunks)


def photo_splits(cfg: DictConfig) -> dict[str, tuple[list[dict], np.ndarray]]:
    """Photos split by image, every photo read and checked, then the frozen encoder's annotations,
    once."""
    from attention_lab.caption.data import photos
    from attention_lab.caption.data.features import ENCODERS, annotations

    d = cfg.data
    if d.encoder not in ENCODERS:
        raise ConfigError(f"data.encoder={d.encoder!r}: expected one of {', '.join(ENCODERS)}")
    dim, stride = ENCODERS[d.encoder]
    size = d.image_size
    if size % stride:
        raise ConfigError(
            f"data.image_size={size}: must be a multiple of {stride}, {d.encoder}'s stride (224: a"
            " 7×7 grid, 448: 14×14)"
        )
    if (d.height, d.width, d.feature_dim, d.feature_stride) != (size, size, dim, stride):
        raise ConfigError(
            f"data.height/width/feature_dim/feature_stride must be {size}/{size}/{dim}/{stride} for"
            f" {d.encoder} at data.image_size={size}, got"
            f" {d.height}/{d.width}/{d.feature_dim}/{d.feature_stride} (set data.image_size, not"
            " height and width)"
        )
    base, named = user_path(cfg, d.path), photo_files(d)
    if d.source == "image_captions":
        captions = photos.flickr_captions(
            base,
            d.images_dir,
            d.captions_file,
            d.split_field,
            user_path(cfg, d.split_file) if d.split_file else None,
            d.valid_fraction,
            d.test_fraction,
            d.seed,
            d.max_images,
        )
    else:
        captions = photos.coco_captions(
            base,
            OmegaConf.to_container(d.splits),
            d.valid_fraction,
            d.test_fraction,
            d.seed,
            d.max_images,
        )
    rows = photos.photo_rows(captions, base / named["train"])
    folder = photos.photo_folder(d, base)
    missing = [
        (r["image"], named[s])
        for s, part in rows.items()
        for r in part
        if not (folder / r["image"]).is_file()
    ]
    if missing:  # before any decoding: name every missing photo at once
        raise photos.DataError(
            f"{folder}: {len(missing)} image(s) named in "
            f"{', '.join(dict.fromkeys(f for _, f in missing))} not found, e.g. "
            f"{', '.join(m for m, _ in missing[:3])}"
        )
    out = {}
    for split, part in rows.items():
        chunks = []
        # decode and encode in chunks: memory stays flat for any corpus size
        for i in range(0, len(part), 256):
            pixels = np.stack(
                [
                    photos.read_photo(folder / r["image"], size, d.max_pixels)
                    for r in part[i : i + 256]
                ]
            )
            chunks.append(annotations(pixels, d.encoder, d.feature_batch))  # (n, L, D) float16
        out[split] = (part, np.concatenate(chunks))
    return out


def photo_files(d: DictConfig) -> dict[str, str]:
    """{split: the file naming its photos}: captions.txt, or its COCO JSON (train's if carved)."""
    if d.source == "image_captions":
        return dict.fromkeys(SPLITS, d.captions_file)
    return {s: (d.splits.get(s) or d.splits.train).annotations for s in SPLITS}


def stats(rows: list[dict], buckets: list[list[int]]) -> dict:
    """Canvases, mean digits, distinct source scans, canvases per digit-count bucket (photos:
    photos, captions, mean caption words)."""
    if rows and "captions" in rows[0]:
        words = [len(c.split()) for r in rows for c in r["captions"]]
        return {
            "photos": len(rows),
            "captions": len(words),
            "words_mean": round(sum(words) / len(words), 2),
        }
    counts = [r["n_digits"] for r in rows]
    return {
        "canvases": len(rows),
        "digits_mean": round(sum(counts) / max(len(rows), 1), 2),
        "scans": len({s for r in rows for s in r["scans"]}),
        "buckets": {f"{lo}-{hi}": sum(lo <= n <= hi for n in counts) for lo, hi in buckets},
    }


def tokenizer(cfg: DictConfig, train: list[dict]) -> tuple[Tokenizer, dict]:
    """One id per caption word; the longest caption in tokens."""
    # photos: every reference caption
    captions = [c for r in train for c in r.get("captions", [r["caption"]])]
    tok = train_word_tokenizer(
        ([c.split()] for c in captions), cfg.tokenize.vocab_size, cfg.tokenize.min_frequency
    )
    return tok, {"caption_tokens_max": max(len(ids) for ids in encode(tok, captions))}
