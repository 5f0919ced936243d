"""The claims ledger: each finding of the timeline's papers (conf/claims.yaml) measured on the committed metrics, an
effect with a 95% interval over seeds, a paired test, and a verdict by a rule fixed before the results (RULE)."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import yaml

from attention_lab.results.significance import ALPHA, PAIRED_TEST, seed_interval

HOLDS, CONTRADICTED, NOT_SHOWN = "holds", "contradicted", "not shown at this size"
NOT_RUN, NOT_MEASURABLE = "not run", "not measurable on this data"
RULE = f"""\
Each claim's effect is measured seed by seed (seed k of one side against seed k of the other, on the same test set),
in points: BLEU and chrF as they are, fractions (accuracy, AER, overlap) times 100. Its interval is the Student-t
95% interval of the seeds' effects, so seed variance counts. The claim fixes in advance, in conf/claims.yaml, on which
side of which threshold the effect must lie: 0 for "helps", a stated margin for "no drop" or "at little cost".

- **{HOLDS}**: the whole interval lies on the claimed side of the threshold, and, where the claim compares two
  families on a metric with a per-example paired test (paired bootstrap for BLEU and chrF, exact McNemar for
  accuracy) against a threshold of 0, that test finds the difference too (p < {ALPHA}), so test-set variance counts;
- **{CONTRADICTED}**: the whole interval lies on the other side, with the same per-example test;
- **{NOT_SHOWN}**: anything else (the interval straddles the threshold, the per-example test does not find the
  difference, or there is one seed and so no interval).

A claim whose family has no metrics file is **{NOT_RUN}**; one whose metric the data cannot give (gold alignments,
rationales and boxes exist in the built-in data alone) is **{NOT_MEASURABLE}**. The p beside the interval is the
t-test of the seeds' effects against the threshold; no correction is made for the number of claims."""


def points(metric: str, value: float) -> float:
    """A metric on the ledger's scale: BLEU and chrF (0..100) as they are, fractions times 100."""
    return value if metric.split("/")[-1].startswith(("bleu", "chrf")) else 100 * value


def load(path: Path) -> list[dict]:
    """The claims of conf/claims.yaml, checked: each names its id, claim, source, task, plus/minus terms and
    holds_if."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    claims = data.get("claims")
    if not isinstance(claims, list) or not claims:
        raise ValueError(f"{path}: expected `claims:`, a list of claims")
    seen = set()
    for i, c in enumerate(claims):
        where = f"{path}: claims[{i}]" + (f" ({c['id']})" if isinstance(c, dict) and "id" in c else "")
        if not isinstance(c, dict):
            raise ValueError(f"{where}: expected a mapping")  # noqa: TRY004 (a bad file: ValueError, as every check here)
        if missing := [k for k in ("id", "claim", "source", "task", "plus", "holds_if") if not c.get(k)]:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        if c["id"] in seen:
            raise ValueError(f"{where}: id {c['id']!r} appears twice")
        seen.add(c["id"])
        rule = c["holds_if"]
        if not (isinstance(rule, dict) and len(rule) == 1 and next(iter(rule)) in ("above", "below")
                and isinstance(next(iter(rule.values())), (int, float))):
            raise ValueError(f"{where}: holds_if: expected {{above: <number>}} or {{below: <number>}}, got {rule!r}")
        for side in ("plus", "minus"):
            for j, term in enumerate(c.get(side) or []):
                ok = isinstance(term, dict) and (set(term) == {"value"} and isinstance(term["value"], (int, float))
                                                 or {"family", "metric"} <= set(term) <= {"family", "metric", "labels"})
                if not ok:
                    raise ValueError(f"{where}: {side}[{j}]: expected {{family, metric[, labels]}} or {{value}}, "
                                     f"got {term!r}")
        if not any("family" in t for t in (c.get("plus") or []) + (c.get("minus") or [])):
            raise ValueError(f"{where}: plus/minus: at least one term must name a family and a metric")
    return claims


def term_values(term: dict, metrics: Callable[[str], dict | None]) -> tuple[str | None, dict[str, float] | None]:
    """(why not, {seed: points}) of one term: a constant for every seed ("*"), or the family's per-seed metric (of its
    label fraction); why not: NOT_RUN or NOT_MEASURABLE."""
    if "value" in term:
        return None, {"*": 100 * term["value"]}
    m = metrics(term["family"])
    if m is None:
        return NOT_RUN, None
    if "labels" in term and float(term["labels"]) != 1.0:
        m = next((v for k, v in (m.get("label_fractions") or {}).items() if float(k) == float(term["labels"])), None)
        if m is None:
            return NOT_RUN, None
    per_seed = {s: v[term["metric"]] for s, v in (m.get("per_seed") or {}).items()
                if isinstance(v.get(term["metric"]), (int, float)) and math.isfinite(v[term["metric"]])}
    return (None, {s: points(term["metric"], v) for s, v in per_seed.items()}) if per_seed else (NOT_MEASURABLE, None)


def seed_effects(claim: dict, metrics: Callable[[str], dict | None]) -> tuple[str | None, dict[str, float]]:
    """(why not, {seed: effect}): the plus terms minus the minus terms, seed by seed, over the seeds all terms share;
    why not: `<NOT_RUN or NOT_MEASURABLE>: <the term lacking>`."""
    terms = []  # [(sign, {seed or "*": points})]
    for sign, side in ((1, "plus"), (-1, "minus")):
        for term in claim.get(side) or []:
            why, values = term_values(term, metrics)
            if why:
                return f"{why}: `{term['family']}`" + (f" at {float(term['labels']):.0%} of labels" if "labels" in term
                                                       else "") + f" {term['metric']}", {}
            terms.append((sign, values))
    seeds = set.intersection(*[set(v) for _, v in terms if "*" not in v])  # load() refuses a claim of constants alone
    return None, {s: math.fsum(sign * v.get(s, v.get("*")) for sign, v in terms) for s in seeds}


def t_test(effects: list[float], threshold: float) -> float | None:
    """Two-sided p of the one-sample t-test of the seeds' effects against the threshold (None for one seed)."""
    from scipy.stats import ttest_1samp

    if len(effects) < 2:
        return None
    if len(set(effects)) == 1:  # no spread: the t statistic is infinite (or undefined at the threshold)
        return 1.0 if effects[0] == threshold else 0.0
    return float(ttest_1samp(effects, threshold).pvalue)


