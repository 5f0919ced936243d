"""The ledger's statistics: an effect's interval that counts seed and test-item variance together,
its test against a claim's threshold (two-sided, or two one-sided tests against a margin), Holm's
correction, and the seeds a claim needs.

Seeds and test items are crossed (every seed is scored on every item), so the variance of the seeds'
mean effect has two parts (a two-way random-effects model, e.g. Owen 2007, "The pigeonhole
bootstrap"): the seeds' spread over n seeds, s^2 / n, and the test set's share, the variance of the
seeds' mean effect when the items alone are resampled (a bootstrap over items, seeds held fixed,
shared by every seed and family: the pairing). Their sum is the effect's variance (the seed-by-item
interaction counted twice: conservative), with Welch-Satterthwaite's degrees of freedom (n - 1 where
the items add nothing). Pooling seeds' outputs as 3·N independent items, as the per-example tests
did, leaves out the seed part and overstates significance."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

ALPHA = 0.05  # every test's level; Holm keeps the family-wise error at it
REPLICATES = 1000  # item resamples
SEED = 12345  # of the item resamples: the same test set resampled for every claim


@dataclass(frozen=True)
class Items:
    """One term's per-item sufficient statistics, seed by seed: stats[s] (N, K) sums over items into
    what `score` turns into points (accuracy: [correct, 1]; BLEU: sacreBLEU's n-gram counts and
    lengths)."""

    stats: dict[str, np.ndarray]  # seed -> (N, K)
    score: Callable[[np.ndarray], float]  # (K,) summed statistics -> points
    # which test items (a digest): terms pair item by item only if equal
    test_set: str = ""


def accuracy_items(
    predicted: dict[str, Sequence], gold: Sequence, mask: np.ndarray | None = None
) -> Items:
    """Accuracy in points over the items (of `mask`, where given): 100 · Σ correct / Σ 1."""
    keep = np.ones(len(gold)) if mask is None else mask.astype(float)

    def right(y, g) -> bool:  # a caption is right when it equals one of its references
        return y in g if isinstance(g, list) else y == g

    stats = {
        s: np.stack(
            [keep * np.array([right(y, g) for y, g in zip(ys, gold)], dtype=float), keep], axis=1
        )
        for s, ys in predicted.items()
    }
    return Items(stats, lambda k: 100.0 * k[0] / k[1] if k[1] else math.nan)


def bleu_items(
    hypotheses: dict[str, Sequence[str]],
    refs: Sequence[str | Sequence[str]],
    mask: np.ndarray | None = None,
) -> Items:
    """Corpus BLEU (sacreBLEU's defaults, as the evaluate stage scores it) over the items (of
    `mask`): each item's sys_len, ref_len (the closest reference's, where an item has several: a
    photo's captions), matching n-grams and total n-grams (n = 1..4), summed, then sacreBLEU's
    compute_bleu."""
    from sacrebleu.metrics import BLEU

    bleu = BLEU()
    keep = np.ones(len(refs)) if mask is None else mask.astype(float)

    def per_item(hyps: Sequence[str]) -> np.ndarray:  # (N, 10)
        rows = []
        for h, r in zip(hyps, refs):
            s = bleu.corpus_score([h], [[x] for x in r] if isinstance(r, list) else [[r]])
            rows.append([s.sys_len, s.ref_len, *s.counts, *s.totals])
        return np.asarray(rows, dtype=float) * keep[:, None]

    def score(k: np.ndarray) -> float:
        k = np.rint(k).astype(int)  # integer counts (resample weights are integers)
        return BLEU.compute_bleu(
            list(k[2:6]), list(k[6:10]), int(k[0]), int(k[1]), smooth_method="exp"
        ).score

    return Items({s: per_item(h) for s, h in hypotheses.items()}, score)


# an evaluate stage's per-item counts [a, b] (predictions' item_stats) -> points from their sums
COUNTED = {
    "aer": lambda k: 100.0 * (1.0 - 2.0 * k[0] / k[1]) if k[1] else math.nan,  # [|A∩S|, |A| + |S|]
    "share": lambda k: 100.0 * k[0] / k[1] if k[1] else math.nan,  # [hits, trials]: localisation
}


def counted_items(seeds: dict[str, Sequence[Sequence[float]]], score: str) -> Items:
    """A metric the evaluate stage kept as counts item by item (seed -> (N, 2)), scored by
    COUNTED[score]: the predictions file's `item_stats`, {"<metric>": {"score": "aer" | "share",
    "seeds": {"<k>": [[a, b], ...]}}}."""
    if score not in COUNTED:
        raise ValueError(f"item_stats score {score!r}: expected one of {', '.join(COUNTED)}")
    return Items(
        {s: np.asarray(v, dtype=float).reshape(-1, 2) for s, v in seeds.items()}, COUNTED[score]
    )


@dataclass(frozen=True)
class Estimate:
    """An effect over n seeds: its mean, the seeds' sd, the test set's variance of the mean (0: not
    resampled), the combined standard error and its degrees of freedom."""

    mean: float
    n: int
    seed_sd: float | None
    item_var: float
    se: float | None
    df: float | None

    def interval(self, confidence: float = 1 - ALPHA) -> tuple[float, float] | None:
        """mean ± t_{df, (1+c)/2} · se, or None for one seed."""
        from scipy.stats import t

        if self.se is None:
            return None
        half = float(t.ppf((1 + confidence) / 2, self.df)) * self.se if self.se > 0 else 0.0
        return self.mean - half, self.mean + half


def combine(seed_effects: Sequence[float], item_means: Sequence[float] | None = None) -> Estimate:
    """The effect's estimate from its per-seed values and, where the items were resampled, the
    seeds' mean effect in each item resample: se² = s²/n + Var_items, df by Welch-Satterthwaite
    (module docstring)."""
    values = np.asarray(seed_effects, dtype=float)
    n = len(values)
    if n == 0:
        raise ValueError("an effect needs at least one seed")
    item_var = (
        float(np.var(item_means, ddof=1)) if item_means is not None and len(item_means) > 1 else 0.0
    )
    mean = float(math.fsum(values) / n)
    if n == 1:
        return Estimate(mean, 1, None, item_var, None, None)
    seed_var = float(np.var(values, ddof=1))
    a = seed_var / n
    se = math.sqrt(a + item_var)
    df = (a + item_var) ** 2 / (a**2 / (n - 1)) if a > 0 else math.inf
    return Estimate(mean, n, math.sqrt(seed_var), item_var, se, df)


@functools.cache
def resample_weights(n_items: int, replicates: int = REPLICATES, seed: int = SEED) -> np.ndarray:
    """(replicates, N) bootstrap counts of the test items, the same for every term of every claim
    (the pairing)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=replicates).astype(float)


