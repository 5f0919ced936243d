"""The verdict rule on made-up metrics, for every outcome, and the ledger's claims file and effects."""

import pytest

from attention_lab.results import claims
from tests.conftest import ROOT


def fake(per_family: dict[str, list[float]], metric: str = "test/accuracy", fractions: dict | None = None):
    """A metrics lookup: family -> {"per_seed": {k: {metric: v}}} (None for a family without a file)."""
    def metrics(family):
        if family not in per_family:
            return None
        out = {"per_seed": {str(k): {metric: v} for k, v in enumerate(per_family[family])}}
        if fractions and family in fractions:
            out["label_fractions"] = {"0.1": {"per_seed": {str(k): {metric: v}
                                                          for k, v in enumerate(fractions[family])}}}
        return out
    return metrics


def claim(side="above", threshold=0, plus=None, minus=None, **extra):
    return {"id": "x", "claim": "a beats b", "source": "paper", "task": "classify",
            "plus": plus or [{"family": "a", "metric": "test/accuracy"}],
            "minus": minus or [{"family": "b", "metric": "test/accuracy"}], "holds_if": {side: threshold}, **extra}


@pytest.mark.parametrize("a, b, p_examples, expected", [
    ([0.90, 0.91, 0.92], [0.80, 0.80, 0.81], None, claims.HOLDS),               # whole interval above 0
    ([0.90, 0.91, 0.92], [0.80, 0.80, 0.81], 0.01, claims.HOLDS),               # ... and the test set agrees
    ([0.90, 0.91, 0.92], [0.80, 0.80, 0.81], 0.20, claims.NOT_SHOWN),           # seeds agree, the test set does not
    ([0.70, 0.71, 0.72], [0.80, 0.80, 0.81], 0.01, claims.CONTRADICTED),        # whole interval below 0
    ([0.70, 0.95, 0.80], [0.80, 0.80, 0.81], 0.01, claims.NOT_SHOWN),           # the interval straddles 0
    ([0.90], [0.80], 0.001, claims.NOT_SHOWN),                                  # one seed: no interval
])
def test_a_claim_that_a_helps(a, b, p_examples, expected):
    row = claims.measure(claim(), fake({"a": a, "b": b}), lambda x, y: (p_examples, "test") if p_examples else None)
    assert row["verdict"] == expected
    assert row["effect"]["mean"] == pytest.approx(100 * (sum(a) / len(a) - sum(b) / len(b)))  # in points


@pytest.mark.parametrize("drops, expected", [
    ([1.0, 2.0, 1.5], claims.HOLDS),           # interval wholly under the 5-point margin
    ([20.0, 25.0, 22.0], claims.CONTRADICTED),  # wholly over it
    ([1.0, 9.0, 4.0], claims.NOT_SHOWN),        # straddles it
])
def test_a_claim_of_no_drop_uses_its_margin(drops, expected):
    short, long = [90.0, 90.0, 90.0], [90.0 - d for d in drops]
    c = claim("below", 5, plus=[{"family": "a", "metric": "test/bleu_short"}],
              minus=[{"family": "a", "metric": "test/bleu_long"}])

    def metrics(family):
        return {"per_seed": {str(k): {"test/bleu_short": s, "test/bleu_long": lo}
                             for k, (s, lo) in enumerate(zip(short, long))}}

    called = []
    row = claims.measure(c, metrics, lambda a, b: called.append(1))
    assert row["verdict"] == expected and not called  # no per-example test: one family, and a margin, not 0
    assert row["effect"]["mean"] == pytest.approx(sum(drops) / 3)  # BLEU stays in its own points


def test_the_rule_at_its_edges():
    assert claims.verdict(0.0, 2.0, "above", 0) == claims.NOT_SHOWN  # touching the threshold is not beyond it
    assert claims.verdict(-3.0, -1.0, "below", 0) == claims.HOLDS
    assert claims.verdict(1.0, 3.0, "below", 0) == claims.CONTRADICTED
    assert claims.verdict(None, None, "above", 0) == claims.NOT_SHOWN


def test_a_missing_family_is_not_run_and_a_missing_metric_not_measurable():
    assert claims.measure(claim(), fake({"a": [0.9, 0.9]}))["verdict"] == claims.NOT_RUN
    assert claims.measure(claim(), fake({"a": [0.9, 0.9], "b": [0.8, 0.8]}, metric="test/bleu"))["verdict"] \
        == claims.NOT_MEASURABLE


def test_a_difference_of_differences_and_a_constant():
    plus = [{"family": "a", "metric": "test/accuracy", "labels": 0.1}, {"family": "b", "metric": "test/accuracy"}]
    minus = [{"family": "b", "metric": "test/accuracy", "labels": 0.1}, {"family": "a", "metric": "test/accuracy"}]
    metrics = fake({"a": [0.9, 0.9, 0.9], "b": [0.8, 0.8, 0.8]}, fractions={"a": [0.6, 0.61, 0.62], "b": [0.3] * 3})
    row = claims.measure(claim(plus=plus, minus=minus), metrics)
    assert row["effect"]["mean"] == pytest.approx(100 * ((0.61 - 0.3) - (0.9 - 0.8)))
    assert row["verdict"] == claims.HOLDS and row["test"] is None  # four terms: no per-example test
    row = claims.measure(claim(minus=[{"value": 0.5}]), fake({"a": [0.9, 0.91, 0.92]}))
    assert row["effect"]["mean"] == pytest.approx(41.0) and row["verdict"] == claims.HOLDS


def test_the_seeds_effects_are_paired_over_the_seeds_both_have():
    row = claims.measure(claim(), fake({"a": [0.9, 0.9, 0.9], "b": [0.8, 0.8]}))
    assert row["seeds"] == ["0", "1"]


def test_the_committed_claims_file_loads_and_names_real_families(tmp_path):
    from attention_lab.core.config import families, read_params

    every = claims.load(ROOT / "conf" / "claims.yaml")
    params = read_params(ROOT)
    known = {f for t in params["tasks"] for f in families(params, t)}
    named = {t["family"] for c in every for t in c["plus"] + c.get("minus", []) if "family" in t}
    ablations = named - known  # the families with one switch flipped: a known family's name and a suffix
    assert all(any(a.startswith(f + "_") for f in known) for a in ablations), ablations
    assert {c["task"] for c in every} <= set(params["tasks"])


@pytest.mark.parametrize("text, message", [
    ("claims: []", r"expected `claims:`, a list"),
    ("claims: [{id: x, claim: c, source: s, task: t, plus: [{family: a, metric: m}]}]", r"claims\[0\] \(x\): missing holds_if"),
    ("claims: [{id: x, claim: c, source: s, task: t, plus: [{family: a, metric: m}], holds_if: {over: 0}}]",
     r"holds_if: expected \{above: <number>\} or \{below: <number>\}"),
    ("claims: [{id: x, claim: c, source: s, task: t, plus: [{family: a}], holds_if: {above: 0}}]",
     r"plus\[0\]: expected \{family, metric\[, labels\]\} or \{value\}"),
    ("claims: [{id: x, claim: c, source: s, task: t, plus: [{value: 1}], holds_if: {above: 0}}]",
     r"at least one term must name a family"),
])
def test_a_bad_claims_file_names_the_claim_and_field(tmp_path, text, message):
    path = tmp_path / "claims.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"{path}: .*{message}|{path}: {message}"):
        claims.load(path)
