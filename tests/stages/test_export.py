"""The export stage: a trained tiny model to a self-contained serving folder, and a clear error
without a checkpoint."""

from __future__ import annotations

import json

import pytest

from tests.tiny_models import stage_overrides

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.slow
def test_export_stage_end_to_end(project):
    """prepare -> tokenize -> train (1 tiny epoch) -> export stage -> a self-contained serving
    folder."""
    from attention_lab.stages import export, prepare, tokenizer, train
    from attention_lab.translate.serve import OnnxTranslator

    prepare.main(["data.n_train=120", "data.n_valid=20"])
    tokenizer.main(["data.n_train=120", "tokenize.vocab_size=200"])
    train.main(
        [
            "family=bahdanau",
            *stage_overrides("bahdanau"),
            "data.n_train=120",
            "data.n_valid=20",
            "train.val_bleu_sentences=5",
            "train.batch_size=32",
            "train.max_epochs=1",
        ]
    )
    parity = export.main(["family=bahdanau"])
    out = project / "models" / "bahdanau" / "onnx"
    assert parity["ok"] and json.loads((out / "parity.json").read_text()) == parity
    assert {p.name for p in out.iterdir()} >= {
        "encoder.onnx",
        "encoder.onnx.data",
        "decoder_step.onnx",
        "decoder_step.onnx.data",
        "meta.json",
        "tokenizer.json",
    }
    # atomic: no leftovers
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".onnx")]
    result = OnnxTranslator(out).translate(["the old man reads a book"], beam=2)[0]
    assert result.source_words == ["the", "old", "man", "reads", "a", "book"]


def test_export_stage_needs_a_checkpoint(project):
    from attention_lab.stages import export

    with pytest.raises(SystemExit, match="train_translate@bahdanau"):
        export.main(["family=bahdanau"])
