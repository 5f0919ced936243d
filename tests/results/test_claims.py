"""The verdict rule on made-up metrics, for every outcome, and the ledger's claims file and
effects."""

import pytest

from attention_lab.results import claims, evidence
from tests.conftest import ROOT


def fake(
    per_family: dict[str, list[float]], metric: str = "test/accuracy", fractions: dict | None = None
):
    """A metrics lookup: family -> {"per_seed": {k: {metric: v}}} (None for a family without a
    file)."""

    def metrics(family):
        if family not in per_family:
            return None
        out = {"per_seed": {str(k): {metric: v} for k, v in enumerate(per_family[family])}}
        if fractions and family in fractions:
            out["label_fractions"] = {
                "0.1": {"per_seed": {str(k): {metric: v} for k, v in enumerate(fractions[family])}}
            }
        return out

    return metrics


def claim(side="above", threshold=0, plus=None, minus=None, **extra):
    return {
        "id": "x",
        "claim": "a beats b",
        "paper": "P",
        "quote": "q",
        "where": "p. 1",
        "paper_effect": "e",
        "task": "classify",
        "plus": plus or [{"family": "a", "metric": "test/accuracy"}],
        "minus": minus or [{"family": "b", "metric": "test/accuracy"}],
        "holds_if": {side: threshold},
        "smallest_effect": 1.0,
        **extra,
    }


def ledger(*rows):
    return claims.decide(list(rows))


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([0.90, 0.91, 0.92], [0.80, 0.80, 0.81], claims.HOLDS),  # wholly above 0
        ([0.70, 0.71, 0.72], [0.80, 0.80, 0.81], claims.CONTRADICTED),  # wholly below
        ([0.70, 0.95, 0.80], [0.80, 0.80, 0.81], claims.INCONCLUSIVE),  # straddles 0
        # within ±1 point of 0: too small to matter
        ([0.800, 0.801, 0.799], [0.80, 0.80, 0.80], claims.CONTRADICTED),
        ([0.90], [0.80], claims.INCONCLUSIVE),  # one seed: no interval
    ],
)
def test_a_claim_that_a_helps(a, b, expected):
    (row,) = ledger(claims.measure(claim(), fake({"a": a, "b": b})))
    assert row["verdict"] == expected and row["variance"].startswith("seeds only")
    # in points
    assert row["effect"]["mean"] == pytest.approx(100 * (sum(a) / len(a) - sum(b) / len(b)))


@pytest.mark.parametrize(
    "drops, expected",
    [
        ([1.0, 2.0, 1.5], claims.HOLDS),  # wholly under the 5-point margin
        ([20.0, 25.0, 22.0], claims.CONTRADICTED),  # wholly over it
        ([1.0, 9.0, 4.0], claims.INCONCLUSIVE),  # straddles it
    ],
)
def test_a_claim_of_no_drop_uses_its_margin(drops, expected):
    short, long = [90.0, 90.0, 90.0], [90.0 - d for d in drops]
    c = claim(
        "below",
        5,
        plus=[{"family": "a", "metric": "test/bleu_short"}],
        minus=[{"family": "a", "metric": "test/bleu_long"}],
    )

    def metrics(family):
        return {
            "per_seed": {
                str(k): {"test/bleu_short": s, "test/bleu_long": lo}
                for k, (s, lo) in enumerate(zip(short, long))
            }
        }

    (row,) = ledger(claims.measure(c, metrics))
    assert row["verdict"] == expected
    assert row["effect"]["mean"] == pytest.approx(sum(drops) / 3)  # BLEU stays in its own points


@pytest.mark.parametrize(
    "a, expected",
    [
        ([0.801, 0.799, 0.800, 0.802], claims.HOLDS),  # TOST: inside [-2, 2] points
        ([0.90, 0.91, 0.90, 0.92], claims.CONTRADICTED),  # the interval wholly above the margin
        ([0.70, 0.90, 0.78, 0.85], claims.INCONCLUSIVE),
    ],
)
def test_a_claim_of_no_difference_is_two_one_sided_tests(a, expected):
    (row,) = ledger(claims.measure(claim("within", [-2, 2]), fake({"a": a, "b": [0.8] * 4})))
    assert row["verdict"] == expected and row["p_equivalent"] is None


