"""DVC stage `report_<task>`: from each family's record (metrics/<task>/<family>.json joined with
results/<task>/<family>/details.json: results.records) reports/<task>.md + reports/<task>/*,
metrics/<task>_summary.json (ranking and paired p-values), and an MLflow "comparison" run holding
the page and the ranking (the task's family runs nest under it); `report_index` (`python -m
attention_lab.stages.report index`): reports/index.md, a line and a link per task."""

from __future__ import annotations

import sys
from pathlib import Path

import mlflow
from omegaconf import DictConfig

from attention_lab.core import tracking
from attention_lab.core.config import load_config
from attention_lab.core.files import atomic_path, read_json, write_json, write_text
from attention_lab.core.params import families, read_params
from attention_lab.core.paths import metrics_dir, predictions_path, reports_dir, root_dir, seed_dir
from attention_lab.core.task import Task, get_task
from attention_lab.results import charts, records
from attention_lab.results.report import (
    config_section,
    curves_section,
    headline,
    pareto_front,
    ranked,
    ranking_section,
    render_index,
    tuning_section,
)
from attention_lab.results.significance import PAIRED_TEST, paired_pvalues
from attention_lab.stages.common import run_stage, stage_config


def read_predictions(
    cfg: DictConfig, names: list[str], results: dict[str, dict]
) -> tuple[dict, list]:
    """Every family's per-seed test outputs ({family: {seed: [...]}}) and the references, checked to
    cover the same test examples in the same order and the seeds of the family's metrics file."""
    outputs, first = {}, None
    for f in names:
        path = predictions_path(cfg, f)
        p = read_json(path)
        shape_ok = (
            isinstance(p, dict)
            and isinstance(p.get("seeds"), dict)
            and isinstance(p.get("references"), list)
        )
        if not shape_ok:
            raise ValueError(
                f'{path}: expected {{"seeds": {{"<k>": [...]}}, "references": [...]}} '
                "(written by the evaluate stage)"
            )
        if sorted(p["seeds"]) != sorted(str(s) for s in results[f]["seeds"]):
            raise ValueError(
                f"{path}: seeds {sorted(p['seeds'])}, but its metrics file has"
                f" {results[f]['seeds']}"
            )
        for seed, out in p["seeds"].items():
            if len(out) != len(p["references"]):
                raise ValueError(
                    f"{path}: seed {seed} has {len(out)} outputs for {len(p['references'])}"
                    " references"
                )
        first = first or (path, p)
        if (p.get("ids"), p["references"]) != (first[1].get("ids"), first[1]["references"]):
            raise ValueError(
                f"{path}: its test examples differ from those of {first[0]} (re-run the evaluate"
                " stages)"
            )
        outputs[f] = p["seeds"]
    return outputs, first[1]["references"]


def significance(
    cfg: DictConfig, task: Task, names: list[str], results: dict[str, dict]
) -> tuple[dict, dict]:
    """Paired tests of every family against the baseline (the task's first family) and against the
    best one (first by mean ranking metric): ({family: {"baseline", "best", "p_baseline": {metric:
    p}, "p_best": ...}}, methods)."""
    keys = [k for k in task.headline if k in PAIRED_TEST]
    baseline, best = names[0], ranked(results, next(iter(task.headline)))[0]
    outputs, refs = read_predictions(cfg, names, results)
    p_baseline, methods = paired_pvalues(outputs, refs, baseline, keys)
    p_best, _ = paired_pvalues(outputs, refs, best, keys)
    return {
        f: {
            "baseline": baseline,
            "best": best,
            "p_baseline": p_baseline.get(f, {}),
            "p_best": p_best.get(f, {}),
        }
        for f in names
    }, methods


def ranking(
    task: Task, results: dict[str, dict], tests: dict[str, dict], methods: dict, assets: Path
) -> list[str]:
    """The ranking section of the page, and its quality-against-train-time picture in
    reports/<task>/pareto.png."""
    key = next(iter(task.headline))
    points = {
        f: (m["train/train_seconds"], m[key], headline(m, key)["sd"]) for f, m in results.items()
    }
    front = pareto_front({f: (c, q) for f, (c, q, _) in points.items()})
    charts.pareto(points, front, assets / "pareto.png", ylabel=task.headline[key])
    some = next(iter(tests.values()))
    return [
        *ranking_section(task, results, tests, methods, some["baseline"], some["best"], front),
        *config_section(results),
        *curves_section(task.name, results, assets),
        *tuning_section(task.name, results, assets),
    ]


