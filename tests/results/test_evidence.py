"""evidence.py on made-up data: the interval with and without the test set's share, per-item BLEU
and accuracy, the two-sided test and TOST (against statsmodels), Holm, the seeds a claim needs, and
a case where pooling seeds' outputs would have called a difference that seeds and items together do
not."""

import math

import numpy as np
import pytest
from sacrebleu.metrics import BLEU
from statsmodels.stats.power import TTestPower
from statsmodels.stats.weightstats import ttost_paired

from attention_lab.results import evidence
from attention_lab.results.significance import paired_pvalues, seed_interval
from tests.results.test_significance import BAD, GOOD, REFS


def test_seeds_alone_give_students_t_interval():
    est = evidence.combine([1.0, 2.0, 3.0])
    low, high = est.interval()
    ref = seed_interval([1.0, 2.0, 3.0])
    assert est.df == 2 and est.item_var == 0
    assert (low, high) == (pytest.approx(ref["low"]), pytest.approx(ref["high"]))
    assert evidence.combine([0.5]).interval() is None


def test_the_test_sets_share_adds_to_the_seeds_with_satterthwaites_df():
    item_means = np.random.default_rng(0).normal(2.0, 0.5, size=4000)
    est = evidence.combine([1.0, 2.0, 3.0], item_means)
    a, b = 1.0 / 3, float(np.var(item_means, ddof=1))
    assert est.se == pytest.approx(math.sqrt(a + b))
    # more than the seeds' 2: the items are many
    assert est.df == pytest.approx((a + b) ** 2 / (a**2 / 2))


def test_per_item_bleu_sums_to_sacrebleus_corpus_bleu_and_a_mask_to_the_subsets():
    items = evidence.bleu_items({"0": GOOD, "1": BAD}, REFS)
    for seed, hyps in (("0", GOOD), ("1", BAD)):
        full = items.score(items.stats[seed].sum(axis=0))
        assert full == pytest.approx(BLEU().corpus_score(hyps, [REFS]).score)
    mask = np.array([i % 2 == 0 for i in range(len(REFS))])
    sub = evidence.bleu_items({"0": GOOD}, REFS, mask)
    assert sub.score(sub.stats["0"].sum(axis=0)) == pytest.approx(
        BLEU().corpus_score(GOOD[::2], [REFS[::2]]).score
    )


def test_per_item_bleu_with_several_references_sums_to_sacrebleus_multi_reference_bleu():
    """A photo's captions: each item's closest reference length and n-grams clipped by its
    references, as the caption evaluate stage's corpus BLEU against all references of each photo."""
    refs = [
        ["a dog runs on the grass", "the dog is running"],
        ["two men talk", "a pair of men talking here"],
    ]
    hyps = ["a dog is running on grass", "two men talking"]
    items = evidence.bleu_items({"0": hyps}, refs)
    streams = [[r[k] for r in refs] for k in range(2)]
    assert items.score(items.stats["0"].sum(axis=0)) == pytest.approx(
        BLEU().corpus_score(hyps, streams).score
    )


def test_counted_items_sum_to_the_corpus_aer_and_localisation_and_a_bad_score_is_named():
    from attention_lab.results import metrics
    from attention_lab.translate.evaluate import aer_counts

    predicted, gold = [{(0, 0), (1, 1)}, {(0, 0)}, set()], [{(0, 0), (1, 1)}, {(1, 0)}, {(0, 0)}]
    aer = evidence.counted_items({"0": aer_counts(predicted, gold)}, "aer")
    assert aer.score(aer.stats["0"].sum(axis=0)) == pytest.approx(
        100 * metrics.aer(predicted, gold)
    )
    share = evidence.counted_items({"0": [[2, 3], [0, 2], [5, 5]]}, "share")
    assert share.score(share.stats["0"].sum(axis=0)) == pytest.approx(70.0)
    with pytest.raises(ValueError, match="item_stats score 'mean'"):
        evidence.counted_items({"0": [[1, 2]]}, "mean")


