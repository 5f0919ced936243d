"""The whole caption pipeline on photos, timed: a drawn 1,000-photo set in Flickr8k's layout through
the real `dvc repro` of a copy of the project at the paper's 14×14 grid -> a section of
reports/benchmarks.md (and benchmarks.json).

    python benchmarks/photo_pipeline.py                          # 1,000 photos, image size 448
    (14×14), quick profile python benchmarks/photo_pipeline.py --photos 60 --epochs 1   # a fast
    check that it runs (figures meaningless)

The copy runs `tasks: [caption]`, both caption families, `seeds: [0]`, the quick profile with tuning
off (`caption.tune.trials: 0`: each family trains with its own settings), caption data
`image_captions` on the drawn set with `data.image_size` 448. Each stage's time is from dvc's
"Running stage" line to the next one (or the end): it holds the stage's command and dvc's hashing
and caching of its outputs. Timings share the CPU with whatever else runs: the load average is
recorded before, during (sampled every 15 s) and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

# `python benchmarks/photo_pipeline.py` finds the package
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attention_lab.pipeline.scratch import copy_project, environ
from attention_lab.results import records
from benchmarks.common import GIT_ID, ROOT, command, machine, table, write_marked_section

SPLITS = ("train", "valid", "test")
# its key in benchmarks.json and its markers in benchmarks.md (speed.py keeps both)
SECTION = "photo_pipeline"
COLOURS = {
    "red": (205, 40, 35),
    "green": (40, 160, 60),
    "blue": (40, 70, 200),
    "yellow": (235, 205, 40),
    "white": (245, 245, 240),
    "black": (25, 25, 30),
    "orange": (240, 130, 30),
    "purple": (130, 50, 160),
}
SHAPES = ("circle", "square", "triangle", "star")
# textured backgrounds, each a word in the captions
GROUNDS = ("grass", "sand", "water", "snow", "brick")
# Flickr8k-like
SIZES = [(500, 375), (500, 333), (375, 500), (500, 400), (333, 500), (480, 360), (640, 427)]
# (column, row) of a 3×2 grid
PLACES = {
    (0, 0): "at the top left",
    (1, 0): "at the top",
    (2, 0): "at the top right",
    (0, 1): "at the bottom left",
    (1, 1): "at the bottom",
    (2, 1): "at the bottom right",
}
NUMBERS = {1: "one", 2: "two", 3: "three"}


def ground(kind: str, w: int, h: int, rng: np.random.Generator) -> Image.Image:
    """A textured background w × h: grass blades, sand grain, water ripples, snow glare or a brick
    wall, with a light gradient over it (a sun from one side)."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    noise = rng.normal(0, 1, (h, w)).astype(np.float32)
    if kind == "grass":
        base, tex = np.array([60, 130, 45]), 25 * noise + 15 * np.sin(x / 3 + 2 * noise)
    elif kind == "sand":
        base, tex = np.array([200, 175, 120]), 12 * noise + 8 * np.sin((x + 2 * y) / 25)
    elif kind == "water":
        base, tex = np.array([50, 110, 170]), 6 * noise + 22 * np.sin(y / 6 + 3 * np.sin(x / 40))
    elif kind == "snow":
        base, tex = np.array([225, 230, 240]), 6 * noise - 10 * (y / h)
    else:
        row = (y // 24).astype(int)
        mortar = ((y % 24) < 3) | (((x + 30 * (row % 2)) % 60) < 3)
        base, tex = np.array([160, 70, 50]), 12 * noise - 90 * mortar
    light = 0.8 + 0.35 * (x / w if rng.random() < 0.5 else 1 - x / w)
    pixels = (base[None, None] + tex[..., None]) * light[..., None]
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def draw_shape(
    d: ImageDraw.ImageDraw, shape: str, box: tuple[float, float, float, float], fill: tuple
) -> None:
    x0, y0, x1, y1 = box
    edge = tuple(max(c - 60, 0) for c in fill)
    if shape == "circle":
        d.ellipse(box, fill=fill, outline=edge, width=3)
    elif shape == "square":
        d.rectangle(box, fill=fill, outline=edge, width=3)
    elif shape == "triangle":
        d.polygon([((x0 + x1) / 2, y0), (x1, y1), (x0, y1)], fill=fill, outline=edge)
    else:
        cx, cy, r = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2
        points = [
            (
                cx + (r if k % 2 == 0 else r / 2.3) * np.sin(k * np.pi / 5),
                cy - (r if k % 2 == 0 else r / 2.3) * np.cos(k * np.pi / 5),
            )
            for k in range(10)
        ]
        d.polygon(points, fill=fill, outline=edge)


def scene(rng: np.random.Generator) -> tuple[Image.Image, list[str]]:
    """One photo: one to three shapes of several colours in distinct places on a textured ground, a
    soft shadow under each, slightly blurred; and its five captions, each naming what is drawn in
    its own words."""
    w, h = SIZES[rng.integers(len(SIZES))]
    kind = GROUNDS[rng.integers(len(GROUNDS))]
    im = ground(kind, w, h, rng)
    n = int(rng.choice([1, 2, 3], p=[0.4, 0.4, 0.2]))
    cells = [list(PLACES)[i] for i in rng.choice(len(PLACES), n, replace=False)]
    things = []
    shadow = Image.new("L", (w, h), 0)
    ds, d = ImageDraw.Draw(shadow), ImageDraw.Draw(im)
    for col, row in sorted(cells):
        s = rng.uniform(0.18, 0.3) * min(w, h)
        cx = (col + 0.5) * w / 3 + rng.uniform(-0.08, 0.08) * w
        cy = (0.35 + 0.35 * row) * h + rng.uniform(-0.06, 0.06) * h
        box = (cx - s, cy - s, cx + s, cy + s)
        ds.ellipse((cx - s, cy + 0.7 * s, cx + 1.2 * s, cy + 1.2 * s), fill=110)
        things.append(
            (
                list(COLOURS)[rng.integers(len(COLOURS))],
                SHAPES[rng.integers(len(SHAPES))],
                box,
                PLACES[(col, row)],
                "big" if s > 0.25 * min(w, h) else "small",
            )
        )
    im = Image.composite(
        Image.new("RGB", (w, h), (20, 20, 20)), im, shadow.filter(ImageFilter.GaussianBlur(8))
    )
    d = ImageDraw.Draw(im)
    for colour, shape, box, _, _ in things:
        draw_shape(d, shape, box, COLOURS[colour])
    im = im.filter(ImageFilter.GaussianBlur(0.8))
    return im, captions(things, kind)


def captions(things: list[tuple], kind: str) -> list[str]:
    """Five captions of a scene, as five people might write them."""
    names = [f"{'an' if c[0] in 'aeiou' else 'a'} {c} {s}" for c, s, *_ in things]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    where = {
        "grass": "on the grass",
        "sand": "on the sand",
        "water": "on the water",
        "snow": "in the snow",
        "brick": "in front of a brick wall",
    }[kind]
    c, s, _, place, size = things[0]
    shapes = "shape" if len(things) == 1 else "shapes"
    return [
        f"{listed} {where}.",
        f"{NUMBERS[len(things)].capitalize()} {shapes} {where}.",
        f"A {size} {c} {s} {place}.",
        " and ".join(f"{n} {p}" for n, (_, _, _, p, _) in zip(names, things)).capitalize(),
        f"{listed.capitalize()}, {kind} behind.",
    ]


def write_photo_set(base: Path, n: int, seed: int = 0) -> dict:
    """base/Images/photo_<k>.jpg (JPEG, quality 90) and base/captions.txt (`image,caption`, five
    rows a photo)."""
    rng = np.random.default_rng(seed)
    (base / "Images").mkdir(parents=True, exist_ok=True)
    rows, sizes = ["image,caption"], []
    for k in range(n):
        im, caps = scene(rng)
        name = f"photo_{k:04d}.jpg"
        im.save(base / "Images" / name, "JPEG", quality=90)
        sizes.append(im.size)
        rows += [f'{name},"{c}"' for c in caps]
    (base / "captions.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    mb = sum(p.stat().st_size for p in (base / "Images").iterdir()) / 1e6
    return {
        "photos": n,
        "captions": len(rows) - 1,
        "megabytes": round(mb, 1),
        "mean_size": [
            round(float(np.mean([s[0] for s in sizes]))),
            round(float(np.mean([s[1] for s in sizes]))),
        ],
    }


def caption_copy(dest: Path, corpus: Path, image_size: int, epochs: int | None) -> dict:
    """A copy of the project (pipeline.scratch) for the caption task alone on the drawn photos; its
    caption settings."""
    import yaml

    def caption_only(p: dict) -> None:
        p["tasks"] = ["caption"]
        p["translate"]["families"] = p["classify"]["families"] = p["classify"]["pretrained"] = []
        c = p["caption"]
        c["data"] = {"source": "image_captions", "path": str(corpus), "image_size": image_size}
        c["tune"]["trials"] = 0
        if epochs is not None:
            c["train"]["max_epochs"] = epochs

    copy_project(dest, ROOT, profile="quick", seeds=[0], edit=caption_only)
    c = yaml.safe_load((dest / "params.yaml").read_text(encoding="utf-8"))["caption"]
    return {
        "families": c["families"],
        "train": dict(c["train"]),
        "evaluate": dict(c["evaluate"]),
        "tokenize": dict(c["tokenize"]),
    }


def sh(args: list[str], cwd: Path, env: dict) -> None:
    subprocess.run(args, cwd=cwd, env=env, check=True, capture_output=True, text=True)


class LoadSampler(threading.Thread):
    """The 1-minute load average every `every` seconds until stopped."""

    def __init__(self, every: float = 15.0):
        super().__init__(daemon=True)
        self.every, self.samples, self.done = every, [], threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.every):
            self.samples.append(os.getloadavg()[0])


def repro(dest: Path, env: dict, log: Path) -> tuple[list[dict], float]:
    """`dvc repro` in dest, its output streamed to log -> ([{stage, seconds}] in run order, total
    seconds)."""
    stages, t0 = [], time.perf_counter()
    with log.open("w", encoding="utf-8") as out:
        proc = subprocess.Popen(
            ["dvc", "repro"],
            cwd=dest,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        for line in proc.stdout:
            now = time.perf_counter()
            out.write(f"[{now - t0:8.1f}] {line}")
            out.flush()
            if m := re.match(r"Running stage '([^']+)'", line):
                if stages:
                    stages[-1]["seconds"] = now - stages[-1].pop("start")
                stages.append({"stage": m.group(1), "start": now})
        rc = proc.wait()
    total = time.perf_counter() - t0
    if stages:
        stages[-1]["seconds"] = t0 + total - stages[-1].pop("start")
    if rc:
        raise SystemExit(f"dvc repro failed ({rc}); see {log}")
    return stages, total


def epoch_times(dest: Path, families: list[str]) -> dict:
    """Per family: the train stage's own summary of seed 0 (epochs, updates, training seconds, why
    it stopped)."""
    out = {}
    for family in families:
        for path in sorted((dest / "models" / family).glob("**/seed0/train.json"))[:1]:
            s = json.loads(path.read_text())
            out[family] = {
                k: s.get(k) for k in ("epochs", "steps", "train_seconds", "stopped_by", "params")
            }
    return out


def render(r: dict) -> list[str]:
    """The section's markdown."""
    # matplotlib comes with it: only where it renders
    from attention_lab.caption.report import coverage_line

    d, grid = r["data"], r["grid"]
    paper = ", the grid size of Xu et al. 2015" if grid == 14 else ""
    about = (
        f"{d['photos']:,} drawn photos in Flickr8k's layout (JPEG, one to three shapes of"
        f" {len(COLOURS)} colours on {len(GROUNDS)} textured grounds, mean size"
        f" {d['mean_size'][0]}×{d['mean_size'][1]}, {d['megabytes']} MB; {d['captions']:,}"
        " captions, five a photo), split by photo (seeded) into"
        f" {' / '.join(str(r['splits'][s]) for s in SPLITS)} ({' / '.join(SPLITS)}). Encoder"
        f" EfficientNet-Lite0 at `data.image_size: {r['image_size']}`: a {grid}×{grid} grid of"
        f" 1280-d annotations (L = {grid**2}{paper}). The copy of the project runs `tasks:"
        " [caption]`, both families, `seeds: [0]`, the quick profile with tuning off"
        f" (`caption.tune.trials: 0`), {r['epochs']}."
    )
    clock = (
        "Each stage's time runs from dvc's `Running stage` line to the next: the stage's command"
        " (with its Python and library start-up) and dvc's hashing and caching of its outputs."
    )
    bleu = (
        "BLEU against all five references of each test photo (sacreBLEU corpus BLEU, tokenisation"
        f" {r['tokenization']!r}, on the lower-cased, punctuation-free captions;"
        f" {r['splits']['test']} test photos, greedy decoding):"
    )
    where = f"the paper's {grid}×{grid} grid" if paper else f"a {grid}×{grid} grid"
    lines = [
        f"## Photo captioning pipeline at {where}",
        "",
        (
            f"Produced by `{r['command']}` (`benchmarks/photo_pipeline.py`); every figure below"
            " comes from that run."
        ),
        "",
        about,
        "",
        clock,
        "",
    ]
    lines += table(
        ["stage", "seconds", "share"],
        [
            [
                f"`{s['stage']}`",
                f"{s['seconds']:,.1f}",
                f"{100 * s['seconds'] / r['total_seconds']:.0f}%",
            ]
            for s in r["stages"]
        ]
        + [["**total `dvc repro`**", f"**{r['total_seconds']:,.1f}**", "100%"]],
    )
    lines += ["", bleu, ""]
    lines += table(
        ["family", "BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4"],
        [
            [f"`{f}`", *(f"{m[f'test/bleu_{n}']:.1f}" for n in range(1, 5))]
            for f, m in r["bleu"].items()
        ],
    )
    # caption/report.py's line (none in a run before 2026-11-29)
    lines += ["", *coverage_line(r.get("coverage", {}))]
    lines += [
        "",
        (
            "Training (seed 0, the train stage's own clock, epoch start to epoch end: the epoch's"
            " validation in, start-up out):"
        ),
        "",
    ]
    lines += table(
        ["family", "parameters", "epochs", "updates", "training seconds", "seconds per epoch"],
        [
            [
                f"`{f}`",
                f"{t['params']:,}",
                t["epochs"],
                f"{t['steps']:,}",
                f"{t['train_seconds']:,.1f}",
                f"{t['train_seconds'] / max(t['epochs'], 1):,.1f}",
            ]
            for f, t in r["training"].items()
        ],
    )
    if r["full_epochs"] != r["train_epochs"]:
        more = r["full_epochs"] - r["train_epochs"]
        per_epoch = sum(t["train_seconds"] / max(t["epochs"], 1) for t in r["training"].values())
        lines += [
            "",
            (
                f"At params.yaml's {r['full_epochs']} epochs the total would be about"
                f" {r['total_seconds'] + more * per_epoch:,.0f} s: this run's total plus {more}"
                f" more epochs at {per_epoch:,.1f} s (both families' seconds per epoch; early"
                " stopping (train.patience) may end training sooner)."
            ),
        ]
    load = r["load"]
    lines += [""] + table(
        ["machine", ""],
        [
            ["CPU", f"{r['machine']['cpu']}, {r['machine']['cores']} cores"],
            ["torch / onnxruntime", f"{r['machine']['torch']} / {r['machine']['onnxruntime']}"],
            ["load average before (1, 5, 15 min)", ", ".join(f"{x:.2f}" for x in load["before"])],
            ["1-min load during (every 15 s: min / mean / max)", load["during"]],
            ["load average after (1, 5, 15 min)", ", ".join(f"{x:.2f}" for x in load["after"])],
            ["photo set drawn in", f"{r['draw_seconds']:.1f} s (not in the total)"],
        ],
    )
    lines += [
        "",
        (
            "The machine has 2 cores; a load average above 2 means other jobs shared them during"
            " the run, so these times are upper bounds for a quiet machine."
        ),
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    import yaml

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--photos", type=int, default=1000, help="photos to draw")
    parser.add_argument(
        "--image-size", type=int, default=448, help="data.image_size (448: the paper's 14×14 grid)"
    )
    parser.add_argument(
        "--epochs", type=int, default=None, help="caption.train.max_epochs (default: params.yaml's)"
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="folder for the photos and the project copy (default: a temporary one, removed after)",
    )
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "benchmarks.md")
    parser.add_argument(
        "--rerender",
        action="store_true",
        help="run nothing: write the section again from the "
        "figures in --out's .json (after a change to its wording)",
    )
    args = parser.parse_args(argv)
    if args.rerender:
        figures = json.loads(args.out.with_suffix(".json").read_text(encoding="utf-8"))[SECTION]
        write_marked_section(args.out, SECTION, render(figures), figures)
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="photo-pipeline-"))
    try:
        t0 = time.perf_counter()
        data = write_photo_set(work / "photos", args.photos)
        draw_seconds = time.perf_counter() - t0
        dest = work / "project"
        settings = caption_copy(dest, work / "photos", args.image_size, args.epochs)
        env = environ(dest, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", **GIT_ID)
        for cmd in (
            ["attention-lab", "stages"],
            ["git", "init", "-q"],
            ["dvc", "init", "-q"],
            ["dvc", "config", "core.analytics", "false"],
            ["git", "add", "-A"],
            ["git", "commit", "-qm", "project"],
        ):
            sh(cmd, dest, env)
        before, sampler = os.getloadavg(), LoadSampler()
        sampler.start()
        stages, total = repro(dest, env, work / "repro.log")
        sampler.done.set()
        after = os.getloadavg()
        during = sampler.samples or [after[0]]
        stats = json.loads((dest / "data" / "prepared" / "caption" / "stats.json").read_text())
        bleu = {f: records.read_at(dest, "caption", f) for f in settings["families"]}
        epochs = settings["train"]["max_epochs"]
        full = yaml.safe_load((ROOT / "params.yaml").read_text())["caption"]["train"]["max_epochs"]
        results = {
            "command": command(__file__, argv),
            "machine": machine(),
            "image_size": args.image_size,
            "grid": args.image_size // 32,
            "data": data,
            "draw_seconds": draw_seconds,
            "splits": {
                s: v["photos"] for s, v in stats.items() if isinstance(v, dict) and "photos" in v
            },
            "epochs": (
                f"`caption.train.max_epochs: {epochs}` (params.yaml's)"
                if epochs == full
                else f"**`caption.train.max_epochs` reduced to {epochs}** (params.yaml: {full})"
            ),
            "train_epochs": epochs,
            "full_epochs": full,
            "settings": settings,
            "stages": stages,
            "total_seconds": total,
            "bleu": {
                f: {k: v for k, v in m.items() if k.startswith("test/bleu")}
                for f, m in bleu.items()
            },
            "coverage": {
                f: {
                    k: v
                    for k, v in m.items()
                    if k in ("test/vocab_coverage", "test/references_in_vocab")
                }
                # the same for both: one tokenizer, one test split
                for f, m in bleu.items()
            },
            "tokenization": "13a",  # caption/evaluate.py's bleu_scores: sacrebleu's default
            "training": epoch_times(dest, settings["families"]),
            "load": {
                "before": before,
                "after": after,
                "during": f"{min(during):.2f} / {np.mean(during):.2f} / {max(during):.2f}",
                "samples": during,
            },
        }
        write_marked_section(args.out, SECTION, render(results), results)
        print(
            json.dumps(
                {s["stage"]: round(s["seconds"], 1) for s in stages} | {"total": round(total, 1)},
                indent=1,
            )
        )
        print(
            f"wrote the section {SECTION} of {args.out} and its .json; dvc's output:"
            f" {work / 'repro.log'}",
            file=sys.stderr,
        )
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
