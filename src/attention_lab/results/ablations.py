"""Ablation tables from DVC experiments: every `dvc exp run -S <task>.family_params.<family>.…` against its baseline."""

from __future__ import annotations

from attention_lab.core.task import get_task
from attention_lab.results.report import fmt


def _metric(row: dict, task: str, family: str, name: str, own: set[str]) -> float | None:
    """A family's metric in a flat `dvc exp show` row: keyed `<metrics file>:<name>` when files share the name, bare
    when one file alone has it (then it is this family's only if the family's own metrics file has it: `own`)."""
    value = row.get(f"metrics/{task}/{family}.json:{name}", row.get(name) if name in own else None)
    return value if isinstance(value, (int, float)) else None


def _changes(row: dict, baseline: dict, task: str, family: str, below=None, keys: set[str] | None = None) -> list[str]:
    """`key: old → new` for every <task>.family_params.<family>.* value that differs from the baseline; a key the
    baseline's family_params lacks (set with `-S ++…`) has its old value from `below(family, key)`, the value the
    layers under family_params gave it (conf/model, params.yaml, tuned/); a key this experiment lacks is not a change
    (exp show gives every row the `++` keys of every experiment, None where a row lacks one): `keys`, the dotted keys
    the experiment's params.yaml sets, tells a lacking key from one set to null; without it, None counts as lacking."""
    own = f"{task}.family_params.{family}."
    changes = []
    for key, value in sorted(row.items()):
        if key.startswith(own) and (key in keys if keys is not None else value not in (None, "None")):
            old = baseline.get(key)  # "None": not in the baseline's params.yaml (exp show gives every row every column,
            if old in (None, "None") and below is not None:  # its values as strings)
                old = below(family, key[len(own):])
            if str(value) != str(old):
                changes.append(f"{key[len(own):]}: {old} → {value}")
    return changes


def params_keys(params: dict, prefix: str = "") -> set[str]:
    """The dotted keys of a params tree's leaves, null ones included: {'translate.family_params.luong_dot.model.x', ...}."""
    keys = set()
    for k, v in params.items():
        keys |= params_keys(v, f"{prefix}{k}.") if isinstance(v, dict) and v else {f"{prefix}{k}"}
    return keys


def ablation_rows(exp_rows: list[dict], task: str, families: list[str],
                  own_metrics: dict[str, set[str]] | None = None, below=None, keys_of=None) -> list[dict]:
    """One row per (experiment, family whose family_params it changed), with metrics of baseline and experiment;
    own_metrics: the metric names in each family's metrics file (to read metrics only one family has); below:
    (family, dotted key) -> the baseline's value of a key its family_params lacks; keys_of: an experiment's rev ->
    the keys its params.yaml sets (params_keys; None where unknown), so that a switch set to null counts."""
    own_metrics = own_metrics or {}
    baselines = [r for r in exp_rows if r.get("typ") == "baseline" and r.get("rev") != "workspace"]
    if not baselines:
        return []
    baseline, rows = baselines[0], []
    for row in exp_rows:
        if row.get("typ") == "baseline" or row.get("State") not in (None, "Success"):
            continue  # queued, running or failed experiments have no metrics yet
        keys = keys_of(row.get("rev")) if keys_of else None
        for family in families:
            changes = _changes(row, baseline, task, family, below, keys)
            own = own_metrics.get(family, set())
            if changes and _metric(row, task, family, get_task(task).ablation_columns[0][1], own) is not None:
                rows.append({"experiment": row.get("Experiment") or row.get("rev"), "family": family,
                             "changes": changes,
                             **{name: (_metric(baseline, task, family, key, own), _metric(row, task, family, key, own))
                                for name, key, _ in get_task(task).ablation_columns}})
    return rows


def named(change: str, task: str) -> str:
    """`key: old → new`, preceded by what the ablation asks where the task names the key (Task.ablation_names)."""
    name = get_task(task).ablation_names.get(change.split(":")[0])
    return f"{name} ({change})" if name else change


def ablation_table(rows: list[dict], task: str) -> str:
    """Markdown: family, what changed, and each metric as baseline → experiment."""
    head = ["family", "change", *[f"{name} (baseline → ablation)" for name, _, _ in get_task(task).ablation_columns], "experiment"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [f"{fmt(r[name][0], digits)} → {fmt(r[name][1], digits)}" for name, _, digits in get_task(task).ablation_columns]
        changes = "; ".join(named(c, task) for c in r["changes"])
        lines.append("| " + " | ".join([f"`{r['family']}`", changes, *cells, f"`{r['experiment']}`"]) + " |")
    return "\n".join(lines)


def render(tables: dict[str, list[dict]]) -> str:
    """reports/ablations.md: one section per task."""
    lines = ["# Ablations", "",
             ("Generated by `attention-lab ablations` from `dvc exp show` (each row: one `dvc exp run -S "
              "<task>.family_params.<family>.…` against the baseline commit); do not edit by hand."), ""]
    for task, rows in tables.items():
        lines += [f"## {task}", ""]
        lines += [ablation_table(rows, task) if rows else
                  f"No finished experiments change `{task}.family_params` yet; see the README, \"Ablations\".", ""]
    return "\n".join(lines)
