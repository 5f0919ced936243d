"""A tiny photo set in Flickr8k's layout, drawn by the tests: coloured shapes of several sizes and
modes, saved as JPEG and PNG, three captions each ("a red circle", ...); and tiny PNGs with COCO's
caption JSON."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw

COLOURS = {"red": (220, 30, 30), "green": (30, 180, 40), "blue": (30, 60, 220)}
SHAPES = ("circle", "square", "triangle")
# (width, height, PIL mode, format): any size, RGB, grayscale, palette, RGBA and CMYK, JPEG and PNG
VARIANTS = [
    (96, 64, "RGB", "JPEG"),
    (300, 200, "RGB", "PNG"),
    (64, 128, "CMYK", "JPEG"),
    (80, 80, "RGBA", "PNG"),
    (120, 90, "P", "PNG"),
]


def draw(shape: str, colour: str, width: int, height: int) -> Image.Image:
    """One shape in one colour, centred on white."""
    im = Image.new("RGB", (width, height), "white")
    d, s = ImageDraw.Draw(im), min(width, height)
    x0, y0, x1, y1 = (
        (width - s * 0.7) / 2,
        (height - s * 0.7) / 2,
        (width + s * 0.7) / 2,
        (height + s * 0.7) / 2,
    )
    fill = COLOURS[colour]
    if shape == "circle":
        d.ellipse([x0, y0, x1, y1], fill=fill)
    elif shape == "square":
        d.rectangle([x0, y0, x1, y1], fill=fill)
    else:
        d.polygon([((x0 + x1) / 2, y0), (x1, y1), (x0, y1)], fill=fill)
    return im


def write_photo_set(base: Path, per_pair: int = 2, header: str = "image,caption") -> list[str]:
    """base/Images/<shape>_<colour>_<k>.jpg|png and base/captions.txt; returns the image names."""
    (base / "Images").mkdir(parents=True, exist_ok=True)
    rows, names, v = [header], [], 0
    for shape in SHAPES:
        for colour in COLOURS:
            for k in range(per_pair):
                w, h, mode, fmt = VARIANTS[v % len(VARIANTS)]
                v += 1
                name = f"{shape}_{colour}_{k}.{'jpg' if fmt == 'JPEG' else 'png'}"
                draw(shape, colour, w, h).convert(mode).save(base / "Images" / name, fmt)
                names.append(name)
                rows += [
                    f"{name},a {colour} {shape}",
                    f"{name},A {colour.upper()} {shape} on white .",
                    f'{name},"a {shape}, {colour}, in the middle"',
                ]
    (base / "captions.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return names


COCO_CAPTIONS = ("A {colour} {shape}.", "a {shape} , {COLOUR} !", "the {colour} {shape} on white")


def write_coco_split(base: Path, annotations: str, images: str, n: int, first_id: int = 1) -> dict:
    """base/<images>/<id:012d>.png (48×32 shapes) and base/<annotations>, COCO's caption JSON."""
    (base / images).mkdir(parents=True, exist_ok=True)
    data = {"info": {"description": "drawn"}, "licenses": [], "images": [], "annotations": []}
    drawn = [(SHAPES[k % 3], list(COLOURS)[k // 3 % 3], first_id + k) for k in range(n)]
    for shape, colour, image_id in drawn:
        name = f"{image_id:012d}.png"
        draw(shape, colour, 48, 32).save(base / images / name)
        data["images"].append(
            {"license": 1, "file_name": name, "height": 32, "width": 48, "id": image_id}
        )
    for j, text in enumerate(COCO_CAPTIONS):  # photo by photo in turn, as COCO lists them
        for shape, colour, image_id in drawn:
            caption = text.format(shape=shape, colour=colour, COLOUR=colour.upper())
            data["annotations"].append(
                {"image_id": image_id, "id": 10 * image_id + j, "caption": caption}
            )
    (base / annotations).parent.mkdir(parents=True, exist_ok=True)
    (base / annotations).write_text(json.dumps(data), encoding="utf-8")
    return data
