"""A folder of photos with several captions each, in Flickr8k's layout: <path>/Images/*.jpg|png and
<path>/captions.txt (CSV, header `image,caption`, one row per caption; an optional split column). Captions are
lower-cased and cut into words of letters, digits and apostrophes; photos of any size and mode are read with Pillow,
converted to RGB and squashed to the encoder's square input. Every bad input stops with a DataError naming the file
(and line); a photo that cannot be read is an ImageError (a DataError), the error serving answers with too."""

from __future__ import annotations

import csv
import io
import re
import warnings
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from attention_lab.core.readers import SPLITS, DataError, read_lines

WORD = re.compile(r"[a-z0-9']+")
class ImageError(DataError):
    """An image that cannot be captioned: missing, unreadable, truncated, empty, over the pixel cap, or not the
    model's canvas size."""


SPLIT_NAMES = {"train": "train", "valid": "valid", "val": "valid", "dev": "valid", "test": "test"}


def normalise_caption(text: str) -> str:
    """Lower-case words of letters, digits and apostrophes, one space apart (punctuation dropped)."""
    return " ".join(WORD.findall(text.lower()))


def read_captions(path: Path, split_field: str | None = None) -> tuple[dict[str, list[str]], dict[str, str]]:
    """captions.txt -> ({image name: [normalised captions]} in file order, {image name: split} from split_field)."""
    lines = read_lines(path)
    header = [h.strip().lower() for h in next(csv.reader([lines[0]]))]
    if header[:2] != ["image", "caption"]:
        raise DataError(f"{path}:1: expected the header `image,caption` (Flickr8k's captions.txt), got {lines[0]!r}")
    if split_field and split_field.lower() not in header[2:]:
        raise DataError(f"{path}:1: no column {split_field!r} (data.split_field) in the header {lines[0]!r}")
    split_at = header.index(split_field.lower()) if split_field else None
    captions: dict[str, list[str]] = {}
    splits: dict[str, str] = {}
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        fields = next(csv.reader([line]))
        extra = len(fields) - len(header)  # captions with unquoted commas: their pieces are joined back
        name = fields[0].strip()
        caption = ",".join(fields[1:2 + max(extra, 0)])
        if len(fields) < 2 or not name:
            raise DataError(f"{path}:{n}: expected `image,caption`, got {line!r}")
        if not normalise_caption(caption):
            raise DataError(f"{path}:{n}: empty caption for {name} (no word left after lower-casing and dropping "
                            "punctuation)")
        captions.setdefault(name, []).append(normalise_caption(caption))
        if split_at is not None:
            split = SPLIT_NAMES.get(fields[split_at + max(extra, 0)].strip().lower()) if len(fields) > split_at else None
            if split is None:
                raise DataError(f"{path}:{n}: {split_field} must be train, valid (val, dev) or test, got "
                                f"{fields[split_at + max(extra, 0)] if len(fields) > split_at else ''!r}")
            if splits.setdefault(name, split) != split:
                raise DataError(f"{path}:{n}: {name} is in {splits[name]} and in {split}: a photo's captions stay in "
                                "one split")
    if not captions:
        raise DataError(f"{path}: no caption rows after the header")
    return captions, splits


def read_split_file(path: Path, names: set[str]) -> dict[str, str]:
    """A CSV `image,split` (header required) -> {image name: train|valid|test}; every captioned photo needs one."""
    lines = read_lines(path)
    if [h.strip().lower() for h in next(csv.reader([lines[0]]))][:2] != ["image", "split"]:
        raise DataError(f"{path}:1: expected the header `image,split`, got {lines[0]!r}")
    splits = {}
    for n, line in enumerate(lines[1:], 2):
        if line.strip():
            fields = [f.strip() for f in next(csv.reader([line]))]
            split = SPLIT_NAMES.get(fields[1].lower()) if len(fields) > 1 else None
            if split is None:
                raise DataError(f"{path}:{n}: expected `image,split` with split train, valid or test, got {line!r}")
            splits[fields[0]] = split
    missing = sorted(names - set(splits))
    if missing:
        raise DataError(f"{path}: no split for {len(missing)} captioned photo(s), e.g. {missing[0]}")
    return splits


