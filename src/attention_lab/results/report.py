"""The comparison reports: a Markdown page per task, built from the evaluate stages' records."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from omegaconf import DictConfig

from attention_lab.core.paths import plots_dir
from attention_lab.core.task import Task, get_task
from attention_lab.results import charts, records
from attention_lab.results.metrics import bucket_key, bucket_label
from attention_lab.results.plots import NO_ATTENTION
from attention_lab.results.significance import ALPHA, PAIRED_TEST, expected_best, seed_interval

# scores on 0..100; fractions (accuracy, macro-F1) get 3 decimals
DIGITS = {"test/bleu": 1, "test/chrf": 1}
BANDS = "Lines: mean over seeds; bands: ± sd over seeds (none with one seed)."


def fmt(value, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:,.{digits}f}" if isinstance(value, float) else f"{value:,}"


def splice_results(readme: str, table: str, task: str) -> str:
    """README text with `table` between its `<!-- results:<task>:begin ... -->` and `<!--
    results:<task>:end -->`."""
    begin, end = (
        readme.find(f"<!-- results:{task}:begin"),
        readme.find(f"<!-- results:{task}:end -->"),
    )
    if begin < 0 or end < 0:
        raise ValueError(
            f"README.md has no <!-- results:{task}:begin --> / <!-- results:{task}:end --> markers"
        )
    head = readme[: readme.index("\n", begin) + 1]
    return f"{head}{table}\n{readme[end:]}"


def bucket_series(
    results: dict[str, dict], buckets, metric: str = "bleu"
) -> dict[str, dict[str, tuple]]:
    """{family: {bucket label: (mean test/<metric>_len_<bucket>, its sd over the per-seed scores or
    None)}} for the by-length plots."""
    out = {}
    for f, m in results.items():
        out[f] = {}
        for b in buckets:
            key = f"test/{metric}_len_{bucket_key(b)}"
            if key in m:
                scores = [s[key] for s in m.get("per_seed", {}).values() if key in s]
                out[f][bucket_label(b)] = (
                    m[key],
                    seed_interval(scores)["sd"] if len(scores) > 1 else None,
                )
    return out


def headline(m: dict, key: str) -> dict:
    """A family's mean, sd and 95% interval of a headline metric, as the evaluate stage wrote them
    (None: absent)."""
    return {
        "mean": m.get(key),
        "sd": m.get(f"{key}_sd"),
        "low": m.get(f"{key}_ci95_low"),
        "high": m.get(f"{key}_ci95_high"),
    }


def ranked(results: dict[str, dict], key: str) -> list[str]:
    """Families by mean `key`, best first; families without a finite value last, in their own
    order."""

    def score(f: str) -> float:
        v = results[f].get(key)
        return -v if isinstance(v, (int, float)) and math.isfinite(v) else math.inf

    return sorted(results, key=score)


def pareto_front(points: dict[str, tuple[float, float]]) -> list[str]:
    """Families no other family dominates (as cheap or cheaper and as good or better, one strictly),
    by cost: {family: (cost, quality)}."""

    def dominated(f: str) -> bool:
        c, q = points[f]
        return any(
            c2 <= c and q2 >= q and (c2, q2) != (c, q) for g, (c2, q2) in points.items() if g != f
        )

    return sorted((f for f in points if not dominated(f)), key=lambda f: points[f][0])


def marks(significance: dict, key: str) -> str:
    """† where the family differs from the baseline at p < ALPHA, ‡ where it differs from the best
    family."""
    return ("†" if significance.get("p_baseline", {}).get(key, 1.0) < ALPHA else "") + (
        "‡" if significance.get("p_best", {}).get(key, 1.0) < ALPHA else ""
    )


def ranking_table(task: Task, results: dict[str, dict], significance: dict[str, dict]) -> str:
    """Markdown: families by mean headline metric, with mean ± sd (and marks), 95% t-interval over
    seeds, size and speed; significance: {family: {"p_baseline": {metric: p}, "p_best": {...}}}."""
    keys = task.headline
    head = [
        "rank",
        "family",
        *[c for k, name in keys.items() for c in (f"{name} (mean ± sd)", f"{name} 95% interval")],
        "params",
        "train time (s)",
        task.speed_column,
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rank, family in enumerate(ranked(results, next(iter(keys))), 1):
        m, cells = results[family], []
        for key in keys:
            h, d = headline(m, key), DIGITS.get(key, 3)
            interval = "—" if h["low"] is None else f"[{fmt(h['low'], d)}, {fmt(h['high'], d)}]"
            cells += [
                (
                    f"{fmt(h['mean'], d)} ±"
                    f" {fmt(h['sd'], d)}{marks(significance.get(family, {}), key)}"
                ),
                interval,
            ]
        lines.append(
            "| "
            + " | ".join(
                [
                    str(rank),
                    f"`{family}`",
                    *cells,
                    fmt(int(m["train/params"])),
                    fmt(m["train/train_seconds"], 0),
                    fmt(m["train/train_tokens_per_s"], 0),
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def ranking_section(
    task: Task,
    results: dict[str, dict],
    significance: dict[str, dict],
    methods: dict[str, str],
    baseline: str,
    best: str,
    front: list[str],
) -> list[str]:
    """The page's ranking: table, how the marks were tested, and the quality-against-train-time
    picture."""
    keys = task.headline
    seeds = next(iter(results.values())).get("seeds", [])
    tested = "; ".join(f"{keys[k]}: {how}" for k, how in methods.items()) or "none"
    untested = [name for k, name in keys.items() if k not in PAIRED_TEST]
    first = keys[next(iter(keys))]
    return [
        "## Ranking",
        "",
        ranking_table(task, results, significance),
        "",
        (
            f"Families ranked by mean {first} over {len(seeds)} seed(s) {list(seeds)}; ± is the"
            " sample sd over seeds and the interval a 95% Student-t interval over seeds (— with"
            f" one seed). † = differs from the baseline `{baseline}` (the first of"
            f" `{task.name}.families`: in timeline order, no attention), ‡ = differs from the best"
            f" family `{best}`, each at p < {ALPHA} by a paired test on the same test examples."
            " Seed k of one family is paired with seed k of the other and the pairs of all seeds"
            f" are concatenated. Tests: {tested}"
            + (f"; {', '.join(untested)}: no paired test" if untested else "")
            + f". Every p-value is in `metrics/{task.name}_summary.json` (`significance`)."
        ),
        "",
        f"### {first} against train time",
        "",
        f"![{first} against train time]({task.name}/pareto.png)",
        "",
        (
            "One point per family (mean over seeds, bars ± sd); the Pareto front, families that no"
            f" other family beats on both {first} and train time, is"
            f" {', '.join(f'`{f}`' for f in front)}."
        ),
        "",
    ]


def fmt_p(p: float | None) -> str:
    return "—" if p is None else ("< 0.001" if p < 0.001 else f"{p:.3f}")


def headline_cell(family: str, m: dict, key: str, name: str) -> str:
    """`family`: <name> mean ± sd, for the index."""
    h, digits = headline(m, key), DIGITS.get(key, 3)
    return f"`{family}`: {name} {fmt(h['mean'], digits)} ± {fmt(h['sd'], digits)}"


def render_index(summaries: dict[str, dict[str, dict]]) -> str:
    """reports/index.md: per task (metrics/<task>_summary.json) its page, the first-ranked family
    and the baseline on the ranking metric, and the p-value of their difference."""
    head = ["task", "page", "families", "ranked first", "baseline", "p (first vs baseline)"]
    lines = [
        "# Results",
        "",
        (
            "Generated by `dvc repro` (stage `report_index`) from `metrics/<task>_summary.json`; do"
            " not edit by hand."
        ),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for task, summary in summaries.items():
        key = next(iter(get_task(task).headline))
        first = min(summary, key=lambda f: summary[f]["rank"])
        baseline = summary[first]["significance"]["baseline"]
        p = summary[first]["significance"]["p_baseline"].get(key) if first != baseline else None
        cells = [
            headline_cell(f, summary[f], key, get_task(task).headline[key])
            for f in (first, baseline)
        ]
        lines.append(
            "| "
            + " | ".join(
                [f"`{task}`", f"[{task}.md]({task}.md)", str(len(summary)), *cells, fmt_p(p)]
            )
            + " |"
        )
    lines += [
        "",
        (
            "Each page ranks its task's families (mean ± sd and a 95% interval over seeds, paired"
            " significance tests against the baseline and the best family), plots quality against"
            " train time and scores by length, and shows the attention of each family. Ablations:"
            " [ablations.md](ablations.md)."
        ),
        "",
    ]
    return "\n".join(lines)


PROTOCOL = (
    "Every family trains with Adam and a linear warm-up, then its `train.schedule` (`plateau`: from"
    " validation `train.min_epochs` on, the rate times `train.decay` after each validation that"
    " improves the task's validation metric (`tune.metric`: the one it is tuned and judged on) by"
    " less than `train.min_delta`, and early stopping after `train.patience` of them in a row;"
    " `cosine`: decay to 5% by `train.max_epochs`), keeping the checkpoint of the best value of"
    " that metric; its learning rate, batch, schedule, epochs and sizes are the ones it trained"
    ' with, listed under "Configuration that trained" (tuned values included); families are listed'
    " in timeline order."
)


def monitored_metric(results: dict[str, dict]) -> str:
    """The validation metric the families' runs stopped on (metrics `val_metric`, from train.json);
    val/loss for metrics written before it was recorded."""
    return next((m["val_metric"] for m in results.values() if m.get("val_metric")), "val/loss")


def config_section(results: dict[str, dict]) -> list[str]:
    """The page's "Configuration that trained": per family, the updates and epochs it trained (mean
    over seeds), what stopped it (early stopping, the epoch cap or the time limit, over the seeds)
    and the settings of its first seed's run (metrics `trained_config`, from the run's resolved
    config.yaml), tuned and explicit values included."""
    lines = [
        "## Configuration that trained",
        "",
        "| family | updates | epochs | stopped by | settings |",
        "|---|---|---|---|---|",
    ]
    for family, m in results.items():
        settings = m.get("trained_config") or {}
        lines.append(
            f"| `{family}` | {fmt(m.get('train/steps'), 0)} | {fmt(m.get('train/epochs'), 0)} | "
            f"{', '.join(m.get('train/stopped_by') or ['—'])} | "
            + ", ".join(f"{k}={v}" for k, v in settings.items())
            + " |"
        )
    return [
        *lines,
        "",
        (
            f"A run that converged ends by early stopping on {monitored_metric(results)}"
            " (train.patience validations that each improve it by less than train.min_delta; the"
            " metric the task is tuned and judged on, whose best value also picks the kept"
            " checkpoint); the epoch cap or the time limit means it may still have been improving."
            " Settings from each family's run (`models/<family>/checkpoints/seed<k>/config.yaml`,"
            " the config it trained with; `attention-lab config --explain` names the layer that"
            " set each)."
        ),
        "",
    ]


def curves_section(task: str, results: dict[str, dict], assets: Path) -> list[str]:
    """The page's "Validation curves": reports/<task>/val_curves.png, per family the monitored
    validation metric of its final runs by epoch (metrics `val_curves`, from each run's train.json),
    a line per seed and an x where each stopped; none when no family's metrics have curves."""
    curves = {
        f: {seed: c["curve"] for seed, c in m["val_curves"].items()}
        for f, m in results.items()
        if m.get("val_curves")
    }
    if not curves:
        return []
    metric = monitored_metric(results)
    charts.val_curves(curves, assets / "val_curves.png", metric)
    return [
        "## Validation curves",
        "",
        f"![validation {metric} by epoch]({task}/val_curves.png)",
        "",
        (
            f"Validation {metric} (what runs stop on and keep their checkpoint by) of each family's"
            " final runs by "
            "epoch, a line per seed; x marks the last validation, where the run stopped (early"
            " stopping "
            f'`train.patience` validations after its best, or a cap: "Configuration that trained").'
            f" A curve still "
            "rising (falling, for a loss) at its x may still have been improving."
        ),
        "",
    ]


def tuning_section(task: str, results: dict[str, dict], assets: Path) -> list[str]:
    """The page's "What tuning bought": per family, its study's trials (complete / pruned), the
    updates it spent of the budget, the untuned default's and the pick's full-run validation value
    and the gain; and reports/<task>/ expected_best.png, the expected best value by number of trials
    (Dodge et al. 2019) per family."""
    studies = {f: m["tuning"] for f, m in results.items() if m.get("tuning", {}).get("trials")}
    if not studies:
        return []
    some = next(iter(studies.values()))["study"]
    metric, direction = some["metric"], some["direction"]
    head = (
        f"| family | trials (complete / pruned) | updates (of budget) | default {metric} | tuned"
        f" {metric} | gain |"
    )
    lines = ["## What tuning bought", "", head, "|---|---|---|---|---|---|"]
    curves = {}
    for family, t in studies.items():
        s, sign = t["study"], (-1 if direction == "minimize" else 1)
        gain = (
            sign * (s["best_value"] - s["default_value"]) + 0.0
            if s.get("default_value") is not None
            else None
        )
        budget = f" ({s['budget_updates']:,})" if s.get("budget_updates") else ""
        lines.append(
            f"| `{family}` | {s['trials']} ({s['complete']} / {s['pruned']}) |"
            f" {s['updates']:,}{budget} | {fmt(s.get('default_value'), 4)} |"
            f" {fmt(s['best_value'], 4)} | {fmt(gain, 4)} |"
        )
        values = [r["value"] for r in t["trials"] if r["value"] is not None]
        curves[family] = expected_best(values, direction)
    charts.expected_best(curves, assets / "expected_best.png", metric)
    untuned = [
        f"`{f}` ({(m.get('tuning', {}).get('study') or {}).get('untuned', 'tune.trials: 0')})"
        for f, m in results.items()
        if f not in studies
    ]
    if untuned:
        lines += ["", f"Not tuned (trained with their own settings): {', '.join(untuned)}."]
    return [
        *lines,
        "",
        (
            "Each family's study (docs/tuning.md) starts from its untuned configuration (trial 0,"
            " trained in full); every trial is the full schedule, stopped early by successive"
            f" halving or the budget. Default and tuned are best validation {metric} at full run;"
            " gain is the improvement. A curve still rising at its last trial says the budget was"
            " not enough (pruned trials count at the value they were stopped with)."
        ),
        "",
        f"![expected best validation score by trials]({task}/expected_best.png)",
        "",
    ]


def copy_pictures(
    cfg: DictConfig, names: list[str], assets: Path, patterns: tuple[str, ...]
) -> dict[str, list[str]]:
    """Copy each family's `patterns` files of plots/ and results/ to the assets; the PNGs' paths."""
    task, out = cfg.task.name, {}
    for f in names:
        out[f] = []
        for pattern in patterns:
            for folder in (plots_dir(cfg, f), records.results_dir(cfg, f)):
                for path in sorted(folder.glob(pattern)):
                    shutil.copy(path, assets / f"{f}_{path.name}")
                    if path.suffix == ".png":
                        out[f].append(f"{task}/{f}_{path.name}")
    return out


def no_attention_note(cfg: DictConfig, names: list[str]) -> str:
    """The page's line naming the families whose plots folder says they have no attention."""
    none = [f"`{f}`" for f in names if (plots_dir(cfg, f) / NO_ATTENTION).is_file()]
    if not none:
        return ""
    return f"\nNo attention pictures of {', '.join(none)}: they have no attention weights.\n"
