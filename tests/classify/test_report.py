"""classify/report.py: what pretraining bought, against the same encoder trained from scratch, with
its paired test."""

from omegaconf import OmegaConf

from attention_lab.classify.report import order_table, pretraining_gain, render_classify
from attention_lab.core.files import write_json


def test_pretraining_gain_per_share_of_labels_with_mcnemar(tmp_path):
    cfg = OmegaConf.create(
        {
            "root": str(tmp_path),
            "task": {"name": "classify"},
            "paths": {"predictions": "predictions"},
        }
    )
    refs = [0, 1] * 20  # 40 test documents
    right, wrong = refs, [1 - y for y in refs]
    half = refs[:20] + wrong[20:]
    predictions = {
        "transformer_encoder": ({"0": half, "1": half}, {"0": wrong, "1": half}),
        "bert_minilm": ({"0": right, "1": right}, {"0": right, "1": half}),
    }
    for family, (full, tenth) in predictions.items():
        write_json(
            tmp_path / "predictions" / "classify" / f"{family}.json",
            {"references": refs, "seeds": full, "label_fractions": {"0.1": tenth}},
        )
    results = {
        "transformer_encoder": {
            "test/accuracy": 0.5,
            "label_fractions": {"0.1": {"test/accuracy": 0.25}},
        },
        "bert_minilm": {
            "test/accuracy": 1.0,
            "pretrain": {},
            "label_fractions": {"0.1": {"test/accuracy": 0.75}},
        },
        "bow": {"test/accuracy": 0.6},
    }
    rows = pretraining_gain(cfg, results).splitlines()[2:]
    assert [r.split(" | ")[:5] for r in rows] == [
        ["| `bert_minilm`", "10%", "0.750", "0.250", "0.500"],
        ["| `bert_minilm`", "100%", "1.000", "0.500", "0.500"],
    ]
    assert all(
        "<" in r.split(" | ")[5] or float(r.split(" | ")[5].strip(" |")) < 0.001 for r in rows
    ), rows
    assert pretraining_gain(cfg, {"bow": {}}) == ""


def test_order_table_shows_the_shuffled_accuracy_and_its_drop():
    results = {
        "transformer_encoder": {"test/accuracy": 0.88, "test/accuracy_shuffled": 0.49},
        "bow": {"test/accuracy": 0.54, "test/accuracy_shuffled": 0.54},
        "han": {"test/accuracy": 0.7},
    }
    rows = order_table(results).splitlines()
    assert rows[2:] == [
        "| `transformer_encoder` | 0.880 | 0.490 | 0.390 |",
        "| `bow` | 0.540 | 0.540 | 0.000 |",
    ]
    common = {
        "train/params": 10,
        "train/train_seconds": 1.0,
        "train/train_tokens_per_s": 1.0,
        "test/macro_f1": 0.5,
    }
    page = render_classify({f: {**common, **m} for f, m in results.items()}, [[1, 1000]], 5, {}, [])
    assert "## Does the model use word order?" in page and "drops towards chance" in page
    assert order_table({"bow": {"test/accuracy": 0.5}}) == ""
