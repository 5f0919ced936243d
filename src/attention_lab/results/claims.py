"""The claims ledger: each finding of the timeline's papers (conf/claims.yaml, the paper's words,
place and figure beside ours) measured on the committed metrics and predictions: an effect whose
interval counts seed and test-item variance together (results.evidence), a test against the claim's
frozen threshold, Holm's correction across the ledger, and a verdict by RULE."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import yaml

from attention_lab.results import evidence
from attention_lab.results.evidence import ALPHA

HOLDS, CONTRADICTED, INCONCLUSIVE = "holds", "contradicted", "inconclusive"
NOT_RUN, NOT_MEASURABLE = "not run", "not measurable on this data"
SECTIONS = {
    "paper": "Findings of the papers",
    "summary": "Claims of summaries of the papers",
    "toolkit": "Differences between toolkits",
    "regime": "Retests in the papers' regimes, and controls for what the data builds in",
}
# what a retest takes from the claim it retests
QUOTED = ("paper", "quote", "where", "paper_effect")
SIDES = ("above", "below", "within")
FIELDS = (
    "id",
    "claim",
    "paper",
    "quote",
    "where",
    "paper_effect",
    "task",
    "plus",
    "holds_if",
    "smallest_effect",
)
RULE = f"""\
Each claim's effect is measured seed by seed (seed k of one side against seed k of the other, on the
same test set), in points: BLEU as it is, fractions (accuracy, AER, overlap) times 100; a `relative`
claim's effect is the percentage change, 100 · (plus − minus) / minus. Its standard error counts
both sources of variance: the seeds' spread (s² / n) and the test set's (the variance of the seeds'
mean effect when the test items alone are resampled, 1,000 times, the same resamples for both sides
of a comparison); its 95% interval and tests are Student-t with Welch-Satterthwaite degrees of
freedom. AER, localisation, rationale accuracy and hop overlap are resampled from the counts the
evaluate stage keeps item by item; where the predictions do not keep what a metric needs item by
item (runs evaluated before the counts were kept), the test set's share is not counted and the row
says "seeds only". Each claim fixes in advance, in conf/claims.yaml, on which side of which
threshold the effect must lie (`above`, `below`) or in which margin (`within`), and the smallest
effect that matters.

- the claim's p: two-sided t-test of the effect against its threshold; for `within`, two one-sided
  tests (TOST) against its margin. Holm's correction runs over the p of every measured claim of one
  section of one ledger (exploratory or confirmatory); both p are shown;
- **{HOLDS}**: the Holm-adjusted p < {ALPHA} and the effect lies on the claimed side (for `within`:
  inside);
- **{CONTRADICTED}**: the Holm-adjusted p < {ALPHA} and the effect lies on the other side; or the
  effect is shown to lie within the smallest effect that matters of the threshold (TOST at ± that
  size, Holm-adjusted over the section as a family of its own): whatever the difference, it is too
  small to matter; for `within`, the 95% interval lies wholly outside the margin;
- **{INCONCLUSIVE}**: anything else, one seed included; the power table says how many seeds would
  decide it.

A claim whose family has no metrics file is **{NOT_RUN}**; one whose metric the data cannot give
(gold alignments, rationales and boxes exist in the built-in data alone), or whose every term scores
one bound of the metric (0 or 100 points) on every seed and test item, so that nothing tells its
sides apart, is **{NOT_MEASURABLE}**."""


def points(metric: str, value: float) -> float:
    """A metric on the ledger's scale: BLEU and chrF (0..100) as they are, fractions times 100."""
    return value if metric.split("/")[-1].startswith(("bleu", "chrf")) else 100 * value


