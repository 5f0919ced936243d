"""caption_export + serving.captioner: two ONNX graphs with attention, parity, onnxruntime-only
captions, the `attention-lab caption` command and its answers to bad images."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from attention_lab.caption.export import export_and_check_captioner, random_images
from attention_lab.caption.search import caption_batch
from attention_lab.caption.serve import ImageError, OnnxCaptioner, overlay, read_image
from attention_lab.infer.tokenization import train_word_tokenizer
from tests.processes import run_cli, run_python
from tests.tiny_models import DIGIT_WORDS, tiny_model

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
# slow: it trains, exports or runs stages (`make test-fast` leaves it out)


@pytest.fixture(scope="module", params=["show_attend_tell", "show_tell", "show_tell/every_step"])
def exported(request, tmp_path_factory):
    """A random-weight captioner of 16×64 canvases exported as the export stage does (eos pushed
    down: long captions); show_tell feeding its image once (conf/model) and beside every word
    (params.yaml's choice)."""
    family, _, image_input = request.param.partition("/")
    root = tmp_path_factory.mktemp(family)
    tok = train_word_tokenizer([[DIGIT_WORDS]], vocab_size=100, min_frequency=1)
    tok.save(str(root / "tokenizer.json"))
    model = tiny_model(
        family, tok.get_vocab_size(), **({"image_input": image_input} if image_input else {})
    )
    with torch.no_grad():
        out = model.L_o if hasattr(model, "L_o") else model.out
        out.bias[2] = -30.0
    parity = export_and_check_captioner(
        model, root / "onnx", family, root / "tokenizer.json", max_len=5
    )
    return model, root / "onnx", parity


def test_parity_and_meta(exported):
    model, folder, parity = exported
    assert (
        parity["ok"] and parity["greedy_identical"] and max(parity["max_abs_diff"].values()) <= 1e-4
    )
    meta = json.loads((folder / "meta.json").read_text())
    assert (
        meta["task"] == "caption"
        and meta["grid"] == [4, 16]
        and (meta["height"], meta["width"]) == (16, 64)
    )
    assert meta["has_attention"] == model.has_attention


def test_onnx_captions_equal_torch(exported):
    model, folder, _ = exported
    images = random_images(3, 16, 64, seed=5)
    captioner = OnnxCaptioner(folder)
    ours = captioner.caption(list(images))
    torch_hyps = caption_batch(model, torch.from_numpy(images), max_len=5)
    assert [[captioner.tokenizer.token_to_id(w) for w in c.words] for c in ours] == [
        h.tokens for h in torch_hyps
    ]
    for c in ours:
        assert len(c.words) == 5 and c.attention.shape == (5, 4, 16)
        if model.has_attention:
            assert np.allclose(c.attention.sum((1, 2)), 1.0, atol=1e-4)


def test_overlay_has_a_panel_per_word():
    picture = overlay(
        np.zeros((16, 64), np.float32),
        ["one", "two"],
        np.ones((2, 4, 16)) / 64,
        scale=2,
        boxes=[[0, 0, 8, 8]],
    )
    assert picture.size == (70 + 128, 2 * 32 + 2 * 4)


def test_cli_caption_without_torch_and_bad_images(exported, tmp_path):
    _, folder, _ = exported
    good = tmp_path / "canvas.png"
    Image.fromarray((random_images(1, 16, 64, 9)[0] * 255).astype(np.uint8)).save(good)
    proc = run_python(f"""
        import json, sys
        from attention_lab.cli import main
        out = "{tmp_path / "out"}"
        code = main(["caption", "--model", "{folder}", "--overlay-dir", out, "--json", "{good}"])
        assert code == 0
        heavy = [m for m in sys.modules if m.split(".")[0] in ("torch", "lightning")]
        assert not heavy, "serving imported torch"
    """)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)[0]
    assert len(result["words"]) == 5 and result["overlay"].endswith("canvas_attention.png")
    assert Image.open(result["overlay"]).size[1] > 16

    wrong = tmp_path / "wrong.png"
    Image.fromarray(np.zeros((20, 64), np.uint8)).save(wrong)
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "text.png").write_text("not an image")
    for name, message in [
        ("wrong.png", "is 64×20 pixels, expected 64×16"),
        ("empty.png", "empty file"),
        ("text.png", "not a readable image"),
        ("missing.png", "no such file"),
    ]:
        out_dir = tmp_path / f"out-{name}"
        bad = run_cli(
            [
                "caption",
                "--model",
                str(folder),
                "--overlay-dir",
                str(out_dir),
                str(good),
                str(tmp_path / name),
            ]
        )
        assert bad.returncode == 2 and name in bad.stderr and message in bad.stderr, bad.stderr
        assert not out_dir.exists()  # every image is checked before anything is written


def test_read_image_accepts_bytes_and_names_the_upload():
    data = Image.fromarray(np.full((16, 64), 255, np.uint8))
    import io

    buf = io.BytesIO()
    data.save(buf, format="PNG")
    assert read_image(buf.getvalue(), 16, 64).max() == 1.0
    with pytest.raises(ImageError, match="upload.png: the image is 64×16 pixels, expected 32×8"):
        read_image(buf.getvalue(), 8, 32, name="upload.png")