def p_two_sided(est: Estimate, threshold: float) -> float | None:
    """Two-sided p of the t-test of the effect against the threshold (None for one seed)."""
    from scipy.stats import t

    if est.se is None:
        return None
    if est.se == 0:
        return 1.0 if est.mean == threshold else 0.0
    return float(2 * t.sf(abs(est.mean - threshold) / est.se, est.df))


def p_tost(est: Estimate, low: float, high: float) -> float | None:
    """Two one-sided tests (Schuirmann 1987): p of "the effect lies within (low, high)", the larger
    of the p of effect > low and of effect < high (None for one seed)."""
    from scipy.stats import t

    if est.se is None:
        return None
    if est.se == 0:
        return 0.0 if low < est.mean < high else 1.0
    above_low = t.sf((est.mean - low) / est.se, est.df)
    below_high = t.cdf((est.mean - high) / est.se, est.df)
    return float(max(above_low, below_high))


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment (Holm 1979) over the p-values given (None: not tested, left
    out)."""
    from statsmodels.stats.multitest import multipletests

    tested = [i for i, p in enumerate(pvalues) if p is not None]
    out: list[float | None] = [None] * len(pvalues)
    if tested:
        adjusted = multipletests([pvalues[i] for i in tested], alpha=ALPHA, method="holm")[1]
        for i, p in zip(tested, adjusted):
            out[i] = float(p)
    return out


def power(
    n: int, difference: float, seed_sd: float, item_var: float, alpha: float = ALPHA
) -> float:
    """Power of the two-sided test at n seeds when the effect lies `difference` from the threshold
    (noncentral t)."""
    from scipy.stats import nct, t

    a = seed_sd**2 / n
    se = math.sqrt(a + item_var)
    if se == 0:
        return 1.0 if difference else alpha
    df = (a + item_var) ** 2 / (a**2 / (n - 1)) if a > 0 else 1e6
    crit = float(t.ppf(1 - alpha / 2, df))
    ncp = difference / se
    return float(nct.sf(crit, df, ncp) + nct.cdf(-crit, df, ncp))


def seeds_needed(
    difference: float,
    seed_sd: float,
    item_var: float,
    target: float = 0.8,
    most: int = 1000,
    alpha: float = ALPHA,
) -> int | None:
    """The fewest seeds (2..most) whose test reaches `target` power at this distance from the
    threshold, the seeds' sd and the test set's variance as estimated; None where even `most` does
    not (the test set's share alone can bar it: more seeds never shrink it)."""
    if power(most, difference, seed_sd, item_var, alpha) < target:
        return None
    lo, hi = 2, most  # power grows with n: bisect
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (
            (mid + 1, hi)
            if power(mid, difference, seed_sd, item_var, alpha) < target
            else (lo, mid)
        )
    return lo