def load(path) -> list[dict]:
    """The claims of conf/claims.yaml, checked: each names FIELDS, its section (SECTIONS; a retest,
    `retests: <id>` of a claim above it, is in section regime and takes its QUOTED fields) and
    plus/minus terms, with a threshold `{above|below: x}` or a margin `{within: [low, high]}`."""
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    claims = data.get("claims")
    if not isinstance(claims, list) or not claims:
        raise ValueError(f"{path}: expected `claims:`, a list of claims")
    seen = {}
    for i, c in enumerate(claims):
        where = f"{path}: claims[{i}]" + (
            f" ({c['id']})" if isinstance(c, dict) and "id" in c else ""
        )
        if not isinstance(c, dict):
            # a bad file: ValueError, as every check
            raise ValueError(f"{where}: expected a mapping")  # noqa: TRY004
        # the same paper's claim in its regime, or against a control: section regime
        if "retests" in c:
            if c["retests"] not in seen:
                raise ValueError(
                    f"{where}: retests: expected the id of a claim above it, got {c['retests']!r}"
                )
            if c.setdefault("section", "regime") != "regime":
                raise ValueError(f"{where}: section: a retest's is regime, got {c['section']!r}")
            for k in QUOTED:
                c.setdefault(k, seen[c["retests"]][k])
        elif c.get("section") == "regime":
            raise ValueError(f"{where}: section regime: name the claim it retests (retests: <id>)")
        if missing := [k for k in FIELDS if c.get(k) in (None, "", [])]:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        if c["id"] in seen:
            raise ValueError(f"{where}: id {c['id']!r} appears twice")
        seen[c["id"]] = c
        if c.get("section", "paper") not in SECTIONS:
            raise ValueError(
                f"{where}: section: expected one of {', '.join(SECTIONS)}, got {c['section']!r}"
            )
        check_rule(where, c["holds_if"], c["smallest_effect"])
        for side in ("plus", "minus"):
            for j, term in enumerate(c.get(side) or []):
                ok = isinstance(term, dict) and (
                    set(term) == {"value"}
                    and isinstance(term["value"], (int, float))
                    or {"family", "metric"} <= set(term) <= {"family", "metric", "labels"}
                )
                if not ok:
                    raise ValueError(
                        f"{where}: {side}[{j}]: expected {{family, metric[, labels]}} or {{value}},"
                        f" got {term!r}"
                    )
        if not any("family" in t for t in (c.get("plus") or []) + (c.get("minus") or [])):
            raise ValueError(
                f"{where}: plus/minus: at least one term must name a family and a metric"
            )
        if c.get("relative") and not c.get("minus"):
            raise ValueError(f"{where}: relative: a percentage change needs minus terms (its base)")
    return claims


def check_rule(where: str, rule, smallest) -> None:
    """holds_if is {above: x}, {below: x} or {within: [low, high]} with low < high; smallest_effect
    > 0."""
    number = (int, float)
    ok = isinstance(rule, dict) and len(rule) == 1 and next(iter(rule)) in SIDES
    if ok:
        ((side, value),) = rule.items()
        ok = (
            (
                isinstance(value, list)
                and len(value) == 2
                and all(isinstance(v, number) for v in value)
                and value[0] < value[1]
            )
            if side == "within"
            else isinstance(value, number)
        )
    if not ok:
        raise ValueError(
            f"{where}: holds_if: expected {{above: <number>}}, {{below: <number>}} or "
            f"{{within: [<low>, <high>]}}, got {rule!r}"
        )
    if not isinstance(smallest, number) or smallest <= 0:
        raise ValueError(
            f"{where}: smallest_effect: expected a positive number of points, got {smallest!r}"
        )


def term_values(
    term: dict, metrics: Callable[[str], dict | None]
) -> tuple[str | None, dict[str, float] | None]:
    """(why not, {seed: points}) of one term: a constant for every seed ("*"), or the family's
    per-seed metric (of its label fraction); why not: NOT_RUN or NOT_MEASURABLE."""
    if "value" in term:
        return None, {"*": 100 * term["value"]}
    m = metrics(term["family"])
    if m is None:
        return NOT_RUN, None
    if "labels" in term and float(term["labels"]) != 1.0:
        m = next(
            (
                v
                for k, v in (m.get("label_fractions") or {}).items()
                if float(k) == float(term["labels"])
            ),
            None,
        )
        if m is None:
            return NOT_RUN, None
    per_seed = {
        s: v[term["metric"]]
        for s, v in (m.get("per_seed") or {}).items()
        if isinstance(v.get(term["metric"]), (int, float)) and math.isfinite(v[term["metric"]])
    }
    return (
        (None, {s: points(term["metric"], v) for s, v in per_seed.items()})
        if per_seed
        else (NOT_MEASURABLE, None)
    )


