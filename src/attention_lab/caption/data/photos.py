"""Folders of photos with several captions each, in Flickr8k's layout (<path>/Images/*.jpg|png and
<path>/captions.txt: CSV, header `image,caption`, one row per caption; an optional split column) or
in COCO's (per split, captions_<split>2017.json's `images` and `annotations` beside a folder of the
photos): both become {split: {image: [captions]}}, then the same rows. Captions are lower-cased and
cut into words of letters, digits and apostrophes; photos of any size and mode are read with
Pillow, converted to RGB and squashed to the encoder's square input. Every bad input stops with a
DataError naming the file (and line, or JSON index); a photo that cannot be read is an ImageError
(a DataError), the error serving answers with too."""

from __future__ import annotations

import csv
import io
import json
import re
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from attention_lab.core.readers import SPLITS, DataError, carved_fractions, read_lines

WORD = re.compile(r"[a-z0-9']+")


class ImageError(DataError):
    """An image that cannot be captioned: missing, unreadable, truncated, empty, over the pixel cap,
    or not the model's canvas size."""


SPLIT_NAMES = {"train": "train", "valid": "valid", "val": "valid", "dev": "valid", "test": "test"}


def normalise_caption(text: str) -> str:
    """Lower-case words of letters, digits and apostrophes, one space apart (punctuation
    dropped)."""
    return " ".join(WORD.findall(text.lower()))


def read_captions(
    path: Path, split_field: str | None = None
) -> tuple[dict[str, list[str]], dict[str, str]]:
    """captions.txt -> ({image name: [normalised captions]} in file order, {image name: split} from
    split_field)."""
    lines = read_lines(path)
    header = [h.strip().lower() for h in next(csv.reader([lines[0]]))]
    if header[:2] != ["image", "caption"]:
        raise DataError(
            f"{path}:1: expected the header `image,caption` (Flickr8k's captions.txt), got"
            f" {lines[0]!r}"
        )
    if split_field and split_field.lower() not in header[2:]:
        raise DataError(
            f"{path}:1: no column {split_field!r} (data.split_field) in the header {lines[0]!r}"
        )
    split_at = header.index(split_field.lower()) if split_field else None
    captions: dict[str, list[str]] = {}
    splits: dict[str, str] = {}
    for n, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        fields = next(csv.reader([line]))
        # captions with unquoted commas: their pieces are joined back
        extra = len(fields) - len(header)
        name = fields[0].strip()
        caption = ",".join(fields[1 : 2 + max(extra, 0)])
        if len(fields) < 2 or not name:
            raise DataError(f"{path}:{n}: expected `image,caption`, got {line!r}")
        if not normalise_caption(caption):
            raise DataError(
                f"{path}:{n}: empty caption for {name} (no word left after lower-casing and"
                " dropping punctuation)"
            )
        captions.setdefault(name, []).append(normalise_caption(caption))
        if split_at is not None:
            split = (
                SPLIT_NAMES.get(fields[split_at + max(extra, 0)].strip().lower())
                if len(fields) > split_at
                else None
            )
            if split is None:
                raise DataError(
                    f"{path}:{n}: {split_field} must be train, valid (val, dev) or test, got "
                    f"{fields[split_at + max(extra, 0)] if len(fields) > split_at else ''!r}"
                )
            if splits.setdefault(name, split) != split:
                raise DataError(
                    f"{path}:{n}: {name} is in {splits[name]} and in {split}: a photo's captions"
                    " stay in one split"
                )
    if not captions:
        raise DataError(f"{path}: no caption rows after the header")
    return captions, splits


def read_split_file(path: Path, names: set[str]) -> dict[str, str]:
    """A CSV `image,split` (header required) -> {image name: train|valid|test}; every captioned
    photo needs one."""
    lines = read_lines(path)
    if [h.strip().lower() for h in next(csv.reader([lines[0]]))][:2] != ["image", "split"]:
        raise DataError(f"{path}:1: expected the header `image,split`, got {lines[0]!r}")
    splits = {}
    for n, line in enumerate(lines[1:], 2):
        if line.strip():
            fields = [f.strip() for f in next(csv.reader([line]))]
            split = SPLIT_NAMES.get(fields[1].lower()) if len(fields) > 1 else None
            if split is None:
                raise DataError(
                    f"{path}:{n}: expected `image,split` with split train, valid or test, got"
                    f" {line!r}"
                )
            splits[fields[0]] = split
    missing = sorted(names - set(splits))
    if missing:
        raise DataError(
            f"{path}: no split for {len(missing)} captioned photo(s), e.g. {missing[0]}"
        )
    return splits


def split_by_image(
    names: list[str], valid_fraction: float, test_fraction: float, seed: int
) -> dict[str, str]:
    """A reproducible split of the photos (never of caption rows): sorted names, permuted by seed,
    cut by fraction."""
    order = np.random.default_rng(seed).permutation(len(names))
    n_valid, n_test = round(valid_fraction * len(names)), round(test_fraction * len(names))
    ranked = [sorted(names)[i] for i in order]
    return {
        name: "valid" if k < n_valid else "test" if k < n_valid + n_test else "train"
        for k, name in enumerate(ranked)
    }


