"""End to end on photos: the real `dvc repro` of the caption task on a tiny generated image–caption
set in Flickr8k's layout (tests/caption/photo_set.py), one family, one seed, the tiny profile; then
the exported photo path captions a new photo with `attention-lab caption` on onnxruntime alone."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from attention_lab.core.files import read_jsonl
from attention_lab.infer.tokenization import encode, load_tokenizer
from attention_lab.pipeline import scratch
from tests.caption.photo_set import write_photo_set
from tests.e2e.test_pipeline import repro_project, sh
from tests.e2e.test_user_corpora import edit_tiny_profile
from tests.tiny_models import photo_png

pytestmark = pytest.mark.slow


def photos_only(params: Path) -> None:
    """tasks: [caption], show_attend_tell alone at tiny sizes, on 18 shape photos written into the
    copied project."""
    import yaml

    write_photo_set(params.parent / "corpora" / "shapes")
    p = yaml.safe_load(params.read_text())
    p["tasks"] = ["caption"]
    p["translate"]["families"] = p["classify"]["families"] = p["classify"]["pretrained"] = []
    c = p["caption"]
    c["families"] = ["show_attend_tell"]
    scratch.drop_orphans(p)  # show_tell_once: its family does not run
    c["family_params"]["show_attend_tell"] = {
        "model": {"emb_dim": 8, "hidden_dim": 16, "attn_dim": 8}
    }
    c["data"] = {
        "source": "image_captions",
        "path": "corpora/shapes",
        "valid_fraction": 0.2,
        "test_fraction": 0.2,
    }
    c["tokenize"] = {"vocab_size": 100, "min_frequency": 1}
    c["train"]["batch_size"] = 8
    params.write_text(yaml.safe_dump(p, sort_keys=False))
    # tuning is the tiny pipeline's test
    edit_tiny_profile(params.parent, "caption", tune={"trials": 0})


def test_photo_captions_through_dvc_repro(tmp_path):
    dest, seconds = repro_project(tmp_path / "project", photos_only)
    print(f"dvc repro of the photo caption pipeline: {seconds:.0f} s")
    stats = json.loads((dest / "data" / "prepared" / "caption" / "stats.json").read_text())
    assert [stats[s]["photos"] for s in ("train", "valid", "test")] == [10, 4, 4]
    metrics = json.loads((dest / "metrics" / "caption" / "show_attend_tell.json").read_text())
    assert all(0 <= metrics[f"test/bleu_{n}"] <= 100 for n in range(1, 5))
    folder = dest / "models" / "show_attend_tell" / "onnx"
    parity = json.loads((folder / "parity.json").read_text())
    assert parity["ok"] and parity["greedy_identical"], parity
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["input"] == "photo"
    # the cap follows the captions
    tok = load_tokenizer(dest / "data" / "tokenized" / "caption" / "tokenizer.json")
    longest = max(
        len(ids)
        for r in read_jsonl(dest / "data" / "prepared" / "caption" / "train.jsonl")
        # every reference caption of every training photo
        for ids in encode(tok, r["captions"])
    )
    assert meta["max_len"] == math.ceil(1.5 * longest) + 1
    assert "| `show_attend_tell` |" in (dest / "reports" / "caption.md").read_text()
    photo = tmp_path / "new.jpg"
    photo.write_bytes(photo_png(500, 333, "JPEG"))
    proc = sh(
        [
            "attention-lab",
            "caption",
            "--model",
            str(folder),
            "--overlay-dir",
            str(tmp_path),
            "--json",
            str(photo),
        ],
        dest,
    )
    [result] = json.loads(proc.stdout)
    assert (
        len(result["attention"]) == len(result["words"])
        and (tmp_path / "new_attention.png").is_file()
    )
