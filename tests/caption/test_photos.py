"""The photo reader (Flickr8k's layout): captions, splits by image, every mode and size of photo, and every bad input
named (docs/bad_inputs.md, "Photos and captions")."""

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from attention_lab.caption.data.photos import normalise_caption, photo_splits, read_photo, split_by_image
from attention_lab.core.readers import DataError
from tests.caption.photo_set import write_photo_set


def splits_of(base: Path, **kw) -> dict:
    args = {"split_field": None, "split_file": None, "valid_fraction": 0.2, "test_fraction": 0.2, "seed": 1,
            "max_images": None, **kw}
    return photo_splits(base, "Images", "captions.txt", **args)


def test_captions_grouped_by_image_and_split_by_image(tmp_path):
    names = write_photo_set(tmp_path)
    splits = splits_of(tmp_path)
    seen = [r["image"] for rows in splits.values() for r in rows]
    assert sorted(seen) == sorted(names) and len(set(seen)) == len(seen)  # every photo in exactly one split
    row = next(r for r in splits["train"] + splits["valid"] + splits["test"] if r["image"] == "circle_red_0.jpg")
    assert row["captions"] == ["a red circle", "a red circle on white", "a circle red in the middle"]
    assert splits_of(tmp_path) == splits and splits_of(tmp_path, seed=2) != splits  # reproducible, seeded
    assert [len(splits[s]) for s in ("train", "valid", "test")] == [10, 4, 4]


def test_split_field_and_split_file(tmp_path):
    names = write_photo_set(tmp_path, header="image,caption,split")
    lines = (tmp_path / "captions.txt").read_text().splitlines()
    which = {n: ("test" if i % 6 == 0 else "val" if i % 6 == 1 else "train") for i, n in enumerate(names)}
    body = [f"{line},{which[line.split(',')[0]]}" for line in lines[1:]]
    (tmp_path / "captions.txt").write_text("\n".join([lines[0], *body]) + "\n")
    splits = splits_of(tmp_path, split_field="split")
    assert {r["image"] for r in splits["valid"]} == {n for n, s in which.items() if s == "val"}
    assert splits["valid"][0]["captions"][2].startswith("a ")  # the quoted caption with commas kept whole
    split_file = tmp_path / "splits.csv"
    split_file.write_text("image,split\n" + "".join(f"{n},{s}\n" for n, s in which.items()))
    assert splits_of(tmp_path, split_file=split_file) == splits
    split_file.write_text("image,split\n" + "".join(f"{n},{s}\n" for n, s in list(which.items())[1:]))
    with pytest.raises(DataError, match=r"splits.csv: no split for 1 captioned photo\(s\), e.g. circle_red_0.jpg"):
        splits_of(tmp_path, split_file=split_file)


def test_every_mode_and_size_becomes_rgb_at_the_encoder_size(tmp_path):
    write_photo_set(tmp_path, per_pair=1)
    for path in sorted((tmp_path / "Images").iterdir()):
        photo = read_photo(path, 224, 10**6)
        assert photo.shape == (224, 224, 3) and photo.dtype == np.uint8
    cmyk = tmp_path / "Images" / "circle_blue_0.jpg"  # CMYK JPEG: converted, stays blue
    assert Image.open(cmyk).mode == "CMYK" and read_photo(cmyk, 224, 10**6)[112, 112].argmax() == 2


def test_split_by_image_is_reproducible():
    names = [f"{i}.jpg" for i in range(50)]
    a = split_by_image(names, 0.1, 0.2, 7)
    assert a == split_by_image(list(reversed(names)), 0.1, 0.2, 7)
    assert sum(s == "valid" for s in a.values()) == 5 and sum(s == "test" for s in a.values()) == 10


def test_normalise_caption():
    assert normalise_caption("A dog's ball, RED!  ") == "a dog's ball red"


def bad(tmp_path: Path, name: str, data: bytes | None) -> Path:
    write_photo_set(tmp_path, per_pair=1)
    path = tmp_path / "Images" / name
    if data is None:
        path.unlink()
    else:
        path.write_bytes(data)
    return path


def zero_png() -> bytes:
    """A PNG whose header says 0×0 pixels (Pillow refuses to write one)."""
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", 0, 0, 8, 2, 0, 0, 0)
    chunk = lambda kind, body: struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


@pytest.mark.parametrize(("name", "data", "message"), [
    ("circle_red_0.jpg", None, r"circle_red_0.jpg: image not found \(named in captions.txt\)"),
    ("circle_red_0.jpg", b"not an image at all", r"circle_red_0.jpg: not an image Pillow can read"),
    ("square_red_0.png", "truncated", r"square_red_0.png: truncated image"),
    ("triangle_red_0.png", zero_png(), r"triangle_red_0.png: not an image Pillow can read"),
])
def test_bad_photos_are_named(tmp_path, name, data, message):
    if data == "truncated":
        buf = tmp_path / "full.png"
        Image.new("RGB", (200, 200), "red").save(buf)
        data = buf.read_bytes()[:200]
    path = bad(tmp_path, name, data)
    with pytest.raises(DataError, match=message):
        read_photo(path, 224, 10**6)


def test_huge_photos_hit_the_pixel_cap_and_pillows_bomb_guard(tmp_path, monkeypatch):
    path = tmp_path / "big.png"
    Image.new("RGB", (2000, 1000), "white").save(path)
    with pytest.raises(DataError, match=r"big.png: 2000×1000 = 2,000,000 pixels, over the cap data.max_pixels = "
                                        r"1,000,000"):
        read_photo(path, 224, 10**6)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100_000)  # Pillow's own guard fires first, at open
    with pytest.raises(DataError, match=r"big.png: over Pillow's pixel cap \(PIL.Image.DecompressionBombError"):
        read_photo(path, 224, 10**7)


@pytest.mark.parametrize(("text", "message"), [
    ("name,text\na.jpg,a cat\n", r"captions.txt:1: expected the header `image,caption`"),
    ("image,caption\ncircle_red_0.jpg, . ,\n", r"captions.txt:2: empty caption for circle_red_0.jpg"),
    ("image,caption\ncircle_red_0.jpg\n", r"captions.txt:2: expected `image,caption`"),
    ("image,caption\n", r"captions.txt: no caption rows after the header"),
    ("", r"captions.txt: file is empty"),
])
def test_bad_captions_files_are_named(tmp_path, text, message):
    write_photo_set(tmp_path, per_pair=1)
    (tmp_path / "captions.txt").write_text(text)
    with pytest.raises(DataError, match=message):
        splits_of(tmp_path)


def test_a_missing_images_folder_and_a_bad_split_value(tmp_path):
    with pytest.raises(DataError, match=r"Images: folder not found"):
        splits_of(tmp_path)
    write_photo_set(tmp_path, per_pair=1, header="image,caption,split")
    with pytest.raises(DataError, match=r"captions.txt:2: split must be train, valid \(val, dev\) or test, got ''"):
        splits_of(tmp_path, split_field="split")