def read_photo(
    source: Path | bytes,
    size: int,
    max_pixels: int,
    name: str | None = None,
    cap: str = "data.max_pixels",
) -> np.ndarray:
    """A JPEG/PNG/... file or its bytes, any size and mode -> uint8 RGB (size, size, 3), squashed to
    the encoder's input (bilinear): what prepare caches features of and what serving feeds the
    exported encoder."""
    name = name or str(source)
    if isinstance(source, Path) and not source.is_file():
        raise ImageError(f"{name}: image not found (named in captions.txt)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(source if isinstance(source, Path) else io.BytesIO(source)) as im:
                w, h = im.size
                if w * h > max_pixels:
                    raise ImageError(
                        f"{name}: {w}×{h} = {w * h:,} pixels, over the cap {cap} = {max_pixels:,}"
                        " (a decompression bomb guard; raise the cap for larger photos)"
                    )
                if w == 0 or h == 0:
                    raise ImageError(f"{name}: the image is {w}×{h} pixels (empty)")
                im.load()
                # CMYK, palette, grayscale and RGBA are converted (alpha dropped)
                rgb = im.convert("RGB")
    except ImageError:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
        raise ImageError(
            f"{name}: over Pillow's pixel cap (PIL.Image.DecompressionBombError: {err})"
        ) from err
    except UnidentifiedImageError as err:
        raise ImageError(f"{name}: not an image Pillow can read (expected JPEG or PNG)") from err
    except (OSError, SyntaxError, ValueError) as err:
        kind = (
            "truncated image"
            if "truncated" in str(err) or "broken data stream" in str(err)
            else "unreadable image"
        )
        raise ImageError(f"{name}: {kind} ({err}); expected JPEG or PNG") from err
    return np.asarray(rgb.resize((size, size), Image.BILINEAR), dtype=np.uint8)  # (size, size, 3)


def flickr_captions(
    base: Path,
    images_dir: str,
    captions_file: str,
    split_field: str | None,
    split_file: Path | None,
    valid_fraction: float,
    test_fraction: float,
    seed: int,
    max_images: int | None,
) -> dict[str, dict[str, list[str]]]:
    """Flickr8k's layout -> {split: {image name (in base/images_dir): [normalised captions]}}."""
    if not (base / images_dir).is_dir():
        raise DataError(
            f"{base / images_dir}: folder not found (data.path/data.images_dir: Flickr8k's Images/)"
        )
    captions, given = read_captions(base / captions_file, split_field)
    names = sorted(captions)[:max_images] if max_images else sorted(captions)
    if split_file is not None:
        if split_field:
            raise DataError(f"{split_file}: give data.split_file or data.split_field, not both")
        given = read_split_file(split_file, set(names))
    splits = (
        {name: given[name] for name in names}
        if given
        else split_by_image(names, valid_fraction, test_fraction, seed)
    )
    return {s: {n: captions[n] for n in names if splits[n] == s} for s in SPLITS}


def read_json_object(path: Path) -> dict:
    """A JSON file's top-level object, with a DataError naming the file (and line) otherwise."""
    if not path.is_file():
        raise DataError(f"{path}: file not found (expected COCO's caption JSON)")
    try:
        data = json.loads(path.read_bytes())
    except json.JSONDecodeError as err:
        raise DataError(
            f"{path}:{err.lineno}: not JSON ({err.msg}, column {err.colno}); expected "
            "COCO's caption JSON, an object with `images` and `annotations`"
        ) from err
    except UnicodeDecodeError as err:
        raise DataError(
            f"{path}: not JSON (cannot decode bytes as UTF-8: {err.reason} at byte "
            f"{err.start}); expected COCO's caption JSON"
        ) from err
    if not isinstance(data, dict):
        raise DataError(
            f"{path}: a JSON {type(data).__name__} at the top level; expected COCO's "
            "caption JSON, an object with `images` and `annotations`"
        )
    return data


def coco_images(path: Path, data: dict) -> dict[int, tuple[int, str]]:
    """COCO's `images` -> {image id: (its index, file_name)}, each id and file_name once."""
    found = {}
    for i, image in enumerate(data["images"]):
        name = image.get("file_name") if isinstance(image, dict) else None
        image_id = image.get("id") if isinstance(image, dict) else None
        if not isinstance(name, str) or not name or not is_id(image_id):
            raise DataError(
                f"{path}: images[{i}]: expected an object with `id` (an integer) and "
                f"`file_name` (a string), got {json.dumps(image)[:80]}"
            )
        if image_id in found:
            raise DataError(
                f"{path}: images[{i}]: image id {image_id} twice (images["
                f"{found[image_id][0]}] has it too); expected one entry per photo"
            )
        found[image_id] = (i, name)
    if not found:
        raise DataError(f"{path}: `images` is empty; expected one entry per photo")
    first = {}
    for image_id, (i, name) in found.items():
        if name in first:
            raise DataError(
                f"{path}: images[{i}]: file_name {name} twice (images[{first[name]}] "
                "has it too); expected one entry per photo"
            )
        first[name] = i
    return found


def is_id(value) -> bool:
    """An image id of COCO's JSON: an integer (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool)


def read_coco(path: Path) -> tuple[dict[str, list[str]], dict[str, int]]:
    """COCO's caption JSON -> ({file_name: [normalised captions]}, {file_name: image id})."""
    data = read_json_object(path)
    for key, entry in (
        ("images", "{id, file_name, ...}"),
        ("annotations", "{image_id, id, caption}"),
    ):
        if not isinstance(data.get(key), list):
            raise DataError(
                f"{path}: no `{key}` list at the top level (keys: "
                f"{', '.join(data) or 'none'}); expected COCO's caption JSON, with "
                f"`{key}`: [{entry}, ...]"
            )
    images = coco_images(path, data)
    captions: dict[int, list[str]] = {}
    for i, note in enumerate(data["annotations"]):
        if (
            not isinstance(note, dict)
            or "image_id" not in note
            or not isinstance(note.get("caption"), str)
        ):
            raise DataError(
                f"{path}: annotations[{i}]: expected an object with `image_id` and "
                f"`caption` (a string), got {json.dumps(note)[:80]}"
            )
        image_id = note["image_id"]
        if not is_id(image_id) or image_id not in images:
            raise DataError(
                f"{path}: annotations[{i}]: image_id {image_id!r} is not in `images`; "
                f"expected the id of one of its {len(images)} photos"
            )
        if not normalise_caption(note["caption"]):
            raise DataError(
                f"{path}: annotations[{i}]: empty caption for {images[image_id][1]} "
                f"(image {image_id}; no word left after lower-casing and dropping "
                "punctuation)"
            )
        captions.setdefault(image_id, []).append(normalise_caption(note["caption"]))
    bare = [image_id for image_id in images if image_id not in captions]
    if bare:
        i, name = images[bare[0]]
        raise DataError(
            f"{path}: {len(bare)} image(s) in `images` without a caption in "
            f"`annotations`, e.g. images[{i}] (id {bare[0]}, {name}); expected one or "
            "more per photo"
        )
    return (
        {name: captions[k] for k, (_, name) in images.items()},
        {name: k for k, (_, name) in images.items()},
    )


def coco_captions(
    base: Path,
    splits: Mapping[str, Mapping | None],
    valid_fraction: float,
    test_fraction: float,
    seed: int,
    max_images: int | None,
) -> dict[str, dict[str, list[str]]]:
    """COCO's layout -> {split: {image path (in base): [captions]}}; train carves the rest."""
    given, seen = {}, {}
    for split in (s for s in SPLITS if splits.get(s)):
        path, folder = base / splits[split]["annotations"], Path(splits[split]["images"])
        if not (base / folder).is_dir():
            raise DataError(
                f"{base / folder}: folder not found (data.path/data.splits.{split}."
                f"images: the photos of {splits[split]['annotations']})"
            )
        captions, image_ids = read_coco(path)
        for name, image_id in image_ids.items():
            photo = (folder / name).as_posix()
            for key, what in ((image_id, f"image id {image_id}"), (photo, photo)):
                if key in seen:
                    raise DataError(
                        f"{path}: {what} is in {seen[key]} and in {split}: a photo's "
                        "captions stay in one split"
                    )
                seen[key] = f"{split} ({splits[split]['annotations']})"
        names = sorted(captions)[:max_images] if max_images else sorted(captions)
        given[split] = {(folder / n).as_posix(): captions[n] for n in names}
    train = given.pop("train")
    fractions = carved_fractions(
        {"valid_fraction": valid_fraction, "test_fraction": test_fraction, "seed": seed},
        given,
        "caption",
        splits["train"]["annotations"],
        "of the photos",
    )
    carved = split_by_image(list(train), *fractions, seed)
    return {s: given.get(s) or {n: c for n, c in train.items() if carved[n] == s} for s in SPLITS}


def photo_folder(data: Mapping, base: Path) -> Path:
    """The folder rows' "image" names are in: base/images_dir (Flickr8k's layout), base (COCO's)."""
    return base / data["images_dir"] if data["source"] == "image_captions" else base


def photo_rows(captions: dict[str, dict[str, list[str]]], where: Path) -> dict[str, list[dict]]:
    """{split: rows {"image", "caption" (the first), "captions" (all)}}, photos in name order."""
    total = sum(len(part) for part in captions.values())
    for s, part in captions.items():
        if not part:  # `where`: the file the splits were carved from
            raise DataError(
                f"{where}: no photo in the {s} split ({total} photos; raise "
                f"data.{s}_fraction or give the split)"
            )
    return {
        s: [{"image": n, "caption": part[n][0], "captions": part[n]} for n in sorted(part)]
        for s, part in captions.items()
    }
