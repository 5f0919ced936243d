"""The photo path exported whole (frozen EfficientNet-Lite0 + decoder step, attention over the 7×7
grid): parity with torch, onnxruntime-only captions of photos of any size read as prepare reads
them, `attention-lab caption` on a photo with its overlay, and every bad photo named
(docs/bad_inputs.md, "attention-lab caption")."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from attention_lab.caption.data.features import annotations
from attention_lab.caption.data.photos import ImageError, read_photo
from attention_lab.caption.export import ExportError, PhotoCaptioner, export_captioner
from attention_lab.caption.search import caption_batch
from attention_lab.caption.serve import OnnxCaptioner
from tests.caption.test_photos import zero_png
from tests.processes import run_python
from tests.tiny_models import photo_png, tiny_model

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
# slow: it trains, exports or runs stages (`make test-fast` leaves it out)


@pytest.mark.parametrize("family", ["show_attend_tell", "show_tell"])
def test_parity_of_the_whole_photo_path(photo_export, family):
    _, folder, parity = photo_export(family)
    print(
        f"{family} parity: {json.dumps(parity['max_abs_diff'])}, greedy identical"
        f" {parity['greedy_identical']}"
    )
    assert (
        parity["ok"] and parity["greedy_identical"] and max(parity["max_abs_diff"].values()) <= 1e-4
    )
    assert [c["batch"] for c in parity["cases"]] == [1, 3, 5]
    meta = json.loads((folder / "meta.json").read_text())
    assert (meta["input"], meta["encoder"], meta["height"], meta["width"], meta["grid"]) == (
        "photo",
        "efficientnet_lite0",
        224,
        224,
        [7, 7],
    )
    assert meta["has_attention"] == (family == "show_attend_tell") and meta["max_pixels"] == 10**6


def test_a_photo_model_alone_is_refused(tmp_path):
    model = tiny_model("show_tell", 12, height=224, width=224, feature_dim=1280, feature_stride=32)
    with pytest.raises(ExportError, match="reads cached annotations .* export PhotoCaptioner"):
        export_captioner(model, tmp_path, "show_tell", None, max_len=3)


def test_onnx_reads_photos_of_any_size_as_prepare_does(photo_export, tmp_path):
    """Any size and format, squashed by photos.read_photo; the exported CNN's annotations equal
    prepare's cached ones (float16) and the captions and attention equal the torch path's."""
    path, folder, _ = photo_export()
    captioner = OnnxCaptioner(folder)
    photos = {
        "wide.jpg": photo_png(300, 120, "JPEG"),
        "tall.png": photo_png(90, 260),
        "cmyk.jpg": photo_png(120, 100, "JPEG", "CMYK"),
        "tiny.png": photo_png(5, 3),
    }
    pixels = []
    for name, data in photos.items():
        (tmp_path / name).write_bytes(data)
        pixels.append(captioner.read(tmp_path / name))
        assert pixels[-1].shape == (224, 224, 3) and pixels[-1].dtype == np.uint8
        # prepare's reader
        np.testing.assert_array_equal(pixels[-1], read_photo(tmp_path / name, 224, 10**6))
    _, (memory, _) = captioner.encode(np.stack(pixels))
    cached = annotations(np.stack(pixels)).astype(np.float32)  # what prepare caches (float16)
    np.testing.assert_allclose(memory[..., :1280], cached, atol=2e-2, rtol=2e-3)  # [a_i; U a_i]
    ours = captioner.caption(pixels)
    hyps = caption_batch(path, torch.from_numpy(np.stack(pixels)), max_len=4)
    assert [[captioner.tokenizer.token_to_id(w) for w in c.words] for c in ours] == [
        h.tokens for h in hyps
    ]
    for c, h in zip(ours, hyps):
        assert c.attention.shape == (4, 7, 7) and np.allclose(
            c.attention.sum((1, 2)), 1.0, atol=1e-4
        )
        np.testing.assert_allclose(c.attention.reshape(4, 49), h.attention, atol=1e-5)


def test_export_and_serving_use_the_models_image_size(tmp_path):
    """data.image_size=448 (the paper's 14×14 grid): the export reads the size off the model's grid,
    meta.json records it, and onnxruntime squashes any photo to it as prepare does, attending over
    196 cells."""
    from tests.tiny_models import export_photo_caption

    path, folder, parity = export_photo_caption(tmp_path, "show_attend_tell", size=448)
    meta = json.loads((folder / "meta.json").read_text())
    assert parity["ok"] and (path.size, meta["height"], meta["width"], meta["grid"]) == (
        448,
        448,
        448,
        [14, 14],
    )
    captioner = OnnxCaptioner(folder)
    (tmp_path / "wide.jpg").write_bytes(photo_png(500, 375, "JPEG"))
    pixels = captioner.read(tmp_path / "wide.jpg")
    # prepare's reader
    np.testing.assert_array_equal(pixels, read_photo(tmp_path / "wide.jpg", 448, 10**6))
    _, (memory, _) = captioner.encode(pixels[None])
    assert memory.shape[:2] == (1, 196)  # [a_i; U a_i]: the annotation vectors first
    np.testing.assert_allclose(
        memory[..., :1280], annotations(pixels[None]).astype(np.float32), atol=2e-2, rtol=2e-3
    )
    [caption] = captioner.caption([pixels])
    assert caption.attention.shape == (4, 14, 14)


def test_a_photo_model_needs_a_square_grid():
    model = tiny_model("show_tell", 12, height=224, width=448, feature_dim=1280, feature_stride=32)
    with pytest.raises(ExportError, match="square grid .* got 7×14"):
        PhotoCaptioner(model, "efficientnet_lite0", 10**6)


def test_cli_captions_a_photo_without_torch(photo_export, tmp_path):
    _, folder, _ = photo_export()
    photo = tmp_path / "dog.jpg"
    photo.write_bytes(photo_png(640, 480, "JPEG"))
    proc = run_python(f"""
        import sys
        from attention_lab.cli import main
        out = "{tmp_path / "out"}"
        code = main(["caption", "--model", "{folder}", "--overlay-dir", out, "--json", "{photo}"])
        assert code == 0
        heavy = [m for m in sys.modules if m.split(".")[0] in ("torch", "lightning")]
        assert not heavy, "serving imported torch"
    """)
    assert proc.returncode == 0, proc.stderr
    [result] = json.loads(proc.stdout)
    assert len(result["words"]) == 4 and np.array(result["attention"]).shape == (4, 7, 7)
    picture = Image.open(result["overlay"])
    assert result["overlay"].endswith("dog_attention.png") and picture.size == (
        70 + 224,
        4 * (224 + 4),
    )
    # the first word's panel: the photo tinted where it attended
    red = np.asarray(picture)[:224, 70:].astype(int)
    assert (red[..., 0] - red[..., 2]).max() > 100


def bad_photo(kind: str) -> bytes:
    """Bytes of each bad photo kind (the CMYK one is read, converted to RGB)."""
    if kind == "not-an-image":
        return b"GIF? no: plain text"
    if kind == "truncated":
        return photo_png(400, 300, "JPEG")[:900]
    if kind == "zero":
        return zero_png()
    if kind == "huge":
        return photo_png(1200, 900)  # 1,080,000 pixels, over the export's max_pixels = 1,000,000
    return b""


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("not-an-image", "bad.jpg: not an image Pillow can read (expected JPEG or PNG)"),
        ("truncated", "bad.jpg: truncated image (image file is truncated"),
        ("zero", "bad.jpg: not an image Pillow can read (expected JPEG or PNG)"),
        (
            "huge",
            "bad.jpg: 1200×900 = 1,080,000 pixels, over the cap max_pixels (meta.json) = 1,000,000",
        ),
        ("empty", "bad.jpg: empty file, expected a JPEG or PNG photo"),
    ],
    ids=["not-an-image", "truncated", "0x0", "huge", "empty"],
)
def test_bad_photos_are_named(photo_export, tmp_path, kind, message):
    captioner = OnnxCaptioner(photo_export()[1])
    (tmp_path / "bad.jpg").write_bytes(bad_photo(kind))
    for source in (tmp_path / "bad.jpg", (tmp_path / "bad.jpg").read_bytes()):
        with pytest.raises(ImageError) as err:
            captioner.read(source, name="bad.jpg" if isinstance(source, bytes) else None)
        assert message in str(err.value), err.value
    with pytest.raises(ImageError, match=r"missing.jpg: no such file"):
        captioner.read(tmp_path / "missing.jpg")


def test_cli_names_a_bad_photo_and_writes_nothing(photo_export, tmp_path):
    from tests.processes import run_cli

    good, bad = tmp_path / "good.png", tmp_path / "cut.jpg"
    good.write_bytes(photo_png())
    bad.write_bytes(bad_photo("truncated"))
    proc = run_cli(
        [
            "caption",
            "--model",
            str(photo_export()[1]),
            "--overlay-dir",
            str(tmp_path / "out"),
            str(good),
            str(bad),
        ]
    )
    assert proc.returncode == 2 and f"{bad}: truncated image" in proc.stderr, proc.stderr
    assert not (tmp_path / "out").exists()