def paired_pair(claim: dict) -> tuple[dict, dict] | None:
    """The (plus, minus) terms of a claim that compares two families on one metric with a per-example paired test
    against a threshold of 0; None for any other claim."""
    plus, minus = claim.get("plus") or [], claim.get("minus") or []
    if len(plus) != 1 or len(minus) != 1 or next(iter(claim["holds_if"].values())) != 0:
        return None
    a, b = plus[0], minus[0]
    same = "family" in a and "family" in b and a["family"] != b["family"] and a["metric"] == b["metric"]
    return (a, b) if same and a.get("labels", 1.0) == b.get("labels", 1.0) and a["metric"] in PAIRED_TEST else None


def verdict(low: float | None, high: float | None, side: str, threshold: float, p_examples: float | None = None,
            alpha: float = ALPHA) -> str:
    """RULE: holds when the interval [low, high] lies wholly on the claimed side of the threshold, contradicted when
    it lies wholly on the other, in both cases only if the per-example test (where there is one) has p < alpha."""
    if low is None or high is None:
        return NOT_SHOWN
    found = p_examples is None or p_examples < alpha
    above, below = low > threshold, high < threshold
    if found and (above if side == "above" else below):
        return HOLDS
    if found and (below if side == "above" else above):
        return CONTRADICTED
    return NOT_SHOWN


def measure(claim: dict, metrics: Callable[[str], dict | None],
            examples_p: Callable[[dict, dict], tuple[float, str] | None] = lambda a, b: None) -> dict:
    """One row of the ledger: the claim, its effect over seeds (mean, sd, 95% interval), the tests and the verdict.
    metrics: family -> its metrics file (None when absent); examples_p: (plus term, minus term) -> (p, test) of the
    per-example paired test, or None where the predictions are absent."""
    (side, threshold), = claim["holds_if"].items()
    row = {k: claim[k] for k in ("id", "claim", "source", "task")}
    row.update(side=side, threshold=float(threshold), measures=describe(claim))
    why, effects = seed_effects(claim, metrics)
    if why:
        verdict_, _, missing = why.partition(": ")
        return {**row, "verdict": verdict_, "missing": missing, "seeds": [], "effect": None, "p_seeds": None, "p_examples": None, "test": None}
    values = [effects[s] for s in sorted(effects, key=str)]
    effect = seed_interval(values) if values else None
    pair = paired_pair(claim)
    tested = examples_p(*pair) if pair else None
    p_examples, test = tested if tested else (None, None)
    result = verdict(effect["low"] if effect else None, effect["high"] if effect else None, side, threshold, p_examples)
    return {**row, "verdict": result, "seeds": sorted(effects, key=str), "effect": effect,
            "p_seeds": t_test(values, threshold), "p_examples": p_examples, "test": test,
            **({"if_not_held": claim["if_not_held"]} if result != HOLDS and claim.get("if_not_held") else {})}


def describe(claim: dict) -> str:
    """The effect in words: `a metric − b metric`, each term as family (labels) metric or a constant."""
    def term(t: dict) -> str:
        if "value" in t:
            return f"{points('', t['value']):g}"
        labels = f" at {float(t['labels']):.0%} of labels" if "labels" in t else ""
        return f"`{t['family']}`{labels} {t['metric'].removeprefix('test/')}"

    plus = " + ".join(term(t) for t in claim["plus"])
    minus = "".join(f" − {term(t)}" for t in claim.get("minus") or [])
    return plus + minus
