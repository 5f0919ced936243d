"""classify/report.py: what pretraining bought, against the same encoder trained from scratch, with its paired test."""

from omegaconf import OmegaConf

from attention_lab.classify.report import pretraining_gain
from attention_lab.core.files import write_json


def test_pretraining_gain_per_share_of_labels_with_mcnemar(tmp_path):
    cfg = OmegaConf.create({"root": str(tmp_path), "task": {"name": "classify"}})
    refs = [0, 1] * 20  # 40 test documents
    right, wrong = refs, [1 - y for y in refs]
    half = refs[:20] + wrong[20:]
    predictions = {"transformer_encoder": ({"0": half, "1": half}, {"0": wrong, "1": half}),
                   "bert_minilm": ({"0": right, "1": right}, {"0": right, "1": half})}
    for family, (full, tenth) in predictions.items():
        write_json(tmp_path / "predictions" / "classify" / f"{family}.json",
                   {"references": refs, "seeds": full, "label_fractions": {"0.1": tenth}})
    results = {"transformer_encoder": {"test/accuracy": 0.5, "label_fractions": {"0.1": {"test/accuracy": 0.25}}},
               "bert_minilm": {"test/accuracy": 1.0, "pretrain": {}, "label_fractions": {"0.1": {"test/accuracy": 0.75}}},
               "bow": {"test/accuracy": 0.6}}
    rows = pretraining_gain(cfg, results).splitlines()[2:]
    assert [r.split(" | ")[:5] for r in rows] == [["| `bert_minilm`", "10%", "0.750", "0.250", "0.500"],
                                                  ["| `bert_minilm`", "100%", "1.000", "0.500", "0.500"]]
    assert all("<" in r.split(" | ")[5] or float(r.split(" | ")[5].strip(" |")) < 0.001 for r in rows), rows
    assert pretraining_gain(cfg, {"bow": {}}) == ""
