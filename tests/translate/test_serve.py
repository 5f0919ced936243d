"""serve.py (translate): OnnxTranslator and `attention-lab translate` on an exported tiny model,
without importing torch."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from attention_lab.cli import attention_table, resolve_model_dir
from attention_lab.infer.tokenization import train_tokenizer
from attention_lab.translate.export import export_model
from tests.processes import run_cli, run_python
from tests.tiny_models import PAIRS, tiny_model

SENTENCES = ["the cat reads a book", "dogs sing"]


pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
# slow: it trains, exports or runs stages (`make test-fast` leaves it out)


@pytest.fixture(scope="module")
def family_dir(tmp_path_factory):
    """models/bahdanau-like folder with an exported random-weight model (eos disabled so outputs are
    non-empty)."""
    root = tmp_path_factory.mktemp("models") / "bahdanau"
    tok = train_tokenizer(
        [s for pair in PAIRS for s in pair] * 3, "bpe", vocab_size=120, min_frequency=1
    )
    tok.save(str(root.parent / "tokenizer.json"))
    model = tiny_model("bahdanau", tok.get_vocab_size())
    with torch.no_grad():
        model.output.W_o.bias[2] = -30.0
    export_model(
        model, root / "onnx", "bahdanau", root.parent / "tokenizer.json", max_len_ratio=0.5, beam=2
    )
    return root


def test_translator_without_torch(family_dir):
    proc = run_python(f"""
        import json, sys
        from attention_lab.translate.serve import OnnxTranslator
        from attention_lab.cli import main
        translator = OnnxTranslator({str(family_dir / "onnx")!r})
        out = [r.to_dict() for r in translator.translate({SENTENCES!r}, beam=3)]
        main(["translate", "--model", {str(family_dir)!r}, "the cat"])
        print(json.dumps({{"results": out, "torch": "torch" in sys.modules}}))
    """)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["torch"] is False
    first = report["results"][0]
    assert first["source_words"] == SENTENCES[0].split()
    attn = np.array(first["attention"])
    assert attn.shape == (5, len(first["tokens"])) and len(first["tokens"]) > 0
    # each target token's attention over source words
    np.testing.assert_allclose(attn.sum(0), 1.0, atol=1e-3)


def test_translator_matches_ids_path_and_handles_empty(family_dir):
    from attention_lab.translate.serve import OnnxTranslator

    t = OnnxTranslator(family_dir / "onnx")
    results = t.translate(SENTENCES + [""], beam=1)
    assert results[-1].text == "" and results[-1].tokens == []
    ids = [e.ids for e in t.tokenizer.encode_batch(SENTENCES, add_special_tokens=False)]
    singles = [t.translate_ids([i], beam=1)[0].tokens for i in ids]
    assert [r.token_ids for r in results[:-1]] == singles
    assert results[0].text == t.tokenizer.decode(results[0].token_ids)
    assert len(results[1].source_words) == 2 and results[1].attention.shape[0] == 2


def test_cli_translate_prints_matrix_and_json(family_dir):
    cmd = ["translate", "--model", str(family_dir), "--beam", "2"]
    proc = run_cli(cmd + SENTENCES[:1])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"source:      {SENTENCES[0]}" and lines[1].startswith("translation: ")
    rows = [line.split() for line in lines[3:]]
    assert [r[0] for r in rows] == SENTENCES[0].split()
    assert all(len(v) == 4 and v[1] == "." for r in rows for v in r[1:])  # 0.xx weights
    proc = run_cli(cmd + ["--json", *SENTENCES])
    assert [r["source"] for r in json.loads(proc.stdout)] == SENTENCES
    proc = run_cli(["translate", "--model", str(family_dir.parent / "missing"), "hi"])
    assert proc.returncode == 2 and "no exported model" in proc.stderr


def test_attention_table_and_model_dir(family_dir):
    table = attention_table(["hello", "world"], ["▁안녕", "하세요"], [[0.9, 0.25], [0.1, 0.75]])
    assert table.splitlines()[1].split() == ["hello", "0.90", "0.25"]
    # Hangul counts two columns: right-aligned over 0.25
    assert table.splitlines()[0].endswith("  하세요")
    wrapped = attention_table(["w"], [f"t{i}" for i in range(30)], [[0.5] * 30], max_width=60)
    assert len(wrapped.split("\n\n")) == 4 and max(len(line) for line in wrapped.splitlines()) <= 60
    assert resolve_model_dir(family_dir) == family_dir / "onnx"
    assert resolve_model_dir(family_dir / "onnx") == family_dir / "onnx"


def test_cli_without_attention_reads_stdin(family_dir, tmp_path):
    from attention_lab.infer.tokenization import load_tokenizer

    vocab = load_tokenizer(family_dir.parent / "tokenizer.json").get_vocab_size()
    model = tiny_model("seq2seq_gru", vocab)
    export_model(model, tmp_path / "onnx", "seq2seq_gru", family_dir.parent / "tokenizer.json")
    proc = subprocess.run(
        [sys.executable, "-m", "attention_lab.cli", "translate", "--model", str(tmp_path)],
        input="the cat\n\na dog runs\n",
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        proc.stdout.count("source:") == 2 and proc.stdout.count("(no attention: seq2seq_gru") == 2
    )


@pytest.mark.parametrize("damage", ["truncated", "garbage", "missing"])
def test_damaged_onnx_file_is_named_by_the_cli_without_a_traceback(family_dir, tmp_path, damage):
    """A truncated, corrupted or missing graph: exit 2 and a message naming the file, not an
    onnxruntime traceback."""
    import shutil

    broken = shutil.copytree(family_dir / "onnx", tmp_path / "onnx")
    encoder = broken / "encoder.onnx"
    if damage == "missing":
        encoder.unlink()
    else:
        encoder.write_bytes(encoder.read_bytes()[:300] if damage == "truncated" else b"not a model")
    proc = run_cli(["translate", "--model", str(broken), "hello"])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    if damage == "missing":
        assert f"{broken}: not an exported model folder, missing encoder.onnx" in proc.stderr
    else:
        assert f"{encoder}: not a readable ONNX model" in proc.stderr


def test_onnx_translations_never_hold_pad_bos_or_unk(family_dir, tmp_path):
    """The model's most likely token is <unk> (then <pad> and <s>): onnxruntime's search still never
    outputs one."""
    from attention_lab.infer.tokenization import load_tokenizer
    from attention_lab.translate.search import translate_batch
    from attention_lab.translate.serve import OnnxTranslator

    tok = load_tokenizer(family_dir.parent / "tokenizer.json")
    model = tiny_model("bahdanau", tok.get_vocab_size())
    with torch.no_grad():
        model.output.W_o.bias[[3, 0, 1, 2]] = torch.tensor([40.0, 30.0, 30.0, -30.0])
    export_model(
        model,
        tmp_path / "onnx",
        "bahdanau",
        family_dir.parent / "tokenizer.json",
        max_len_ratio=0.5,
    )
    t = OnnxTranslator(tmp_path / "onnx")
    for beam in (1, 3):
        results = t.translate(SENTENCES, beam=beam)
        ids = [e.ids for e in tok.encode_batch(SENTENCES, add_special_tokens=False)]
        torch_hyps = translate_batch(model, ids, beam=beam, len_penalty=1.0, max_len_ratio=0.5)
        for r, h in zip(results, torch_hyps):
            assert r.token_ids == h.tokens and len(r.tokens) > 0
            assert not set(r.token_ids) & {0, 1, 2, 3} and "<unk>" not in r.tokens + [r.text]
            assert r.text == tok.decode(r.token_ids)  # BPE pieces merged, nothing dropped
