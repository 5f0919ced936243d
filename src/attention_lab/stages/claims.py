"""DVC stage `report_claims` (`python -m attention_lab.stages.claims`): the ledger of the timeline's
claims (conf/claims.yaml) on the committed metrics of every task of params.yaml `tasks` ->
reports/claims.md, reports/claims/forest.png and metrics/claims.json; each task's rows are also
logged to its latest MLflow comparison run (written by its report stage). The same measures compare
each ablation with its family -> reports/ablations.md."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import sys
from pathlib import Path

import mlflow
import numpy as np
import yaml
from omegaconf import DictConfig

from attention_lab.core import tracking
from attention_lab.core.config import load_config
from attention_lab.core.files import atomic_path, read_json, read_jsonl, write_json, write_text
from attention_lab.core.params import families, read_params, replication, run_ablations
from attention_lab.core.paths import (
    LOCK,
    metrics_dir,
    predictions_path,
    prepared_dir,
    reports_dir,
    root_dir,
)
from attention_lab.results import (
    ablations,
    claims,
    compute,
    evidence,
    ledger,
    preregistration,
    records,
)
from attention_lab.results.metrics import bucket_key, bucket_of
from attention_lab.stages.common import run_stage

CLAIMS = Path("conf") / "claims.yaml"


def outputs(p: dict, labels) -> dict | None:
    """A predictions file's per-seed outputs at a share of the labels (all of them: its `seeds`)."""
    if labels is None or float(labels) == 1.0:
        return p["seeds"]
    return next(
        (v for k, v in (p.get("label_fractions") or {}).items() if float(k) == float(labels)), None
    )


def sources(cfg: DictConfig, task: str, names: list[str]):
    """(metrics, items) of results.claims.measure for one task: family -> its record
    (results.records; None unless the family is one of `names` and has a metrics file), and a family
    term -> its per-item statistics from predictions/<task>/<family>.json (accuracy, BLEU, BLEU
    within a source-length bucket, and the metrics the evaluate stage kept as counts item by item,
    `item_stats`: AER, localisation; None for any other metric)."""

    @functools.cache  # one read per file: every claim and every ablation column asks again
    def metrics(family: str) -> dict | None:
        found = family in names and records.metrics_path(cfg, family).is_file()
        return records.read(cfg, family) if found else None

    @functools.cache
    def predictions(family: str) -> dict | None:
        path = predictions_path(cfg, family)
        return read_json(path) if family in names and path.is_file() else None

    @functools.cache
    def test_file(family: str) -> Path:
        """data/prepared/<task>[_<corpus>]/test.jsonl: the test items of the family's corpus."""
        return (
            prepared_dir(load_config(root=root_dir(cfg), family=family, task=task)) / "test.jsonl"
        )

    @functools.cache
    def lengths(family: str) -> list[int]:
        """Each test item's source length in words, for the bucket metrics."""
        return [len(row["src"].split()) for row in read_jsonl(test_file(family))]

    @functools.cache  # one hash per family: every claim and ablation column asks again
    def test_set(family: str) -> str:
        """A digest of the family's test references: terms pair item by item only on one test
        set."""
        refs = (predictions(family) or {}).get("references")
        return hashlib.sha256(json.dumps(refs).encode()).hexdigest()

    def items(term: dict) -> evidence.Items | None:
        got = term_items(term["family"], term["metric"], term.get("labels"))
        return None if got is None else dataclasses.replace(got, test_set=test_set(term["family"]))

    # one per family, metric and labels: every claim and ablation column asks again
    @functools.cache
    def term_items(family: str, metric: str, labels) -> evidence.Items | None:
        found = predictions(family)
        outs = outputs(found, labels) if found else None
        # photos: every caption
        refs = (found or {}).get("all_references") or (found or {}).get("references")
        if outs is None:
            return None
        if metric == "test/accuracy":
            return evidence.accuracy_items(outs, refs)
        if metric == "test/bleu":
            return evidence.bleu_items(outs, refs)
        if (counted := (found.get("item_stats") or {}).get(metric)) and labels is None:
            return evidence.counted_items(counted["seeds"], counted["score"])
        buckets = list(cfg.task.get("buckets") or [])
        which = next(
            (i for i, b in enumerate(buckets) if metric == f"test/bleu_len_{bucket_key(b)}"), None
        )
        if which is None:
            return None
        n = lengths(family)
        if len(n) != len(refs):
            raise ValueError(
                f"{test_file(family)}: {len(n)} test items, {len(refs)} in "
                f"{predictions_path(cfg, family)} (re-run the evaluate stage)"
            )
        return evidence.bleu_items(
            outs, refs, np.array([bucket_of(k, buckets) == which for k in n])
        )

    return metrics, items


def log_to_comparison(cfg: DictConfig, task: str, rows: list[dict], page: Path) -> None:
    """The task's rows as metrics, claims.json and the page, on its latest comparison run (none yet:
    a line says so)."""
    mlflow.set_tracking_uri(tracking.tracking_uri(cfg))
    found = mlflow.search_runs(
        [tracking.experiment_id(cfg)],
        filter_string="tags.kind = 'comparison'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
        output_format="list",
    )
    if not found:
        print(
            f"claims: no comparison run of {task} in MLflow yet (run `dvc repro report_{task}`):"
            " not logged there"
        )
        return
    with mlflow.start_run(run_id=found[0].info.run_id):
        mlflow.log_metrics(
            {f"claims/{r['id']}/effect": r["effect"]["mean"] for r in rows if r["effect"]}
        )
        mlflow.set_tags({f"claims.{r['id']}": r["verdict"] for r in rows})
        mlflow.log_dict({"rule": claims.RULE, "claims": rows}, "claims.json")
        mlflow.log_artifact(str(page))