def comparison_metrics(
    task: Task, results: dict[str, dict], tests: dict[str, dict]
) -> dict[str, float]:
    """The ranking as MLflow metrics of the comparison run:
    <family>/<metric>_{mean,sd,ci95_low,ci95_high}, rank, p-values against the baseline and the best
    family, params, train seconds and tokens/s."""
    out = {}
    for rank, f in enumerate(ranked(results, next(iter(task.headline))), 1):
        out[f"{f}/rank"] = float(rank)
        for key in task.headline:
            slug = key.replace("/", "_")  # test/bleu -> test_bleu
            out.update(
                {
                    f"{f}/{slug}_{part}": v
                    for part, v in zip(
                        ("mean", "sd", "ci95_low", "ci95_high"), headline(results[f], key).values()
                    )
                    if v is not None
                }
            )
            out.update(
                {
                    f"{f}/p_{against}_{slug}": tests[f][f"p_{against}"][key]
                    for against in ("baseline", "best")
                    if key in tests[f][f"p_{against}"]
                }
            )
        for key in ("params", "train_seconds", "train_tokens_per_s"):
            out[f"{f}/{key}"] = float(results[f][f"train/{key}"])
    return out


def write_index(root: Path) -> None:
    """reports/index.md from metrics/<task>_summary.json of every task in params.yaml `tasks`."""
    params = read_params(root)
    if not params.get("tasks"):
        raise ValueError(
            f"{root / 'params.yaml'}: `tasks` lists no task, so there is no report to index"
        )
    cfg = load_config(root=root, task=params["tasks"][0])
    summaries = {}
    for task in params["tasks"]:
        path = metrics_dir(cfg) / f"{task}_summary.json"
        summaries[task] = read_json(path)
        if not summaries[task] or any("rank" not in m for m in summaries[task].values()):
            raise ValueError(
                f"{path}: no families with a `rank` (re-run `dvc repro report_{task}`)"
            )
    write_text(reports_dir(cfg) / "index.md", render_index(summaries))
    print(f"wrote {reports_dir(cfg) / 'index.md'}")


def main(argv: list[str]) -> None:
    if argv[:1] == ["index"]:
        return write_index(Path.cwd().resolve())
    cfg = stage_config(argv, need_family=False)
    root, task = root_dir(cfg), get_task(cfg.task.name)
    names = families(read_params(root), task.name)
    results = {f: records.read(cfg, f) for f in names}
    tests, methods = significance(cfg, task, names, results)
    reports = reports_dir(cfg)
    with atomic_path(reports / task.name) as assets:
        assets.mkdir()
        page = task.page(cfg, results, assets, ranking(task, results, tests, methods, assets))
    write_text(reports / f"{task.name}.md", page)
    order = ranked(results, next(iter(task.headline)))
    write_json(
        metrics_dir(cfg) / f"{task.name}_summary.json",
        {
            f: {
                **{
                    k: v
                    for k, v in m.items()
                    if k.startswith(("test/", "train/")) and not isinstance(v, (str, list))
                },
                "rank": order.index(f) + 1,
                "significance": {**tests[f], "methods": methods},
            }
            for f, m in results.items()
        },
    )
    mlflow.set_tracking_uri(tracking.tracking_uri(cfg))
    with mlflow.start_run(
        experiment_id=tracking.experiment_id(cfg),
        run_name="comparison",
        tags={"kind": "comparison", "task": task.name, "git_commit": tracking.git_commit(root)},
    ) as run:
        mlflow.log_params(
            {
                "baseline": names[0],
                "best": order[0],
                "seeds": str(list(cfg.seeds)),
                "ranking_metric": next(iter(task.headline)),
            }
        )
        mlflow.log_metrics(comparison_metrics(task, results, tests))
        mlflow.log_artifact(str(reports / f"{task.name}.md"))
        mlflow.log_artifacts(str(reports / task.name), artifact_path=task.name)
    client, elsewhere = mlflow.MlflowClient(), []
    for f in names:  # the UI then nests every family run under the report run that compares them
        # (runs whose models this checkout lacks, e.g. before `dvc pull`: none)
        for seed in results[f]["seeds"]:
            if (path := seed_dir(cfg, seed, family=f) / "run.json").is_file():
                found = tracking.local_run(cfg, rid := read_json(path)["run_id"])
                if found is None:  # neither the run nor a stand-in (evaluate makes one) is here
                    elsewhere.append(rid)
                else:
                    client.set_tag(found, "mlflow.parentRunId", run.info.run_id)
    if elsewhere:
        print(
            f"report_{task.name}: {len(elsewhere)} training runs of run.json are in another "
            f"MLflow store, not in {tracking.tracking_uri(cfg)}: not nested under the comparison"
        )
    link = tracking.ui_link(run.info.experiment_id)
    print(f"wrote {reports / f'{task.name}.md'}; in `mlflow ui`: http://127.0.0.1:5000/{link}")


if __name__ == "__main__":
    run_stage("report", main, sys.argv[1:])
