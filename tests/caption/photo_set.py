"""A tiny photo set in Flickr8k's layout, drawn by the tests: coloured shapes of several sizes and modes, saved as
JPEG and PNG, three captions each ("a red circle", ...)."""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw

COLOURS = {"red": (220, 30, 30), "green": (30, 180, 40), "blue": (30, 60, 220)}
SHAPES = ("circle", "square", "triangle")
# (width, height, PIL mode, format): any size, RGB, grayscale, palette, RGBA and CMYK, JPEG and PNG
VARIANTS = [(96, 64, "RGB", "JPEG"), (300, 200, "RGB", "PNG"), (64, 128, "CMYK", "JPEG"), (80, 80, "RGBA", "PNG"),
            (120, 90, "P", "PNG")]


def draw(shape: str, colour: str, width: int, height: int) -> Image.Image:
    """One shape in one colour, centred on white."""
    im = Image.new("RGB", (width, height), "white")
    d, s = ImageDraw.Draw(im), min(width, height)
    x0, y0, x1, y1 = (width - s * 0.7) / 2, (height - s * 0.7) / 2, (width + s * 0.7) / 2, (height + s * 0.7) / 2
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
                rows += [f"{name},a {colour} {shape}", f"{name},A {colour.upper()} {shape} on white .",
                         f'{name},"a {shape}, {colour}, in the middle"']
    (base / "captions.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return names