def kinds_of_evidence(
    root: Path, params: dict, rows: list[dict], replicated: bool = False
) -> list[dict]:
    """Each row's results.preregistration.evidence: its claim's freezing commit against its runs' in
    dvc.lock (the replication's train stages where `replicated`); the study's seed is params.yaml
    `seeds`' first (train/trial.py keeps that trial's run)."""
    try:
        frozen = preregistration.frozen_at(root)
        lock = (
            yaml.safe_load((root / LOCK).read_text(encoding="utf-8"))
            if (root / LOCK).is_file()
            else {}
        )
        runs = {
            f: preregistration.recorded_at(root, f, lock, replicated)
            for r in rows
            for f in r["families"]
        }
    except ValueError as err:  # no git checkout: nothing can show the order
        return [
            {"kind": "exploratory", "why": f"no git history to order claims and runs ({err})"}
            for _ in rows
        ]
    study = {str((params.get("seeds") or [0])[0])}
    return [
        preregistration.evidence(
            root, frozen.get(r["id"]), {f: runs[f] for f in r["families"]}, r["seeds"], study
        )
        for r in rows
    ]


def tuning(params: dict, tasks: list[str], measures: dict, tried: dict) -> dict[str, dict]:
    """{family or ablation: its study's figures (`tuning.study` of its metrics file; an ablation's
    are its family's, marked `of`)} for every family the pipeline runs."""
    out = {}
    for t in tasks:
        metrics = measures[t][0]
        for name in families(params, t):
            study = ((metrics(name) or {}).get("tuning") or {}).get("study")
            if study is not None:
                out[name] = study
        for name, entry in tried[t].items():
            if entry["of"] in out:
                out[name] = {**out[entry["of"]], "of": entry["of"]}
    return out


def ledger_rows(
    root: Path,
    params: dict,
    every: list[dict],
    tasks: list[str],
    measures: dict,
    replicated: bool = False,
) -> list[dict]:
    """One ledger: every claim measured (by the task's sources), decided with Holm, each with its
    evidence."""
    rows = claims.decide(
        [claims.measure(c, *measures[t]) for t in tasks for c in every if c["task"] == t]
    )
    for row, found in zip(rows, kinds_of_evidence(root, params, rows, replicated)):
        row["evidence"], row["evidence_why"] = found["kind"], found["why"]
    return rows


def main(argv: list[str]) -> None:
    if argv:
        raise SystemExit(
            "usage: python -m attention_lab.stages.claims (reads params.yaml `tasks` and"
            " conf/claims.yaml)"
        )
    root = Path.cwd().resolve()
    params = read_params(root)
    tasks = list(params.get("tasks") or [])
    every = claims.load(root / CLAIMS)
    cfgs = {t: load_config(root=root, task=t) for t in tasks}
    tried = {t: run_ablations(params, t, root) for t in tasks}
    measures = {t: sources(cfgs[t], t, families(params, t) + list(tried[t])) for t in tasks}
    rows = ledger_rows(root, params, every, tasks, measures)
    # the confirmatory replication's metrics and predictions
    again = {
        t: sources(
            load_config(["replication=true"], root=root, task=t),
            t,
            list(replication(params, t, root)),
        )
        for t in tasks
    }
    confirmatory = [
        r
        for r in ledger_rows(root, params, every, tasks, again, replicated=True)
        if r["effect"] is not None
    ]
    asked = {t: replication(params, t, root) for t in tasks}
    cfg = cfgs[tasks[0]]
    reports = reports_dir(cfg)
    with atomic_path(reports / "claims") as assets:
        assets.mkdir()
        ledger.forest(ledger.headline(rows, confirmatory), assets / "forest.png")
    studies = tuning(params, tasks, measures, tried)
    cost = {
        **{
            (t, "exploratory"): compute.spent(
                families(params, t) + list(tried[t]), measures[t][0], families(params, t)
            )
            for t in tasks
        },
        **{(t, "confirmatory"): compute.spent(asked[t], again[t][0]) for t in tasks if asked[t]},
    }
    write_text(
        reports / "claims.md",
        ledger.page(rows, tasks, "claims/forest.png", confirmatory, asked, studies, cost),
    )
    write_json(
        metrics_dir(cfg) / "claims.json",
        {"rule": claims.RULE, "claims": rows, "confirmatory": confirmatory},
    )
    write_text(
        reports / "ablations.md",
        ablations.page({t: ablations.rows(t, tried[t], *measures[t]) for t in tasks}),
    )
    best = ledger.headline(rows, confirmatory)
    for t in tasks:
        log_to_comparison(cfgs[t], t, [r for r in best if r["task"] == t], reports / "claims.md")
    print(
        f"wrote {reports / 'claims.md'}: "
        + ", ".join(f"{r['id']} {r['verdict']} ({r['evidence']})" for r in best)
    )


if __name__ == "__main__":
    run_stage("report_claims", main, sys.argv[1:])
