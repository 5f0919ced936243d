"""The photo reader (Flickr8k's layout and COCO's): captions, splits by image, every mode and size
of photo, and every bad input named (docs/bad_inputs.md, "Photos and captions")."""

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from attention_lab.caption.data.photos import (
    coco_captions,
    flickr_captions,
    normalise_caption,
    photo_folder,
    photo_rows,
    read_coco,
    read_photo,
    split_by_image,
)
from attention_lab.core.readers import DataError
from tests.caption.photo_set import write_coco_split, write_photo_set


def splits_of(base: Path, **kw) -> dict:
    args = {
        "split_field": None,
        "split_file": None,
        "valid_fraction": 0.2,
        "test_fraction": 0.2,
        "seed": 1,
        "max_images": None,
        **kw,
    }
    captions = flickr_captions(base, "Images", "captions.txt", **args)
    return photo_rows(captions, base / "captions.txt")


def test_captions_grouped_by_image_and_split_by_image(tmp_path):
    names = write_photo_set(tmp_path)
    splits = splits_of(tmp_path)
    seen = [r["image"] for rows in splits.values() for r in rows]
    # every photo in exactly one split
    assert sorted(seen) == sorted(names) and len(set(seen)) == len(seen)
    row = next(
        r
        for r in splits["train"] + splits["valid"] + splits["test"]
        if r["image"] == "circle_red_0.jpg"
    )
    assert row["captions"] == [
        "a red circle",
        "a red circle on white",
        "a circle red in the middle",
    ]
    # reproducible, seeded
    assert splits_of(tmp_path) == splits and splits_of(tmp_path, seed=2) != splits
    assert [len(splits[s]) for s in ("train", "valid", "test")] == [10, 4, 4]


def test_split_field_and_split_file(tmp_path):
    names = write_photo_set(tmp_path, header="image,caption,split")
    lines = (tmp_path / "captions.txt").read_text().splitlines()
    which = {
        n: ("test" if i % 6 == 0 else "val" if i % 6 == 1 else "train") for i, n in enumerate(names)
    }
    body = [f"{line},{which[line.split(',')[0]]}" for line in lines[1:]]
    (tmp_path / "captions.txt").write_text("\n".join([lines[0], *body]) + "\n")
    splits = splits_of(tmp_path, split_field="split")
    assert {r["image"] for r in splits["valid"]} == {n for n, s in which.items() if s == "val"}
    # the quoted caption with commas kept whole
    assert splits["valid"][0]["captions"][2].startswith("a ")
    split_file = tmp_path / "splits.csv"
    split_file.write_text("image,split\n" + "".join(f"{n},{s}\n" for n, s in which.items()))
    assert splits_of(tmp_path, split_file=split_file) == splits
    split_file.write_text(
        "image,split\n" + "".join(f"{n},{s}\n" for n, s in list(which.items())[1:])
    )
    with pytest.raises(
        DataError, match=r"splits.csv: no split for 1 captioned photo\(s\), e.g. circle_red_0.jpg"
    ):
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
    chunk = lambda kind, body: (
        struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    )
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b""))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("circle_red_0.jpg", None, r"circle_red_0.jpg: image not found \(named in captions.txt\)"),
        (
            "circle_red_0.jpg",
            b"not an image at all",
            r"circle_red_0.jpg: not an image Pillow can read",
        ),
        ("square_red_0.png", "truncated", r"square_red_0.png: truncated image"),
        ("triangle_red_0.png", zero_png(), r"triangle_red_0.png: not an image Pillow can read"),
    ],
)
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
    with pytest.raises(
        DataError,
        match=r"big.png: 2000×1000 = 2,000,000 pixels, over the cap data.max_pixels = "
        r"1,000,000",
    ):
        read_photo(path, 224, 10**6)
    # Pillow's own guard fires first, at open
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100_000)
    with pytest.raises(
        DataError, match=r"big.png: over Pillow's pixel cap \(PIL.Image.DecompressionBombError"
    ):
        read_photo(path, 224, 10**7)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,text\na.jpg,a cat\n", r"captions.txt:1: expected the header `image,caption`"),
        (
            "image,caption\ncircle_red_0.jpg, . ,\n",
            r"captions.txt:2: empty caption for circle_red_0.jpg",
        ),
        ("image,caption\ncircle_red_0.jpg\n", r"captions.txt:2: expected `image,caption`"),
        ("image,caption\n", r"captions.txt: no caption rows after the header"),
        ("", r"captions.txt: file is empty"),
    ],
)
def test_bad_captions_files_are_named(tmp_path, text, message):
    write_photo_set(tmp_path, per_pair=1)
    (tmp_path / "captions.txt").write_text(text)
    with pytest.raises(DataError, match=message):
        splits_of(tmp_path)


def test_a_missing_images_folder_and_a_bad_split_value(tmp_path):
    with pytest.raises(DataError, match=r"Images: folder not found"):
        splits_of(tmp_path)
    write_photo_set(tmp_path, per_pair=1, header="image,caption,split")
    with pytest.raises(
        DataError, match=r"captions.txt:2: split must be train, valid \(val, dev\) or test, got ''"
    ):
        splits_of(tmp_path, split_field="split")


