"""DVC stage `report_claims` (`python -m attention_lab.stages.claims`): the ledger of the timeline's claims
(conf/claims.yaml) on the committed metrics of every task of params.yaml `tasks` -> reports/claims.md,
reports/claims/forest.png and metrics/claims.json; each task's rows are also logged to its latest MLflow comparison
run (written by its report stage). The same measures compare each ablation with its family -> reports/ablations.md."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import mlflow
from omegaconf import DictConfig

from attention_lab.core import tracking
from attention_lab.core.config import families, load_config, read_params, run_ablations
from attention_lab.core.files import atomic_path, read_json, write_json, write_text
from attention_lab.core.paths import metrics_dir, predictions_path, reports_dir
from attention_lab.results import ablations, claims, ledger
from attention_lab.results.significance import paired_pvalues
from attention_lab.stages.common import run_stage

CLAIMS = Path("conf") / "claims.yaml"


def outputs(p: dict, labels) -> dict | None:
    """A predictions file's per-seed outputs at a share of the labels (all of them: its `seeds`)."""
    if labels is None or float(labels) == 1.0:
        return p["seeds"]
    return next((v for k, v in (p.get("label_fractions") or {}).items() if float(k) == float(labels)), None)


def sources(cfg: DictConfig, task: str, names: list[str]):
    """(metrics, examples_p) of results.claims.measure for one task: family -> metrics/<task>/<family>.json (None
    unless the family is one of `names` and has the file), and the per-example test on predictions/<task>/."""

    @functools.cache  # one read per file: every claim and every ablation column asks again
    def metrics(family: str) -> dict | None:
        path = metrics_dir(cfg) / task / f"{family}.json"
        return read_json(path) if family in names and path.is_file() else None

    def examples_p(a: dict, b: dict) -> tuple[float, str] | None:
        paths = [predictions_path(cfg, t["family"]) for t in (a, b)]
        if not all(p.is_file() for p in paths):
            return None
        (pa, pb) = (read_json(p) for p in paths)
        outs = {a["family"]: outputs(pa, a.get("labels")), b["family"]: outputs(pb, b.get("labels"))}
        if None in outs.values():
            return None
        if pa["references"] != pb["references"]:
            raise ValueError(f"{paths[0]} and {paths[1]}: different test examples (re-run their evaluate stages)")
        p, methods = paired_pvalues(outs, pa["references"], b["family"], [a["metric"]])
        return p[a["family"]][a["metric"]], methods[a["metric"]]

    return metrics, examples_p


def log_to_comparison(cfg: DictConfig, task: str, rows: list[dict], page: Path) -> None:
    """The task's rows as metrics, claims.json and the page, on its latest comparison run (none yet: a line says so)."""
    mlflow.set_tracking_uri(tracking.tracking_uri(cfg))
    found = mlflow.search_runs([tracking.experiment_id(cfg)], filter_string="tags.kind = 'comparison'",
                               order_by=["attributes.start_time DESC"], max_results=1, output_format="list")
    if not found:
        print(f"claims: no comparison run of {task} in MLflow yet (run `dvc repro report_{task}`): not logged there")
        return
    with mlflow.start_run(run_id=found[0].info.run_id):
        mlflow.log_metrics({f"claims/{r['id']}/effect": r["effect"]["mean"] for r in rows if r["effect"]})
        mlflow.set_tags({f"claims.{r['id']}": r["verdict"] for r in rows})
        mlflow.log_dict({"rule": claims.RULE, "claims": rows}, "claims.json")
        mlflow.log_artifact(str(page))


def main(argv: list[str]) -> None:
    if argv:
        raise SystemExit("usage: python -m attention_lab.stages.claims (reads params.yaml `tasks` and conf/claims.yaml)")
    root = Path.cwd().resolve()
    params = read_params(root)
    tasks = list(params.get("tasks") or [])
    every = claims.load(root / CLAIMS)
    cfgs = {t: load_config(root=root, task=t) for t in tasks}
    tried = {t: run_ablations(params, t, root) for t in tasks}
    measures = {t: sources(cfgs[t], t, families(params, t) + list(tried[t])) for t in tasks}
    by_task = {t: [claims.measure(c, *measures[t]) for c in every if c["task"] == t] for t in tasks}
    rows = [r for t in tasks for r in by_task[t]]
    cfg = cfgs[tasks[0]]
    reports = reports_dir(cfg)
    with atomic_path(reports / "claims") as assets:
        assets.mkdir()
        ledger.forest(rows, assets / "forest.png")
    write_text(reports / "claims.md", ledger.page(rows, tasks, "claims/forest.png"))
    write_json(metrics_dir(cfg) / "claims.json", {"rule": claims.RULE, "claims": rows})
    write_text(reports / "ablations.md", ablations.page({t: ablations.rows(t, tried[t], *measures[t]) for t in tasks}))
    for t in tasks:
        log_to_comparison(cfgs[t], t, by_task[t], reports / "claims.md")
    print(f"wrote {reports / 'claims.md'}: " + ", ".join(f"{r['id']} {r['verdict']}" for r in rows))


if __name__ == "__main__":
    run_stage("report_claims", main, sys.argv[1:])
