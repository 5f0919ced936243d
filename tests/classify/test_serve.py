"""classifier_export + serving.classifier: one ONNX graph per classify family, parity, and
onnxruntime-only use."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from attention_lab.classify.export import export_and_check_classifier
from attention_lab.classify.serve import OnnxClassifier, document_arrays
from attention_lab.infer.tokenization import train_word_tokenizer
from tests.processes import run_cli, run_python
from tests.tiny_models import DOCS, LABELS

TEXT = "The food was not good. We left early!\n\nThe room was lovely."

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
# slow: it trains, exports or runs stages (`make test-fast` leaves it out)


@pytest.fixture(scope="module", params=["han", "self_attentive", "bow"])
def exported(request, tmp_path_factory):
    """A random-weight classify family exported with a word-level tokenizer, as the export stage
    does."""
    root = tmp_path_factory.mktemp(request.param)
    tok = train_word_tokenizer(DOCS * 2, vocab_size=100, min_frequency=1)
    tok.save(str(root / "tokenizer.json"))
    torch.manual_seed(0)
    model = instantiate(
        OmegaConf.load(f"conf/model/{request.param}.yaml"),
        vocab_size=tok.get_vocab_size(),
        num_classes=len(LABELS),
        pad_id=0,
    ).eval()
    parity = export_and_check_classifier(
        model,
        root / "onnx",
        request.param,
        root / "tokenizer.json",
        LABELS,
        max_sentences=5,
        max_words=8,
    )
    return request.param, root / "onnx", model, parity


def test_parity_is_recorded(exported):
    _family, out, _, parity = exported
    assert parity["ok"] and parity["prediction_identical"]
    assert json.loads((out / "parity.json").read_text())["max_abs_diff"]["logits"] <= 1e-4
    meta = json.loads((out / "meta.json").read_text())
    assert (
        meta["task"] == "classify" and meta["labels"] == LABELS and "penalty" not in meta["outputs"]
    )


def test_classifier_matches_torch_and_truncates_like_training(exported):
    family, out, model, _ = exported
    clf = OnnxClassifier(out)
    [result] = clf.classify([TEXT])
    assert (
        result.sentences[0] == ["The", "food", "was", "not", "good", "."]
        and len(result.sentences) == 3
    )
    ids, mask = document_arrays(
        [[clf.tok.encode(s, is_pretokenized=True).ids for s in result.sentences]],
        model.hierarchical,
    )
    with torch.no_grad():
        probs = (
            model(torch.from_numpy(ids), torch.from_numpy(mask))["logits"].softmax(-1)[0].numpy()
        )
    np.testing.assert_allclose([result.probabilities[label] for label in LABELS], probs, atol=1e-5)
    if family == "bow":
        assert result.sentence_weights is None and result.top_sentences() == []
    else:
        assert len(result.sentence_weights) == 3 and abs(sum(result.sentence_weights) - 1) < 1e-4
        assert [len(w) for w in result.word_weights] == [len(s) for s in result.sentences]
    long = " ".join(["word"] * 20) + ". " + " ".join(f"Sentence {i}." for i in range(10))
    [cut] = clf.classify([long])
    # max_sentences, max_words of the export
    assert len(cut.sentences) == 5 and len(cut.sentences[0]) == 8


def test_empty_document_is_refused(exported):
    with pytest.raises(ValueError, match="empty document"):
        OnnxClassifier(exported[1]).classify(["  \n "])


def test_cli_without_torch(exported):
    _family, out, _, _ = exported
    proc = run_python(f"""
        import sys, json
        from attention_lab.cli import main
        main(["classify", "--model", {str(out)!r}, "--json", {TEXT!r}])
        print(json.dumps({{"torch": "torch" in sys.modules}}))
    """)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert json.loads(lines[-1])["torch"] is False
    printed = run_cli(["classify", "--model", str(out), TEXT]).stdout
    assert printed.startswith("label: ") and "probabilities: " in printed


def test_translate_model_is_not_a_classifier(tmp_path):
    (tmp_path / "meta.json").write_text(json.dumps({"family": "bahdanau"}))
    with pytest.raises(ValueError, match="not a classify model"):
        OnnxClassifier(tmp_path)
