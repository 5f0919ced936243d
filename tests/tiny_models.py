"""The tiny models of the tests, in one place.

TINY[family]: the sizes unit tests build every family of conf/model at (constructor kwargs), and
tiny_model(), which instantiates conf/model/<family>.yaml with them: the family's own config, random
weights, seconds on one core. STAGE_TINY[family]: the sizes stage runs on a copy of the project use
(train, tune, export, pretrain, benchmarks), and stage_overrides(), which writes them as Hydra
overrides. A test that needs other sizes says so where it calls either.

Also tiny random-weight exports (a translate, a classify and a caption family) laid out as
models/<family>/onnx, for serving tests and benchmarks/serving_load.py. Imports torch inside
functions: call it from tests or the benchmark, never from serving code."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAIRS = [
    ("the cat sat on the mat", "고양이가 매트 위에 앉았다"),
    ("a dog runs in the park", "개가 공원에서 달린다"),
    ("the bird sings a song", "새가 노래를 부른다"),
    ("my friend reads the book", "내 친구가 책을 읽는다"),
]
DOCS = [
    [["the", "food", "was", "not", "good", "."], ["we", "left", "early", "."]],
    [["the", "room", "was", "lovely", "."]],
    [["at", "first", "it", "seemed", "awful", "."]],
]
LABELS = ["negative", "neutral", "positive"]
DIGIT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
CANVAS = (16, 64)  # (height, width) of the tiny captioner's canvas


def families_of(task: str) -> tuple[str, ...]:
    """The families of conf/model whose model class lives in attention_lab/<task>/, in params.yaml's
    order (a family params.yaml does not list yet comes last): the registry the tests' families
    derive from."""
    import yaml

    listed = yaml.safe_load((ROOT / "params.yaml").read_text()).get(task) or {}
    order = [*(listed.get("families") or []), *(listed.get("pretrained") or [])]
    found = [
        p.stem
        for p in sorted((ROOT / "conf" / "model").glob("*.yaml"))
        if (yaml.safe_load(p.read_text()) or {})
        .get("_target_", "")
        .startswith(f"attention_lab.{task}.")
    ]
    return tuple(sorted(found, key=lambda f: order.index(f) if f in order else len(order)))


TRANSLATE = families_of("translate")
# bert_minilm: the package's fixed sizes
CLASSIFY = tuple(f for f in families_of("classify") if f != "bert_minilm")
CAPTION = families_of("caption")

# Unit-test sizes (constructor kwargs over conf/model/<family>.yaml). A family's sizes mostly differ
# from each other, so that a swapped dimension fails instead of passing by coincidence. A family
# without an entry is built at its conf/model sizes.
TINY: dict[str, dict] = {
    "seq2seq_gru": {"emb_dim": 16, "hidden_dim": 24, "maxout_dim": 12},
    "bahdanau": {
        "emb_dim": 16,
        "enc_hidden_dim": 12,
        "dec_hidden_dim": 20,
        "attn_dim": 18,
        "maxout_dim": 14,
    },
    "transformer": {"d_model": 16, "heads": 2, "enc_layers": 2, "dec_layers": 2, "d_ff": 32},
    **{
        family: {"emb_dim": 16, "hidden_dim": 24, "layers": 2}
        for family in (
            "seq2seq_lstm",
            "luong_dot",
            "luong_general",
            "luong_concat",
            "luong_local_m",
            "luong_local_p",
        )
    },
    "bow": {"emb_dim": 12, "buckets": 97},
    "bigru_max": {"emb_dim": 12, "hidden_dim": 10},
    "han": {"emb_dim": 12, "word_hidden": 10, "sentence_hidden": 8, "attn_dim": 14},
    "self_attentive": {"emb_dim": 12, "hidden_dim": 10, "attn_dim": 9, "hops": 3, "mlp_dim": 16},
    "transformer_encoder": {"d_model": 16, "heads": 2, "layers": 2, "d_ff": 24},
    "bert": {"hidden": 16, "layers": 2, "heads": 2, "intermediate": 24, "max_positions": 32},
    **{
        family: {
            "height": CANVAS[0],
            "width": CANVAS[1],
            "channels": [4, 8],
            "emb_dim": 8,
            "hidden_dim": 12,
        }
        for family in CAPTION
    },
}

# Stage-run sizes (Hydra overrides of model.*): an epoch in seconds on one core. The stage tests'
# tolerances and timings were measured at these sizes (the DDP loss-curve tolerance, the fault
# tests' kill points).
STAGE_TINY: dict[str, dict] = {
    "bahdanau": {
        "emb_dim": 16,
        "enc_hidden_dim": 16,
        "dec_hidden_dim": 32,
        "attn_dim": 16,
        "maxout_dim": 16,
    },
    "luong_local_p": {"emb_dim": 16, "hidden_dim": 16},
    "transformer": {"d_model": 16, "heads": 2, "enc_layers": 1, "dec_layers": 1, "d_ff": 32},
    "self_attentive": {"emb_dim": 16, "hidden_dim": 16, "attn_dim": 8, "mlp_dim": 16},
    "bert": {"hidden": 16, "layers": 1, "heads": 2, "intermediate": 32},
    "show_attend_tell": {"channels": [4, 8, 8], "hidden_dim": 16, "attn_dim": 8},
}


def tiny_model(family: str, vocab_size: int, seed: int = 0, **kwargs):
    """conf/model/<family>.yaml at TINY[family] sizes (`kwargs` win: num_classes for classify, a
    test's own override), pad id 0, random weights from `seed`, in eval mode."""
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    torch.manual_seed(seed)
    cfg = OmegaConf.load(ROOT / "conf" / "model" / f"{family}.yaml")
    return instantiate(
        cfg, vocab_size=vocab_size, pad_id=0, **{**TINY.get(family, {}), **kwargs}
    ).eval()


def stage_overrides(family: str, **kwargs) -> list[str]:
    """STAGE_TINY[family] (none: the conf/model sizes) as `model.<key>=<value>` overrides; `kwargs`
    win, and a key given None is left out."""
    sizes = {**STAGE_TINY.get(family, {}), **kwargs}
    return [
        f"model.{key}={_hydra_value(value)}" for key, value in sizes.items() if value is not None
    ]


def _hydra_value(value) -> str:
    return f"[{','.join(map(str, value))}]" if isinstance(value, list | tuple) else str(value)


def export_translate(root: Path, family: str = "bahdanau") -> Path:
    """root/<family>/onnx from a random-weight Bahdanau model (eos disabled, so every output is
    non-empty)."""
    import torch

    from attention_lab.infer.tokenization import train_tokenizer
    from attention_lab.translate.export import export_model

    tok = train_tokenizer(
        [s for pair in PAIRS for s in pair] * 3, "bpe", vocab_size=120, min_frequency=1
    )
    tok_path = root / f"{family}-tokenizer.json"
    root.mkdir(parents=True, exist_ok=True)
    tok.save(str(tok_path))
    model = tiny_model("bahdanau", tok.get_vocab_size())
    with torch.no_grad():
        model.output.W_o.bias[2] = -30.0
    export_model(model, root / family / "onnx", family, tok_path, max_len_ratio=0.5, beam=2)
    tok_path.unlink()
    return root / family / "onnx"


def export_classify(root: Path, family: str = "han") -> Path:
    """root/<family>/onnx from a random-weight classifier of conf/model/<family>.yaml with a
    word-level tokenizer."""
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from attention_lab.classify.export import export_and_check_classifier
    from attention_lab.infer.tokenization import train_word_tokenizer

    tok = train_word_tokenizer(DOCS * 2, vocab_size=100, min_frequency=1)
    tok_path = root / f"{family}-tokenizer.json"
    root.mkdir(parents=True, exist_ok=True)
    tok.save(str(tok_path))
    torch.manual_seed(0)
    model = instantiate(
        OmegaConf.load(f"conf/model/{family}.yaml"),
        vocab_size=tok.get_vocab_size(),
        num_classes=len(LABELS),
        pad_id=0,
    ).eval()
    export_and_check_classifier(
        model, root / family / "onnx", family, tok_path, LABELS, max_sentences=5, max_words=8
    )
    tok_path.unlink()
    return root / family / "onnx"


def export_caption(root: Path, family: str = "show_attend_tell") -> Path:
    """root/<family>/onnx from a random-weight ShowAttendTell of 16×64 canvases (special tokens
    pushed down: 5-word captions)."""
    import torch

    from attention_lab.caption.export import export_and_check_captioner
    from attention_lab.infer.tokenization import train_word_tokenizer

    tok = train_word_tokenizer([[DIGIT_WORDS]], vocab_size=100, min_frequency=1)
    tok_path = root / f"{family}-tokenizer.json"
    root.mkdir(parents=True, exist_ok=True)
    tok.save(str(tok_path))
    model = tiny_model("show_attend_tell", tok.get_vocab_size())
    with torch.no_grad():
        model.L_o.bias[:4] = -30.0  # never pad, bos, eos or unk: five real words
    export_and_check_captioner(model, root / family / "onnx", family, tok_path, max_len=5)
    tok_path.unlink()
    return root / family / "onnx"


PHOTO_WORDS = ["a", "red", "green", "blue", "circle", "square", "triangle", "on", "white"]


def export_photo_caption(
    root: Path,
    family: str = "show_attend_tell",
    max_len: int = 4,
    max_pixels: int = 10**6,
    size: int = 224,
):
    """root/<family>/onnx from a random-weight photo model (cached-annotation sizes:
    (size/32)²×1280, 7×7 at 224) with the real frozen EfficientNet-Lite0 in front (special tokens
    pushed down: max_len-word captions) -> (torch path, folder, parity)."""
    import torch

    from attention_lab.caption.export import PhotoCaptioner, export_and_check_captioner
    from attention_lab.infer.tokenization import train_word_tokenizer

    tok = train_word_tokenizer([[PHOTO_WORDS]], vocab_size=100, min_frequency=1)
    tok_path = root / f"{family}-tokenizer.json"
    root.mkdir(parents=True, exist_ok=True)
    tok.save(str(tok_path))
    model = tiny_model(
        family, tok.get_vocab_size(), height=size, width=size, feature_dim=1280, feature_stride=32
    )
    with torch.no_grad():
        # never pad, bos, eos or unk
        (model.L_o if hasattr(model, "L_o") else model.out).bias[:4] = -30.0
    path = PhotoCaptioner(model, "efficientnet_lite0", max_pixels).eval()
    parity = export_and_check_captioner(
        path, root / family / "onnx", family, tok_path, max_len=max_len
    )
    tok_path.unlink()
    return path, root / family / "onnx", parity


def photo_png(width: int = 150, height: int = 100, fmt: str = "PNG", mode: str = "RGB") -> bytes:
    """A red circle on white (tests/caption/photo_set.py's drawing), width × height, as PNG or JPEG
    bytes."""
    import io

    from tests.caption.photo_set import draw

    buf = io.BytesIO()
    draw("circle", "red", width, height).convert(mode).save(buf, format=fmt)
    return buf.getvalue()


def canvas_png(seed: int = 9, size: tuple[int, int] = CANVAS) -> bytes:
    """A (height, width) canvas PNG (caption_export.random_images scaled to 0..255) for the tiny
    captioner."""
    import io

    import numpy as np
    from PIL import Image

    from attention_lab.caption.export import random_images

    buf = io.BytesIO()
    Image.fromarray((random_images(1, *size, seed)[0] * 255).astype(np.uint8)).save(
        buf, format="PNG"
    )
    return buf.getvalue()


def export_tiny_models(root: str | Path) -> Path:
    """root/bahdanau/onnx (translate), root/han/onnx (classify) and root/show_attend_tell/onnx
    (caption); -> root."""
    import torch

    root = Path(root)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        export_translate(root)
        export_classify(root)
        export_caption(root)
    finally:
        torch.set_num_threads(threads)
    return root
