"""Tiny random-weight exports (a translate, a classify and a caption family) laid out as models/<family>/onnx, for
serving tests and benchmarks/serving_load.py. Imports torch: call it from tests or the benchmark, never from serving code."""

from __future__ import annotations

from pathlib import Path

PAIRS = [("the cat sat on the mat", "고양이가 매트 위에 앉았다"), ("a dog runs in the park", "개가 공원에서 달린다"),
         ("the bird sings a song", "새가 노래를 부른다"), ("my friend reads the book", "내 친구가 책을 읽는다")]
DOCS = [[["the", "food", "was", "not", "good", "."], ["we", "left", "early", "."]],
        [["the", "room", "was", "lovely", "."]], [["at", "first", "it", "seemed", "awful", "."]]]
LABELS = ["negative", "neutral", "positive"]
DIGIT_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
CANVAS = (16, 64)   # (height, width) of the tiny captioner's canvas


def export_translate(root: Path, family: str = "bahdanau") -> Path:
    """root/<family>/onnx from a random-weight Bahdanau model (eos disabled, so every output is non-empty)."""
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from attention_lab.core.tokenization import train_tokenizer
    from attention_lab.translate.export import export_model

    tok = train_tokenizer([s for pair in PAIRS for s in pair] * 3, "bpe", vocab_size=120, min_frequency=1)
    tok_path = root / f"{family}-tokenizer.json"
    root.mkdir(parents=True, exist_ok=True)
    tok.save(str(tok_path))
    torch.manual_seed(0)
    model = instantiate(OmegaConf.load("conf/model/bahdanau.yaml"), vocab_size=tok.get_vocab_size(), pad_id=0,
                        emb_dim=16, enc_hidden_dim=12, dec_hidden_dim=20, attn_dim=18, maxout_dim=14).eval()
    with torch.no_grad():
        model.output.W_o.bias[2] = -30.0
    export_model(model, root / family / "onnx", family, tok_path, max_len_ratio=0.5, beam=2)
    tok_path.unlink()
    return root / family / "onnx"


def export_classify(root: Path, family: str = "han") -> Path:
    """root/<family>/onnx from a random-weight classifier of conf/model/<family>.yaml with a word-level tokenizer."""
    import torch
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from attention_lab.classify.export import export_and_check_classifier
    from attention_lab.core.tokenization import train_word_tokenizer

    tok = train_word_tokenizer(DOCS * 2, vocab_size=100, min_frequency=1)
    tok_path = root / f"{family}-tokenizer.json"
    root.mkdir(parents=True, exist_ok=True)
    tok.save(str(tok_path))
    torch.manual_seed(0)
    model = instantiate(OmegaConf.load(f"conf/model/{family}.yaml"), vocab_size=tok.get_vocab_size(),
                        num_classes=len(LABELS), pad_id=0).eval()
    export_and_check_classifier(model, root / family / "onnx", family, tok_path, LABELS, max_sentences=5,
                                max_words=8)
    tok_path.unlink()
    return root / family / "onnx"


def export_caption(root: Path, family: str = "show_attend_tell") -> Path:
    """root/<family>/onnx from a random-weight ShowAttendTell of 16×64 canvases (special tokens pushed down: 5-word captions)."""
    import torch

    from attention_lab.caption.export import export_and_check_captioner
    from attention_lab.caption.models.show_attend_tell import ShowAttendTell
    from attention_lab.core.tokenization import train_word_tokenizer

    tok = train_word_tokenizer([[DIGIT_WORDS]], vocab_size=100, min_frequency=1)
    tok_path = root / f"{family}-tokenizer.json"
    root.mkdir(parents=True, exist_ok=True)
    tok.save(str(tok_path))
    torch.manual_seed(0)
    model = ShowAttendTell(tok.get_vocab_size(), height=CANVAS[0], width=CANVAS[1], channels=[4, 8], emb_dim=8,
                           hidden_dim=12).eval()
    with torch.no_grad():
        model.L_o.bias[:4] = -30.0   # never pad, bos, eos or unk: five real words
    export_and_check_captioner(model, root / family / "onnx", family, tok_path, max_len=5)
    tok_path.unlink()
    return root / family / "onnx"


def canvas_png(seed: int = 9, size: tuple[int, int] = CANVAS) -> bytes:
    """A (height, width) canvas PNG (caption_export.random_images scaled to 0..255) for the tiny captioner."""
    import io

    import numpy as np
    from PIL import Image

    from attention_lab.caption.export import random_images

    buf = io.BytesIO()
    Image.fromarray((random_images(1, *size, seed)[0] * 255).astype(np.uint8)).save(buf, format="PNG")
    return buf.getvalue()


def export_tiny_models(root: str | Path) -> Path:
    """root/bahdanau/onnx (translate), root/han/onnx (classify) and root/show_attend_tell/onnx (caption); -> root."""
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