def effect_of(claim: dict, plus, minus):
    """The effect from the summed plus and minus terms (floats or arrays): their difference, or for
    a `relative` claim the percentage change 100 · (plus − minus) / minus."""
    if not claim.get("relative"):
        return plus - minus
    # an item resample whose baseline is 0: nan, not a crash
    with np.errstate(divide="ignore", invalid="ignore"):
        return 100 * (plus - minus) / minus


def term_name(term: dict) -> str:
    labels = f" at {float(term['labels']):.0%} of labels" if "labels" in term else ""
    return f"`{term['family']}`{labels} {term['metric']}"


def measure(
    claim: dict,
    metrics: Callable[[str], dict | None],
    items: Callable[[dict], evidence.Items | None] = lambda term: None,
) -> dict:
    """One row of the ledger before Holm (decide): the claim, its effect over seeds (with the test
    set's variance where every family term has its items), the p of its test and of the equivalence
    test at its smallest effect. metrics: family -> its metrics file (None when absent); items: a
    family term -> its per-item statistics (None where the predictions cannot give them)."""
    ((side, threshold),) = claim["holds_if"].items()
    row = {
        k: claim.get(k)
        for k in (
            "id",
            "claim",
            "paper",
            "quote",
            "where",
            "paper_effect",
            "task",
            "regime",
            "smallest_effect",
            "if_not_held",
            "retests",
        )
    }
    row.update(
        section=claim.get("section", "paper"),
        side=side,
        threshold=threshold,
        measures=describe(claim),
        families=sorted(
            {
                t["family"]
                for t in (claim.get("plus") or []) + (claim.get("minus") or [])
                if "family" in t
            }
        ),
    )
    empty = {"seeds": [], "effect": None, "variance": None, "p": None, "p_equivalent": None}
    terms = []  # [(sign, term, {seed or "*": points})]
    for sign, part in ((1, "plus"), (-1, "minus")):
        for term in claim.get(part) or []:
            why, values = term_values(term, metrics)
            if why:
                return {**row, **empty, "verdict": why, "missing": term_name(term)}
            terms.append((sign, term, values))
    seeds = sorted(set.intersection(*[set(v) for *_, v in terms if "*" not in v]), key=str)
    if claim.get("relative") and (
        zero := [s for s in seeds if sum(v.get(s, v.get("*")) for g, _, v in terms if g < 0) == 0]
    ):
        return {
            **row,
            **empty,
            "verdict": NOT_MEASURABLE,
            "missing": (
                f"{describe(claim)}: the baseline is 0 on seed {zero[0]}, so no relative change"
            ),
        }

    def at(seed_values: Callable[[dict, dict], object]):
        """The effect with each term's value given by seed_values(term, values)."""
        parts = {1: 0.0, -1: 0.0}
        for sign, term, values in terms:
            parts[sign] = parts[sign] + seed_values(term, values)
        return effect_of(claim, parts[1], parts[-1])

    per_seed = [float(at(lambda t, v, s=s: v.get(s, v.get("*")))) for s in seeds]
    means, variance = item_means(terms, seeds, items, at)
    est = evidence.combine(per_seed, means)
    scored = {v for _, t, values in terms if "family" in t for v in values.values()}
    # one bound everywhere: nothing measured
    if est.se == 0 and len(scored) == 1 and scored <= {0.0, 100.0}:
        return {
            **row,
            **empty,
            "verdict": NOT_MEASURABLE,
            "missing": (
                f"{describe(claim)}: every term scores {scored.pop():g} on every seed and test "
                "item, the metric's bound, so nothing tells the sides apart here"
            ),
        }
    low_high = est.interval()
    effect = {
        "n": est.n,
        "mean": est.mean,
        "sd": est.seed_sd,
        "item_sd": math.sqrt(est.item_var),
        "se": est.se,
        "df": est.df,
        "low": low_high[0] if low_high else None,
        "high": low_high[1] if low_high else None,
    }
    if side == "within":
        p, p_eq = evidence.p_tost(est, *threshold), None
    else:
        delta = claim.get("smallest_effect")
        p = evidence.p_two_sided(est, threshold)
        p_eq = evidence.p_tost(est, threshold - delta, threshold + delta) if delta else None
    return {
        **row,
        "seeds": seeds,
        "per_seed": per_seed,
        "effect": effect,
        "variance": variance,
        "p": p,
        "p_equivalent": p_eq,
        "verdict": None,
    }


