"""Readable captions: a captioner whose most likely word is <unk> (then <pad> and <s>) still never
outputs one, in greedy and beam search, through torch and through onnxruntime; a caption's text is
its words joined; the vocabulary's coverage of the test references (evaluate) and the report's
sentence on it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from attention_lab.caption.evaluate import evaluate, vocab_coverage
from attention_lab.caption.export import export_and_check_captioner, random_images
from attention_lab.caption.report import render_caption
from attention_lab.caption.search import caption_batch
from attention_lab.caption.serve import OnnxCaptioner
from attention_lab.infer.tokenization import (
    BOS,
    EOS,
    NEVER_EMITTED,
    PAD,
    UNK,
    never_emitted,
    train_word_tokenizer,
)
from tests.tiny_models import DIGIT_WORDS, tiny_model

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
# slow: it trains, exports or runs stages (`make test-fast` leaves it out)

MAX_LEN = 5


@pytest.fixture(scope="module")
def unk_loving(tmp_path_factory):
    """A random-weight show_attend_tell whose output bias puts <unk> first, then <pad> and <s>, by
    far; eos pushed down (captions of MAX_LEN words); exported as the export stage does (its parity
    check bans the same ids)."""
    root = tmp_path_factory.mktemp("unk")
    tok = train_word_tokenizer([[DIGIT_WORDS]], vocab_size=100, min_frequency=1)
    tok.save(str(root / "tokenizer.json"))
    model = tiny_model("show_attend_tell", tok.get_vocab_size())
    with torch.no_grad():
        model.L_o.bias[[UNK, PAD, BOS, EOS]] = torch.tensor([40.0, 30.0, 30.0, -30.0])
    parity = export_and_check_captioner(
        model, root / "onnx", "show_attend_tell", root / "tokenizer.json", max_len=MAX_LEN
    )
    return model, tok, root / "onnx", parity


def test_never_emitted_are_the_tokenizers_pad_bos_and_unk(unk_loving):
    _, tok, _, _ = unk_loving
    assert never_emitted(tok) == NEVER_EMITTED == (PAD, BOS, UNK)


@pytest.mark.parametrize("beam", [1, 3])
def test_torch_captions_never_hold_unk(unk_loving, beam):
    model, _, _, _ = unk_loving
    images = torch.from_numpy(random_images(3, 16, 64, seed=5))
    free = caption_batch(model, images, MAX_LEN, beam=beam, banned=())
    # unbanned, the model says nothing but <unk>
    assert all(set(h.tokens) == {UNK} for h in free)
    for h in caption_batch(model, images, MAX_LEN, beam=beam):
        assert len(h.tokens) == MAX_LEN and not set(h.tokens) & {PAD, BOS, EOS, UNK}
        assert np.isfinite(h.score)


@pytest.mark.parametrize("beam", [1, 3])
def test_onnx_captions_never_hold_unk_and_equal_torch(unk_loving, beam):
    model, tok, folder, parity = unk_loving
    assert parity["ok"] and parity["greedy_identical"]
    images = random_images(3, 16, 64, seed=6)
    captions = OnnxCaptioner(folder).caption(list(images), beam=beam)
    torch_hyps = caption_batch(
        model, torch.from_numpy(images), MAX_LEN, beam=beam, banned=never_emitted(tok)
    )
    for c, h in zip(captions, torch_hyps):
        assert len(c.words) == MAX_LEN and set(c.words) <= set(DIGIT_WORDS), c.words
        assert "<unk>" not in c.text and c.text == " ".join(c.words)
        assert [tok.token_to_id(w) for w in c.words] == h.tokens
        assert c.to_dict()["caption"] == " ".join(c.to_dict()["words"])


def test_cli_prints_the_words_the_json_holds(unk_loving, tmp_path, capsys):
    from PIL import Image

    from attention_lab.cli import main

    _, _, folder, _ = unk_loving
    png = tmp_path / "canvas.png"
    Image.fromarray((random_images(1, 16, 64, 7)[0] * 255).astype(np.uint8)).save(png)
    cmd = ["caption", "--model", str(folder), "--overlay-dir", str(tmp_path / "out"), str(png)]
    assert main([*cmd, "--json"]) == 0
    [result] = json.loads(capsys.readouterr().out)
    assert main(cmd) == 0
    assert (
        capsys.readouterr().out.strip() == f"{result['caption']}  (attention: {result['overlay']})"
    )
    assert result["caption"] == " ".join(result["words"])
    assert len(result["words"]) == MAX_LEN and "<unk>" not in result["words"]


def test_evaluate_texts_are_the_words_joined(unk_loving):
    from omegaconf import OmegaConf

    model, tok, _, _ = unk_loving
    images = (random_images(2, 16, 64, seed=8) * 255).astype(np.uint8)
    rows = [
        {"caption": "one two", "captions": ["one two", "three"]},
        {"caption": "four", "captions": ["four"]},
    ]
    cfg = OmegaConf.create(
        {"evaluate": {"batch_size": 2, "beam": 2, "len_penalty": 1.0}, "task": {"buckets": []}}
    )
    _, hyps, texts, _ = evaluate(model, tok, rows, images, cfg, MAX_LEN)
    assert texts == [" ".join(tok.id_to_token(t) for t in h.tokens) for h in hyps]
    assert all(len(t.split()) == MAX_LEN and "<unk>" not in t for t in texts)


def test_vocab_coverage_of_the_references():
    tok = train_word_tokenizer(
        [[["a", "dog", "runs"], ["a", "cat", "sits"]]], vocab_size=100, min_frequency=1
    )
    # 12 words, 3 out of vocabulary (zebra, on, mat)
    refs = [["A dog runs", "a zebra runs"], ["a cat sits on a mat"]]
    assert vocab_coverage(tok, refs) == {
        "test/vocab_coverage": pytest.approx(9 / 12),
        "test/references_in_vocab": pytest.approx(1 / 3),
    }
    assert vocab_coverage(tok, [["a dog"], ["cat"]]) == {
        "test/vocab_coverage": 1.0,
        "test/references_in_vocab": 1.0,
    }


def test_the_report_states_the_coverage():
    m = {
        "train/params": 10,
        "train/train_seconds": 1.0,
        "train/train_tokens_per_s": 1.0,
        "test/decode_images_per_s": 1.0,
        "test/bleu": 10.0,
        "test/accuracy": 0.1,
    }
    page = render_caption(
        {"show_tell": {**m, "test/vocab_coverage": 0.9712, "test/references_in_vocab": 0.85}},
        [],
        {},
        ["cfg"],
    )
    assert (
        "97.1% of their words are in the tokenizer's vocabulary" in page
        and "85.0% of the reference" in page
    )
    # metrics from before it
    assert "Vocabulary coverage" not in render_caption({"show_tell": m}, [], {}, ["cfg"])