# ------------------------------------------------------------------------------- COCO's layout

TRAIN = {"annotations": "annotations/captions_train2017.json", "images": "images/train2017"}
VAL = {"annotations": "annotations/captions_val2017.json", "images": "images/val2017"}


def coco_of(base: Path, splits: dict | None = None, **kw) -> dict:
    args = {"valid_fraction": 0.25, "test_fraction": 0.25, "seed": 1, "max_images": None, **kw}
    return coco_captions(base, splits or {"train": TRAIN}, **args)


def test_coco_captions_grouped_by_image_and_split_by_image(tmp_path, capsys):
    data = write_coco_split(tmp_path, TRAIN["annotations"], TRAIN["images"], 12)
    splits = coco_of(tmp_path)
    assert [len(splits[s]) for s in ("train", "valid", "test")] == [6, 3, 3]
    seen = [name for part in splits.values() for name in part]
    assert sorted(seen) == [f"images/train2017/{i['file_name']}" for i in data["images"]]
    first = "images/train2017/000000000001.png"
    captions = next(part[first] for part in splits.values() if first in part)
    assert captions == ["a red circle", "a circle red", "the red circle on white"]  # in file order
    assert coco_of(tmp_path) == splits and coco_of(tmp_path, seed=2) != splits  # seeded
    assert capsys.readouterr().out == ""  # one file: split as image_captions splits, silently
    rows = photo_rows(splits, tmp_path / TRAIN["annotations"])
    assert rows["valid"][0]["caption"] == rows["valid"][0]["captions"][0]


def test_coco_files_per_split_and_the_rest_carved_from_train(tmp_path, capsys):
    write_coco_split(tmp_path, TRAIN["annotations"], TRAIN["images"], 12)
    write_coco_split(tmp_path, VAL["annotations"], VAL["images"], 4, first_id=101)
    splits = coco_of(tmp_path, {"train": TRAIN, "valid": None, "test": VAL})
    assert list(splits["test"]) == [f"images/val2017/{101 + k:012d}.png" for k in range(4)]
    assert [len(splits[s]) for s in ("train", "valid")] == [9, 3]  # test_fraction ignored
    assert (
        "prepare_caption: valid: carved from annotations/captions_train2017.json (25% of the "
        "photos, seed 1): no valid split given"
    ) in capsys.readouterr().out
    capped = coco_of(tmp_path, {"train": TRAIN, "test": VAL}, max_images=8)
    assert [len(capped[s]) for s in ("train", "valid", "test")] == [6, 2, 4]  # 8 of each file
    assert photo_folder({"source": "coco_captions"}, tmp_path) == tmp_path  # rows name images/...
    flickr = {"source": "image_captions", "images_dir": "Images"}
    assert photo_folder(flickr, tmp_path) == tmp_path / "Images"


def test_real_coco_json_of_coco_mini(shared_data):
    """The 159 photos of shared/data/coco_mini's COCO JSON: five captions each, normalised."""
    base = shared_data / "coco_mini"
    files = {
        "train": {
            "annotations": "annotations/captions_train2017.cocomini.json",
            "images": "images/train2017",
        },
        "test": {
            "annotations": "annotations/captions_val2017.cocomini.json",
            "images": "images/val2017",
        },
    }
    splits = coco_of(base, files, valid_fraction=0.1)
    assert [len(splits[s]) for s in ("train", "valid", "test")] == [72, 8, 79]
    photos = {name: captions for part in splits.values() for name, captions in part.items()}
    assert len(photos) == 159 and all((base / name).is_file() for name in photos)
    assert {len(captions) for captions in photos.values()} == {5}
    assert all(c and c == normalise_caption(c) for captions in photos.values() for c in captions)
    captions, ids = read_coco(base / files["test"]["annotations"])
    assert ids["000000397133.jpg"] == 397133
    assert captions["000000397133.jpg"][0] == "a man is in a kitchen making pizzas"


def drop_captions(data: dict, *image_ids: int) -> None:
    data["annotations"] = [a for a in data["annotations"] if a["image_id"] not in image_ids]


