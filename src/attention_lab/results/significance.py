"""Seeds and significance: mean ± sd with a Student-t interval over seeds, and paired tests between
two families on the same test examples (paired bootstrap resampling for BLEU and chrF, exact McNemar
for accuracy)."""

from __future__ import annotations

import math
from collections.abc import Sequence

# macro-F1: none
PAIRED_TEST = {"test/bleu": "bootstrap", "test/chrf": "bootstrap", "test/accuracy": "mcnemar"}
ALPHA = 0.05  # significance level of the report's marks


def seed_interval(values: Sequence[float], confidence: float = 0.95) -> dict:
    """Mean, sample sd and Student-t interval mean ± t_{n-1, (1+c)/2} · sd / √n over n seeds; sd and
    interval are None for one seed."""
    from scipy.stats import t

    n = len(values)
    if n == 0:
        raise ValueError("seed_interval needs at least one value")
    mean = math.fsum(values) / n
    if n == 1:
        return {"n": 1, "mean": mean, "sd": None, "low": None, "high": None}
    sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return {"n": n, "mean": mean, "sd": sd, "low": mean - half, "high": mean + half}


def mcnemar(correct_a: Sequence[bool], correct_b: Sequence[bool]) -> float:
    """Exact McNemar test (McNemar 1947): two-sided binomial p of b = #(A right, B wrong) among the
    b + c discordant pairs under p = 1/2; 1.0 when there are none."""
    from scipy.stats import binomtest

    if len(correct_a) != len(correct_b):
        raise ValueError(
            f"McNemar needs paired outcomes: {len(correct_a)} against {len(correct_b)}"
        )
    b = sum(1 for x, y in zip(correct_a, correct_b) if x and not y)
    c = sum(1 for x, y in zip(correct_a, correct_b) if y and not x)
    return float(binomtest(b, b + c, 0.5).pvalue) if b + c else 1.0


def paired_bootstrap(
    systems: dict[str, list[str]],
    refs: list[str],
    keys: Sequence[str] = ("test/bleu", "test/chrf"),
    n_samples: int = 1000,
) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """p-values of each system's BLEU/chrF difference from the first system by paired bootstrap
    resampling (Koehn 2004), sacrebleu's own implementation (seed: $SACREBLEU_SEED, default 12345);
    and each test's signature.

    A system whose score equals the first one's (identical outputs, or e.g. BLEU 0 for both) gets p
    = 1: sacrebleu counts resampled differences strictly above the observed one, which for a zero
    difference whose resamples are all zero too gives the smallest p-value, 1 / (n_samples + 1)."""
    from sacrebleu.metrics import BLEU, CHRF
    from sacrebleu.significance import PairedTest

    known = {"test/bleu": BLEU, "test/chrf": CHRF}
    if unknown := [k for k in keys if k not in known]:
        raise ValueError(f"no paired bootstrap for {unknown}; known: {sorted(known)}")
    first, *names = systems
    test = PairedTest(
        [(n, systems[n]) for n in (first, *names)],
        {k: known[k]() for k in keys},
        [refs],
        test_type="bs",
        n_samples=n_samples,
    )
    signatures, scores = test()
    # sacrebleu's names ("BLEU", "chrF2"), in the order of keys
    metric_names = [m for m in scores if m != "System"]
    pvalues = {
        n: {
            k: 1.0 if scores[m][i].score == scores[m][0].score else float(scores[m][i].p_value)
            for k, m in zip(keys, metric_names)
        }
        for i, n in enumerate(names, 1)
    }
    return pvalues, {k: str(signatures[m]) for k, m in zip(keys, metric_names)}


def paired_pvalues(
    outputs: dict[str, dict[str, list]], references: list, against: str, keys: Sequence[str]
) -> tuple[dict[str, dict[str, float]], dict[str, str]]:
    """p-value of every family's difference from `against` on each key with a paired test
    (PAIRED_TEST), outputs paired seed by seed: seed k of one family against seed k of the other,
    concatenated over the seeds.

    outputs: {family: {seed: per-example outputs in test order}}, every family with the same seeds;
    references: the gold output of each test example. Returns ({family: {key: p}}, {key: how it was
    tested}).
    """
    seeds = sorted(outputs[against])
    for family, by_seed in outputs.items():
        if sorted(by_seed) != seeds:
            raise ValueError(
                f"{family} has outputs for seeds {sorted(by_seed)}, {against} for {seeds}: "
                "paired tests need the same seeds"
            )
    # (seeds · N,)
    joined = {f: [y for s in seeds for y in by_seed[s]] for f, by_seed in outputs.items()}
    gold = list(references) * len(seeds)
    others = [f for f in outputs if f != against]
    pvalues: dict[str, dict[str, float]] = {f: {} for f in others}
    methods: dict[str, str] = {}
    boot = [k for k in keys if PAIRED_TEST.get(k) == "bootstrap"]
    if boot and others:
        p, signatures = paired_bootstrap({f: joined[f] for f in (against, *others)}, gold, boot)
        for f in others:
            pvalues[f].update(p[f])
        methods.update({k: f"paired bootstrap, sacrebleu {s}" for k, s in signatures.items()})
    for k in keys:
        if PAIRED_TEST.get(k) == "mcnemar":
            right = {f: [y == g for y, g in zip(joined[f], gold)] for f in (against, *others)}
            for f in others:
                pvalues[f][k] = mcnemar(right[against], right[f])
            methods[k] = "exact McNemar (binomial test on discordant pairs)"
    return pvalues, methods


def expected_best(values: list[float], direction: str) -> list[float]:
    """Expected best validation score of n trials drawn from these, n = 1..len(values) (Dodge et al.
    2019, "Show Your Work", eq. 1: E[max_n] = sum_i v_(i) [(i/N)^n - ((i-1)/N)^n], v sorted worst to
    best)."""
    ordered = sorted(values, reverse=direction == "minimize")  # worst first
    total = len(ordered)
    return [
        sum(v * ((i / total) ** n - ((i - 1) / total) ** n) for i, v in enumerate(ordered, 1))
        for n in range(1, total + 1)
    ]