def split_by_image(names: list[str], valid_fraction: float, test_fraction: float, seed: int) -> dict[str, str]:
    """A reproducible split of the photos (never of caption rows): sorted names, permuted by seed, cut by fraction."""
    order = np.random.default_rng(seed).permutation(len(names))
    n_valid, n_test = round(valid_fraction * len(names)), round(test_fraction * len(names))
    ranked = [sorted(names)[i] for i in order]
    return {name: "valid" if k < n_valid else "test" if k < n_valid + n_test else "train"
            for k, name in enumerate(ranked)}


def read_photo(source: Path | bytes, size: int, max_pixels: int, name: str | None = None,
               cap: str = "data.max_pixels") -> np.ndarray:
    """A JPEG/PNG/... file or its bytes, any size and mode -> uint8 RGB (size, size, 3), squashed to the encoder's
    input (bilinear): what prepare caches features of and what serving feeds the exported encoder."""
    name = name or str(source)
    if isinstance(source, Path) and not source.is_file():
        raise ImageError(f"{name}: image not found (named in captions.txt)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(source if isinstance(source, Path) else io.BytesIO(source)) as im:
                w, h = im.size
                if w * h > max_pixels:
                    raise ImageError(f"{name}: {w}×{h} = {w * h:,} pixels, over the cap {cap} = {max_pixels:,} (a "
                                     "decompression bomb guard; raise the cap for larger photos)")
                if w == 0 or h == 0:
                    raise ImageError(f"{name}: the image is {w}×{h} pixels (empty)")
                im.load()
                rgb = im.convert("RGB")  # CMYK, palette, grayscale and RGBA are converted (alpha dropped)
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise ImageError(f"{name}: over Pillow's pixel cap (PIL.Image.DecompressionBombError: {err})") from err
    except UnidentifiedImageError as err:
        raise ImageError(f"{name}: not an image Pillow can read (expected JPEG or PNG)") from err
    except (OSError, SyntaxError, ValueError) as err:
        kind = "truncated image" if "truncated" in str(err) or "broken data stream" in str(err) else "unreadable image"
        raise ImageError(f"{name}: {kind} ({err}); expected JPEG or PNG") from err
    return np.asarray(rgb.resize((size, size), Image.BILINEAR), dtype=np.uint8)  # (size, size, 3)


def photo_splits(base: Path, images_dir: str, captions_file: str, split_field: str | None, split_file: Path | None,
                 valid_fraction: float, test_fraction: float, seed: int, max_images: int | None
                 ) -> dict[str, list[dict]]:
    """{split: rows {"image", "caption" (the first), "captions" (all)}}, each split's photos in name order."""
    if not (base / images_dir).is_dir():
        raise DataError(f"{base / images_dir}: folder not found (data.path/data.images_dir: Flickr8k's Images/)")
    captions, given = read_captions(base / captions_file, split_field)
    names = sorted(captions)[:max_images] if max_images else sorted(captions)
    if split_file is not None:
        if split_field:
            raise DataError(f"{split_file}: give data.split_file or data.split_field, not both")
        given = read_split_file(split_file, set(names))
    splits = {name: given[name] for name in names} if given else split_by_image(names, valid_fraction,
                                                                                  test_fraction, seed)
    out = {s: [{"image": n, "caption": captions[n][0], "captions": captions[n]} for n in names if splits[n] == s]
           for s in SPLITS}
    for s, rows in out.items():
        if not rows:
            raise DataError(f"{base / captions_file}: no photo in the {s} split ({len(names)} photos; raise "
                            f"data.{s}_fraction or give the split)")
    return out