def test_holm_turns_a_lone_finding_into_an_inconclusive_one_among_many():
    def row(p, mean=5.0):
        return {
            "section": "paper",
            "verdict": None,
            "side": "above",
            "threshold": 0,
            "p": p,
            "p_equivalent": 0.9,
            "effect": {"mean": mean, "low": 1.0, "high": 9.0},
        }

    (alone,) = ledger(row(0.02))
    assert alone["verdict"] == claims.HOLDS and alone["p_holm"] == pytest.approx(0.02)
    first, *_ = ledger(row(0.02), *[row(0.5) for _ in range(4)])
    assert first["p_holm"] == pytest.approx(0.1) and first["verdict"] == claims.INCONCLUSIVE
    toolkit = {**row(0.02), "section": "toolkit"}  # another section: another family of tests
    assert ledger(row(0.5), toolkit)[1]["verdict"] == claims.HOLDS


def test_the_test_sets_share_counts_where_the_predictions_give_the_items():
    """Three seeds whose accuracies agree (a: 60%, b: 50% on 40 items): seeds alone give a
    zero-width interval; with the items resampled the interval widens, and the row says which
    variance it counts."""
    gold = [1] * 40
    a = {str(s): [1] * 24 + [0] * 16 for s in range(3)}
    b = {str(s): [1] * 20 + [0] * 20 for s in range(3)}
    items = {"a": evidence.accuracy_items(a, gold), "b": evidence.accuracy_items(b, gold)}
    metrics = fake({"a": [0.6] * 3, "b": [0.5] * 3})
    alone = claims.measure(claim(), metrics)
    both = claims.measure(claim(), metrics, lambda term: items[term["family"]])
    assert alone["effect"]["low"] == alone["effect"]["high"] == pytest.approx(10.0)
    assert (
        both["effect"]["low"] < 5
        and both["variance"] == "seeds and test items"
        and both["effect"]["df"] > 2
    )
    with pytest.raises(ValueError, match="from the predictions, .* in the metrics file"):
        claims.measure(
            claim(), fake({"a": [0.7] * 3, "b": [0.5] * 3}), lambda term: items[term["family"]]
        )


def test_a_relative_claim_is_a_percentage_change():
    row = claims.measure(claim(relative=True), fake({"a": [0.9, 0.9, 0.9], "b": [0.6, 0.6, 0.6]}))
    assert row["effect"]["mean"] == pytest.approx(50.0) and "100 · (" in row["measures"]
    zero = claims.measure(claim(relative=True), fake({"a": [0.9, 0.9, 0.9], "b": [0.6, 0.0, 0.6]}))
    assert (
        zero["verdict"] == claims.NOT_MEASURABLE
        and "the baseline is 0 on seed 1" in zero["missing"]
    )


def test_both_sides_at_one_bound_everywhere_are_not_measurable_but_opposite_bounds_decide():
    floor = claims.measure(claim(), fake({"a": [0.0, 0.0, 0.0], "b": [0.0, 0.0, 0.0]}))
    assert (
        floor["verdict"] == claims.NOT_MEASURABLE
        and "every term scores 0 on every seed" in floor["missing"]
    )
    apart = claims.measure(claim(), fake({"a": [1.0, 1.0, 1.0], "b": [0.0, 0.0, 0.0]}))
    # decide() judges it
    assert apart["verdict"] is None and apart["effect"]["mean"] == pytest.approx(100.0)


def test_a_missing_family_is_not_run_and_a_missing_metric_not_measurable():
    assert claims.measure(claim(), fake({"a": [0.9, 0.9]}))["verdict"] == claims.NOT_RUN
    assert (
        claims.measure(claim(), fake({"a": [0.9, 0.9], "b": [0.8, 0.8]}, metric="test/bleu"))[
            "verdict"
        ]
        == claims.NOT_MEASURABLE
    )


def test_a_difference_of_differences_and_a_constant():
    plus = [
        {"family": "a", "metric": "test/accuracy", "labels": 0.1},
        {"family": "b", "metric": "test/accuracy"},
    ]
    minus = [
        {"family": "b", "metric": "test/accuracy", "labels": 0.1},
        {"family": "a", "metric": "test/accuracy"},
    ]
    metrics = fake(
        {"a": [0.9, 0.9, 0.9], "b": [0.8, 0.8, 0.8]},
        fractions={"a": [0.6, 0.61, 0.62], "b": [0.3] * 3},
    )
    (row,) = ledger(claims.measure(claim(plus=plus, minus=minus), metrics))
    assert row["effect"]["mean"] == pytest.approx(100 * ((0.61 - 0.3) - (0.9 - 0.8)))
    assert row["verdict"] == claims.HOLDS
    (row,) = ledger(claims.measure(claim(minus=[{"value": 0.5}]), fake({"a": [0.9, 0.91, 0.92]})))
    assert row["effect"]["mean"] == pytest.approx(41.0) and row["verdict"] == claims.HOLDS