def test_per_item_accuracy_and_a_caption_right_when_it_is_one_of_its_references():
    items = evidence.accuracy_items({"0": [1, 0, 2, 2]}, [1, 1, 2, 0])
    assert items.score(items.stats["0"].sum(axis=0)) == 50.0
    captions = evidence.accuracy_items({"0": ["a b", "c"]}, [["x", "a b"], ["d"]])
    assert captions.score(captions.stats["0"].sum(axis=0)) == 50.0


def test_resamples_are_the_same_for_every_claim_and_keep_the_item_count():
    w = evidence.resample_weights(50)
    assert w is evidence.resample_weights(50) and w.shape == (evidence.REPLICATES, 50)
    assert (w.sum(axis=1) == 50).all()


@pytest.mark.parametrize(
    "diffs, low, high, inside",
    [
        # small differences, a wide margin: equivalent
        ([0.1, -0.2, 0.15, 0.05, -0.1, 0.0], -1.0, 1.0, True),
        ([2.0, 2.5, 1.5, 2.2, 1.8, 2.1], -1.0, 1.0, False),  # differences beyond the margin: not
    ],
)
def test_tost_agrees_with_statsmodels_both_ways(diffs, low, high, inside):
    p = evidence.p_tost(evidence.combine(diffs), low, high)
    theirs, _, _ = ttost_paired(np.array(diffs), np.zeros(len(diffs)), low, high)
    assert p == pytest.approx(theirs)
    assert (p < evidence.ALPHA) == inside


def test_two_sided_p_is_the_t_tests():
    from scipy.stats import ttest_1samp

    values = [1.2, 0.4, 2.0, 1.1]
    assert evidence.p_two_sided(evidence.combine(values), 0.5) == pytest.approx(
        ttest_1samp(values, 0.5).pvalue
    )
    # no spread, at the threshold
    assert evidence.p_two_sided(evidence.combine([2.0, 2.0]), 2.0) == 1.0


def test_holm_adjusts_the_tested_and_skips_the_rest():
    assert evidence.holm([0.01, None, 0.04, 0.03]) == [
        pytest.approx(0.03),
        None,
        pytest.approx(0.06),
        pytest.approx(0.06),
    ]


def test_seeds_needed_is_statsmodels_without_the_test_set_and_none_where_the_test_set_bars_it():
    theirs = math.ceil(TTestPower().solve_power(effect_size=1.5 / 2.0, alpha=0.05, power=0.8))
    assert evidence.seeds_needed(1.5, 2.0, 0.0) == theirs
    assert evidence.seeds_needed(1.5, 2.0, 0.1) > theirs  # the test set's share needs more seeds
    # the test set alone: se >= 1 whatever the seeds
    assert evidence.seeds_needed(0.5, 2.0, 1.0) is None


def test_pooling_the_seeds_outputs_would_call_it_seeds_and_items_together_do_not():
    """Three seeds of a, right on 85%, 70% and 80% of 1,000 items, against b's 75% on every seed:
    pooled as 3,000 independent items, McNemar calls a better (p < 0.001); the seeds' spread says it
    could be either."""
    n, gold = 1000, [1] * 1000
    a = {str(s): [1] * k + [0] * (n - k) for s, k in enumerate((850, 700, 800))}
    b = {str(s): [1] * 750 + [0] * 250 for s in range(3)}
    pooled, _ = paired_pvalues({"a": a, "b": b}, gold, "b", ["test/accuracy"])
    assert pooled["a"]["test/accuracy"] < 0.001
    ia, ib = evidence.accuracy_items(a, gold), evidence.accuracy_items(b, gold)
    w = evidence.resample_weights(n)
    effects = [ia.score(ia.stats[s].sum(0)) - ib.score(ib.stats[s].sum(0)) for s in a]
    means = np.mean(
        [[ia.score(x) - ib.score(y) for x, y in zip(w @ ia.stats[s], w @ ib.stats[s])] for s in a],
        axis=0,
    )
    est = evidence.combine(effects, means)
    assert est.mean == pytest.approx(10 / 3) and evidence.p_two_sided(est, 0.0) > 0.3
