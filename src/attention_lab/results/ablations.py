"""reports/ablations.md: each ablation of params.yaml `<task>.ablations` (its family with one switch
changed, every seed) against its family, with the ledger's interval and test (results.claims: seeds
and test items)."""

from __future__ import annotations

from collections.abc import Callable

from omegaconf import OmegaConf

from attention_lab.core.config import leaf_values
from attention_lab.core.task import get_task
from attention_lab.results import claims
from attention_lab.results.evidence import Items
from attention_lab.results.ledger import effect_text, p_text
from attention_lab.results.report import fmt


def comparison(task: str, name: str, of: str, metric: str) -> dict:
    """The ablation against its family on one metric, as a claim of results.claims: ablation −
    family, above 0."""
    return {
        "id": f"{name}/{metric}",
        "claim": f"{name} against {of}",
        "source": "params.yaml",
        "task": task,
        "plus": [{"family": name, "metric": metric}],
        "minus": [{"family": of, "metric": metric}],
        "holds_if": {"above": 0},
    }


def setting(trained: dict, key: str):
    """A dotted key's value in a metrics file's `trained_config` (stages.evaluate.trained_settings:
    dotted keys, a section it keeps one setting of, as train.teacher_forcing its schedule, by the
    section's key), or — ."""
    parts = key.split(".")
    for i in range(len(parts), 0, -1):
        if (head := ".".join(parts[:i])) in trained:
            value = trained[head]
            return (
                OmegaConf.select(OmegaConf.create(value), ".".join(parts[i:]))
                if isinstance(value, dict)
                else value
            )
    return "—"


def rows(
    task: str,
    entries: dict[str, dict],
    metrics: Callable[[str], dict | None],
    items: Callable[[dict], Items | None],
) -> list[dict]:
    """One row per ablation: what it changes (`key: family's value → ablation's`), and per column of
    the task's Task.ablation_columns both means and the ledger's measure of ablation − family
    (claims.measure: its interval counts the test set's variance where the predictions give the
    metric item by item)."""
    out = []
    for name, entry in entries.items():
        of, mine = metrics(entry["of"]), metrics(name)
        before = (of or {}).get("trained_config") or {}
        changes = [
            f"{key}: {setting(before, key)} → {value}"
            for key, value in leaf_values(entry.get("set") or {}).items()
        ]
        changes += [f"corpus: {entry['corpus']}"] if "corpus" in entry else []
        cells = {}
        for column, metric, _ in get_task(task).ablation_columns:
            row = claims.measure(comparison(task, name, entry["of"], metric), metrics, items)
            cells[column] = {
                "family": (of or {}).get(metric),
                "ablation": (mine or {}).get(metric),
                "row": row,
            }
        out.append(
            {
                "ablation": name,
                "of": entry["of"],
                "changes": changes,
                "cells": cells,
                "epochs": ((of or {}).get("train/epochs"), (mine or {}).get("train/epochs")),
            }
        )
    return out


def cell(c: dict, digits: int) -> str:
    """`family → ablation (Δ [95% CI])`, `not run`, or — where neither side has the metric."""
    # no metrics file / not this metric
    if c["row"]["verdict"] in (claims.NOT_RUN, claims.NOT_MEASURABLE):
        return claims.NOT_RUN if c["row"]["verdict"] == claims.NOT_RUN else "—"
    return f"{fmt(c['family'], digits)} → {fmt(c['ablation'], digits)} ({effect_text(c['row'])})"


def table(task: str, found: list[dict]) -> str:
    """Markdown: an ablation per line, each metric as family → ablation (Δ [95% CI]), the first
    metric's tests."""
    columns = get_task(task).ablation_columns
    first = columns[0][0]
    head = [
        "ablation",
        "of",
        "change",
        *[f"{c}: family → ablation (Δ [95% CI])" for c, _, _ in columns],
        f"{first}: p",
        f"{first}: variance counted",
        "epochs",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in found:
        main = r["cells"][first]["row"]
        epochs = " → ".join(fmt(float(e), 1) if e is not None else "—" for e in r["epochs"])
        named = get_task(task).ablation_names
        changes = "; ".join(
            f"{named[c.split(':')[0]]} ({c})" if c.split(":")[0] in named else c
            for c in r["changes"]
        )
        lines.append(
            "| "
            + " | ".join(
                [
                    f"`{r['ablation']}`",
                    f"`{r['of']}`",
                    changes,
                    *[cell(r["cells"][c], d) for c, _, d in columns],
                    p_text(main["p"]),
                    main["variance"] or "—",
                    epochs,
                ]
            )
            + " |"
        )
    return "\n".join(lines)


def page(tables: dict[str, list[dict]]) -> str:
    """reports/ablations.md: one section per task."""
    lines = [
        "# Ablations",
        "",
        (
            "Generated by the `report_claims` stage from params.yaml `<task>.ablations`; do not"
            " edit by hand. Each ablation is its family with one switch changed, trained on every"
            " seed with the family's tuned values (stage `train_ablation_<task>@<ablation>`) and"
            " evaluated on the same test set. Each metric: the means over seeds, family → ablation,"
            " and Δ = ablation − family in points (BLEU as it is, a fraction × 100) with its 95%"
            " interval, which counts the seeds' spread and, where the predictions give the metric"
            " item by item, the test set's; for the first metric, the two-sided p of Δ against 0"
            " and the variance it counts, by the ledger's rule ([claims.md](claims.md); no"
            " correction for the number of rows here). Epochs: each side's mean epochs to early"
            " stopping."
        ),
        "",
    ]
    for task, found in tables.items():
        lines += [f"## {task}", ""]
        lines += [
            table(task, found)
            if found
            else f"No ablations of this run's families in params.yaml `{task}.ablations`.",
            "",
        ]
    return "\n".join(lines)