EXPECTED = r"; expected COCO's caption JSON, "
BAD_COCO = [  # (edit of the JSON, or the file's text; the message after `captions_train2017.json`)
    pytest.param(
        "{images: []}",
        r":1: not JSON \(Expecting property name enclosed in double quotes, column 2\)"
        + EXPECTED
        + r"an object with `images` and `annotations`",
        id="not-json",
    ),
    pytest.param(
        "[]",
        r": a JSON list at the top level" + EXPECTED + "an object with `images` and `annotations`",
        id="not-an-object",
    ),
    pytest.param(
        lambda d: d.pop("images"),
        r": no `images` list at the top level \(keys: info, licenses, annotations\)"
        + EXPECTED
        + r"with `images`: \[\{id, file_name, ...\}, ...\]",
        id="no-images",
    ),
    pytest.param(
        lambda d: d.pop("annotations"),
        r": no `annotations` list at the top level \(keys: info, licenses, images\)"
        + EXPECTED
        + r"with `annotations`: \[\{image_id, id, caption\}, ...\]",
        id="no-annotations",
    ),
    pytest.param(
        lambda d: d["annotations"][4].update(image_id=999),
        r": annotations\[4\]: image_id 999 is not in `images`; expected the id of one of its 6 "
        r"photos",
        id="image-id-not-in-images",
    ),
    pytest.param(
        lambda d: drop_captions(d, 2, 5),
        r": 2 image\(s\) in `images` without a caption in `annotations`, e.g. images\[1\] \(id 2, "
        r"000000000002.png\); expected one or more per photo",
        id="image-without-caption",
    ),
    pytest.param(
        lambda d: d["annotations"][0].update(caption=" . !"),
        r": annotations\[0\]: empty caption for 000000000001.png \(image 1; no word left after "
        r"lower-casing and dropping punctuation\)",
        id="empty-caption",
    ),
    pytest.param(
        lambda d: d["images"][3].update(id=1),
        r": images\[3\]: image id 1 twice \(images\[0\] has it too\); expected one entry per photo",
        id="image-id-twice",
    ),
    pytest.param(
        lambda d: d["images"][3].update(file_name="000000000001.png"),
        r": images\[3\]: file_name 000000000001.png twice \(images\[0\] has it too\); expected one "
        r"entry per photo",
        id="file-name-twice",
    ),
    pytest.param(
        lambda d: d["images"][2].pop("file_name"),
        r": images\[2\]: expected an object with `id` \(an integer\) and `file_name` \(a string\), "
        r"got \{\"license\": 1, ",
        id="image-without-file-name",
    ),
    pytest.param(
        lambda d: d["annotations"][1].update(caption=None),
        r": annotations\[1\]: expected an object with `image_id` and `caption` \(a string\), got "
        r"\{\"image_id\": 2, ",
        id="caption-not-text",
    ),
    pytest.param(
        lambda d: d.update(images=[]),
        r": `images` is empty; expected one entry per photo",
        id="no-images-listed",
    ),
]


@pytest.mark.parametrize(("edit", "message"), BAD_COCO)
def test_bad_coco_json_is_named(tmp_path, edit, message):
    """Each bad COCO caption JSON names the file, the JSON index and what was expected."""
    data = write_coco_split(tmp_path, TRAIN["annotations"], TRAIN["images"], 6)
    if callable(edit):
        edit(data)
    text = edit if isinstance(edit, str) else json.dumps(data)
    (tmp_path / TRAIN["annotations"]).write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match="captions_train2017.json" + message):
        coco_of(tmp_path)


def test_bad_coco_splits_are_named(tmp_path):
    """A photo in two splits (by id or by file), a missing folder or file, an empty carved split."""
    write_coco_split(tmp_path, TRAIN["annotations"], TRAIN["images"], 12)
    write_coco_split(tmp_path, VAL["annotations"], VAL["images"], 4, first_id=5)  # train's ids
    with pytest.raises(
        DataError,
        match=r"captions_val2017.json: image id 5 is in train "
        r"\(annotations/captions_train2017.json\) and in test: a "
        r"photo's captions stay in one split",
    ):
        coco_of(tmp_path, {"train": TRAIN, "test": VAL})
    data = write_coco_split(tmp_path, VAL["annotations"], VAL["images"], 4, first_id=101)
    for image in data["images"]:  # the same photos under other ids
        image["id"] += 100
    for note in data["annotations"]:
        note["image_id"] += 100
    (tmp_path / "annotations/copy.json").write_text(json.dumps(data))
    copy = VAL | {"annotations": "annotations/copy.json"}
    with pytest.raises(
        DataError,
        match=r"copy.json: images/val2017/000000000101.png is in valid "
        r"\(annotations/captions_val2017.json\) and in test",
    ):
        coco_of(tmp_path, {"train": TRAIN, "valid": VAL, "test": copy})
    with pytest.raises(
        DataError,
        match=r"images/test2017: folder not found \(data.path/data."
        r"splits.test.images: the photos of annotations/captions_val2017.json\)",
    ):
        coco_of(tmp_path, {"train": TRAIN, "test": VAL | {"images": "images/test2017"}})
    with pytest.raises(
        DataError,
        match=r"captions_test2017.json: file not found \(expected COCO's "
        r"caption JSON\)",
    ):
        coco_of(tmp_path, {"train": TRAIN, "test": VAL | {"annotations": "captions_test2017.json"}})
    with pytest.raises(
        DataError,
        match=r"captions_train2017.json: no photo in the valid split "
        r"\(12 photos; raise data.valid_fraction or give the split\)",
    ):
        photo_rows(coco_of(tmp_path, valid_fraction=0.01), tmp_path / TRAIN["annotations"])