def item_means(
    terms: list, seeds: list[str], items: Callable[[dict], evidence.Items | None], at: Callable
) -> tuple[np.ndarray | None, str]:
    """(the seeds' mean effect in each item resample, evidence.resample_weights, or None; which
    variance the row counts). Each term's full-data score from its items must equal its metrics
    file's: they are one run's."""
    found = {}
    if not seeds:
        return None, "seeds only"
    for _, term, values in terms:
        if "family" not in term:
            continue
        got = items(term)
        if got is None:
            return None, "seeds only: the predictions do not keep this metric item by item"
        if any(other.test_set != got.test_set for other in found.values()):
            return None, "seeds only: the terms were scored on different test sets (corpora)"
        for s in seeds:
            full = got.score(got.stats[s].sum(axis=0))
            if not math.isclose(full, values[s], abs_tol=1e-6):
                raise ValueError(
                    f"{term_name(term)} seed {s}: {full} from the predictions, {values[s]} in the "
                    "metrics file (re-run the evaluate stage: they must come from one run)"
                )
        found[id(term)] = got
    resampled = {}
    for key, got in found.items():
        weights = evidence.resample_weights(len(got.stats[seeds[0]]))
        resampled[key] = {
            s: np.array([got.score(k) for k in weights @ got.stats[s]]) for s in seeds
        }
    per_seed = [
        at(lambda t, v, s=s: resampled[id(t)][s] if id(t) in resampled else v["*"]) for s in seeds
    ]
    return np.mean(per_seed, axis=0), "seeds and test items"


def decide(rows: list[dict]) -> list[dict]:
    """The verdicts of one ledger (RULE): Holm's correction over each section's measured claims, for
    the claims' p and, as a family of its own, the equivalence p; rows come back with p_holm,
    p_equivalent_holm and verdict."""
    for section in SECTIONS:
        mine = [r for r in rows if r["section"] == section and r["verdict"] is None]
        for key in ("p", "p_equivalent"):
            for r, adjusted in zip(mine, evidence.holm([r[key] for r in mine])):
                r[f"{key}_holm"] = adjusted
        for r in mine:
            r["verdict"] = verdict(r)
    for r in rows:
        r.setdefault("p_holm", None)
        r.setdefault("p_equivalent_holm", None)
    return rows


def verdict(row: dict) -> str:
    """RULE, on a row with its Holm-adjusted p."""
    e, side, threshold = row["effect"], row["side"], row["threshold"]
    if e is None or e["low"] is None:
        return INCONCLUSIVE
    found = row["p_holm"] is not None and row["p_holm"] < ALPHA
    if side == "within":
        outside = e["low"] > threshold[1] or e["high"] < threshold[0]
        return HOLDS if found else CONTRADICTED if outside else INCONCLUSIVE
    claimed = e["mean"] > threshold if side == "above" else e["mean"] < threshold
    if found:
        return HOLDS if claimed else CONTRADICTED
    negligible = row["p_equivalent_holm"] is not None and row["p_equivalent_holm"] < ALPHA
    return CONTRADICTED if negligible else INCONCLUSIVE


def seeds_needed(row: dict, most: int = 1000) -> int | None:
    """The seeds that would decide a measured claim at 80% power, were its effect, seed sd and
    test-set variance as observed (evidence.seeds_needed; for `within`, the distance to the margin's
    nearer edge); None: not even most."""
    e = row["effect"]
    if e is None or e["sd"] is None:
        return None
    if row["side"] == "within":
        low, high = row["threshold"]
        difference = min(e["mean"] - low, high - e["mean"])
    else:
        difference = e["mean"] - row["threshold"]
    return evidence.seeds_needed(abs(difference), e["sd"], e["item_sd"] ** 2, most=most)


def describe(claim: dict) -> str:
    """The effect in words: `a metric − b metric` (a relative claim: the percentage change), each
    term as family (labels) metric or a constant."""

    def term(t: dict) -> str:
        if "value" in t:
            return f"{points('', t['value']):g}"
        return term_name(t).replace(" test/", " ")

    plus = " + ".join(term(t) for t in claim["plus"])
    if claim.get("relative"):
        minus = " + ".join(term(t) for t in claim["minus"])
        return f"100 · ({plus} − {minus}) / {minus}"
    return plus + "".join(f" − {term(t)}" for t in claim.get("minus") or [])
