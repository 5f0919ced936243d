"""export.py (translate): encoder + decoder-step ONNX graphs per family, parity with torch on unseen
batch sizes and lengths."""

from __future__ import annotations

import json

import onnx
import pytest
import torch

from attention_lab.translate.export import check_parity, export_model
from tests.tiny_models import TRANSLATE, tiny_model

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
# slow: it trains, exports or runs stages (`make test-fast` leaves it out)


@pytest.mark.parametrize("family", sorted(TRANSLATE))
def test_export_parity(family, tmp_path):
    model = tiny_model(family, 50)
    paths = export_model(model, tmp_path, family, max_len_ratio=1.5)
    for name in ("encoder", "decoder_step"):
        onnx.checker.check_model(str(paths[name]))
        assert (tmp_path / f"{name}.onnx.data").is_file()
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["family"] == family and meta["vocab_size"] == 50 and meta["eos_id"] == 2
    assert meta["has_attention"] == model.has_attention and len(meta["state_inputs"]) == len(
        meta["state_outputs"]
    )

    # batch 1 and 6, lengths 1..13: none is the export example
    cases = [[1], [2, 9], [13, 1, 5, 3, 8, 6]]
    parity = check_parity(model, tmp_path, cases=cases, max_len_ratio=1.5)
    assert parity == json.loads((tmp_path / "parity.json").read_text())
    diff = parity["max_abs_diff"]
    assert diff["logits"] <= 1e-4 and diff["attn"] <= 1e-4 and diff["memory"] <= 1e-4, diff
    assert parity["greedy_identical"] and parity["beam_identical"] and parity["ok"]
    assert [c["batch"] for c in parity["cases"]] == [1, 2, 6]
    assert any(sum(c["greedy_lengths"]) > 0 for c in parity["cases"])


def test_parity_failure_is_reported(tmp_path):
    model = tiny_model("bahdanau", 50)
    export_model(model, tmp_path, "bahdanau")
    with torch.no_grad():
        # torch drifts from the graph
        model.output.W_o.bias.add_(torch.randn_like(model.output.W_o.bias))
    parity = check_parity(model, tmp_path, cases=[[4, 2]])
    assert not parity["ok"] and parity["max_abs_diff"]["logits"] > 1e-3
