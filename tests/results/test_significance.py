"""statistics.py: the t-interval over seeds, the exact McNemar test, sacrebleu's paired bootstrap,
seed pairing."""

import math

import pytest
from sacrebleu.metrics import BLEU

from attention_lab.results.significance import (
    mcnemar,
    paired_bootstrap,
    paired_pvalues,
    seed_interval,
)

REFS = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "he reads a book at home",
    "she likes green tea",
    "the old man walks to the station",
    "we ate rice and fish",
    "the children play in the garden",
    "my brother drives a red car",
]
GOOD = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "he reads a book at home",
    "she likes green tea",
    "the old man walks to the station",
    "we ate rice and fish",
    "the children play in a garden",
    "my brother drives a car",
]
BAD = ["cat mat", "dog park", "book", "tea", "old man", "rice", "children", "car"]


def test_interval_of_three_seeds_is_students_t():
    s = seed_interval([1.0, 2.0, 3.0])
    t_975_2 = 4.302652729749464  # Student t, 2 degrees of freedom, 97.5% quantile (tables)
    assert s["n"] == 3 and s["mean"] == pytest.approx(2.0) and s["sd"] == pytest.approx(1.0)
    assert s["low"] == pytest.approx(2.0 - t_975_2 / math.sqrt(3)) and s["high"] == pytest.approx(
        2.0 + t_975_2 / math.sqrt(3)
    )


def test_interval_of_one_seed_has_no_sd_and_equal_seeds_a_point():
    assert seed_interval([0.5]) == {"n": 1, "mean": 0.5, "sd": None, "low": None, "high": None}
    same = seed_interval([0.25, 0.25])
    assert same["sd"] == 0.0 and same["low"] == same["high"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="at least one"):
        seed_interval([])


def test_mcnemar_exact_p_on_a_constructed_case():
    # 1 pair where only A is right, 9 where only B is, 5 both right, 3 both wrong:
    # two-sided binomial P(X <= 1 or X >= 9 | n = 10, p = 1/2) = 2 * (1 + 10) / 2**10
    a = [True] * 1 + [False] * 9 + [True] * 5 + [False] * 3
    b = [False] * 1 + [True] * 9 + [True] * 5 + [False] * 3
    assert mcnemar(a, b) == pytest.approx(22 / 1024)
    assert mcnemar(b, a) == pytest.approx(22 / 1024)
    assert mcnemar(a, a) == 1.0  # no discordant pair
    with pytest.raises(ValueError, match="paired"):
        mcnemar(a, b[:-1])


def test_paired_bootstrap_is_sacrebleus_with_a_fixed_seed(monkeypatch):
    monkeypatch.setenv("SACREBLEU_SEED", "1234")
    p, signatures = paired_bootstrap(
        {"good": GOOD, "bad": BAD, "same": list(GOOD)}, REFS, n_samples=200
    )
    again, _ = paired_bootstrap({"good": GOOD, "bad": BAD, "same": list(GOOD)}, REFS, n_samples=200)
    assert p == again  # seeded: the same resamples
    assert set(p) == {"bad", "same"} and set(p["bad"]) == {"test/bleu", "test/chrf"}
    # clearly worse
    assert p["bad"]["test/bleu"] == pytest.approx(1 / 201) and p["bad"]["test/chrf"] < 0.05
    assert p["same"] == {"test/bleu": 1.0, "test/chrf": 1.0}  # identical outputs never differ
    zero, _ = paired_bootstrap(
        {"a": ["x y"] * 8, "b": ["z w"] * 8}, REFS, keys=("test/bleu",), n_samples=200
    )
    # BLEU 0 against BLEU 0: no difference (sacrebleu alone says 1 / 201)
    assert zero["b"]["test/bleu"] == 1.0
    assert "bs:200" in signatures["test/bleu"] and "seed:1234" in signatures["test/bleu"]
    assert "nc:6" in signatures["test/chrf"]  # chrF's own signature
    with pytest.raises(ValueError, match="no paired bootstrap"):
        paired_bootstrap({"good": GOOD, "bad": BAD}, REFS, keys=("test/accuracy",))


def test_paired_bootstrap_close_systems_do_not_differ(monkeypatch):
    monkeypatch.setenv("SACREBLEU_SEED", "1234")
    close = list(GOOD)
    close[0] = "the cat sat on a mat"
    p, _ = paired_bootstrap(
        {"good": GOOD, "close": close}, REFS, keys=("test/bleu",), n_samples=200
    )
    assert p["close"]["test/bleu"] > 0.05
    assert BLEU().corpus_score(close, [REFS]).score < BLEU().corpus_score(GOOD, [REFS]).score


def test_paired_pvalues_pair_seed_by_seed_and_concatenate():
    refs = [0, 1, 2, 0]
    # right: 4 + 3 of 8
    outputs = {
        "base": {"0": [0, 0, 0, 0], "1": [0, 1, 0, 0]},  # right: 2 + 3 of 8
        "attn": {"0": [0, 1, 2, 0], "1": [0, 1, 2, 1]},
    }
    p, methods = paired_pvalues(outputs, refs, "base", ["test/accuracy", "test/macro_f1"])
    base = [True, False, False, True, True, True, False, True]
    attn = [True, True, True, True, True, True, True, False]
    assert p == {"attn": {"test/accuracy": mcnemar(base, attn)}}  # macro-F1 has no paired test
    assert "McNemar" in methods["test/accuracy"] and "test/macro_f1" not in methods
    with pytest.raises(ValueError, match="same seeds"):
        paired_pvalues(
            {"base": outputs["base"], "attn": {"0": outputs["attn"]["0"]}},
            refs,
            "base",
            ["test/accuracy"],
        )


def test_paired_pvalues_bootstrap_strings_over_two_seeds(monkeypatch):
    monkeypatch.setenv("SACREBLEU_SEED", "1234")
    outputs = {"bad": {"0": BAD, "1": BAD}, "good": {"0": GOOD, "1": list(REFS)}}
    p, methods = paired_pvalues(outputs, REFS, "good", ["test/bleu", "test/chrf"])
    assert (
        set(p) == {"bad"}
        and p["bad"]["test/bleu"] < 0.05
        and "paired bootstrap" in methods["test/chrf"]
    )
    p_exact, _ = paired_pvalues({"a": {"0": REFS}, "b": {"0": REFS}}, REFS, "a", ["test/accuracy"])
    assert p_exact == {"b": {"test/accuracy": 1.0}}