def test_the_seeds_effects_are_paired_over_the_seeds_both_have():
    row = claims.measure(claim(), fake({"a": [0.9, 0.9, 0.9], "b": [0.8, 0.8]}))
    assert row["seeds"] == ["0", "1"]


def test_the_seeds_a_claim_needs():
    row = claims.measure(claim(), fake({"a": [0.85, 0.80, 0.90], "b": [0.8] * 3}))
    assert claims.seeds_needed(row) == evidence.seeds_needed(5.0, 5.0, 0.0)


def test_the_committed_claims_file_loads_and_names_real_families(tmp_path):
    from attention_lab.core.params import families, read_params

    every = claims.load(ROOT / "conf" / "claims.yaml")
    params = read_params(ROOT)
    known = {f for t in params["tasks"] for f in families(params, t)}
    named = {t["family"] for c in every for t in c["plus"] + c.get("minus", []) if "family" in t}
    # the families with one switch flipped: a known family's name and a suffix
    ablations = named - known
    assert all(any(a.startswith(f + "_") for f in known) for a in ablations), ablations
    assert {c["task"] for c in every} <= set(params["tasks"])


BASE = "id: x, claim: c, paper: P, quote: q, where: w, paper_effect: e, task: t, smallest_effect: 1"
RULE = "plus: [{family: a, metric: m}], holds_if: {above: 0}"


def test_a_retest_is_in_section_regime_and_quotes_the_claim_it_retests(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text(
        f"claims: [{{{BASE}, {RULE}}}, {{id: y, retests: x, claim: d, task: t, smallest_effect: 1, "
        f"{RULE}}}]"
    )
    first, again = claims.load(path)
    assert again["section"] == "regime" and first.get("section", "paper") == "paper"
    assert {k: again[k] for k in claims.QUOTED} == {
        "paper": "P",
        "quote": "q",
        "where": "w",
        "paper_effect": "e",
    }
    assert claims.measure(again, lambda f: None)["retests"] == "x"


@pytest.mark.parametrize(
    "text, message",
    [
        ("claims: []", r"expected `claims:`, a list"),
        (
            "claims: [{id: x, claim: c, task: t, plus: [{family: a, metric: m}]}]",
            (
                r"claims\[0\] \(x\): missing paper, quote, where, paper_effect, holds_if,"
                r" smallest_effect"
            ),
        ),
        (
            f"claims: [{{{BASE}, plus: [{{family: a, metric: m}}], holds_if: {{over: 0}}}}]",
            r"holds_if: expected \{above: <number>\}, \{below: <number>\} or \{within",
        ),
        (
            f"claims: [{{{BASE}, plus: [{{family: a, metric: m}}], holds_if: {{within: [2, 1]}}}}]",
            r"holds_if: expected",
        ),
        (
            f"claims: [{{{BASE}, plus: [{{family: a}}], holds_if: {{above: 0}}}}]",
            r"plus\[0\]: expected \{family, metric\[, labels\]\} or \{value\}",
        ),
        (
            f"claims: [{{{BASE}, plus: [{{value: 1}}], holds_if: {{above: 0}}}}]",
            r"at least one term must name a family",
        ),
        (
            (
                f"claims: [{{{BASE}, plus: [{{family: a, metric: m}}], holds_if: {{above: 0}},"
                " section: blog}]"
            ),
            r"section: expected one of paper, summary, toolkit, regime",
        ),
        (
            (
                f"claims: [{{{BASE}, plus: [{{family: a, metric: m}}], holds_if: {{above: 0}},"
                " relative: true}]"
            ),
            r"relative: a percentage change needs minus terms",
        ),
        (
            f"claims: [{{{BASE}, {RULE}, retests: z}}]",
            r"retests: expected the id of a claim above it, got 'z'",
        ),
        (
            (
                f"claims: [{{{BASE}, {RULE}}}, {{{BASE.replace('id: x', 'id: y')}, {RULE}, retests:"
                " x, section: paper}]"
            ),
            r"claims\[1\] \(y\): section: a retest's is regime",
        ),
        (
            f"claims: [{{{BASE}, {RULE}, section: regime}}]",
            r"section regime: name the claim it retests",
        ),
    ],
)
def test_a_bad_claims_file_names_the_claim_and_field(tmp_path, text, message):
    path = tmp_path / "claims.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"{path}: .*{message}|{path}: {message}"):
        claims.load(path)
