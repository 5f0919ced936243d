"""DVC stage: reports/<task>.md + reports/<task>/*.png + metrics/summary.json, and an MLflow run holding them."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import mlflow

from attention_lab import plots, tracking
from attention_lab.config import read_params
from attention_lab.io import atomic_path, read_json, write_json, write_text
from attention_lab.report import bleu_series, render
from attention_lab.stages.common import seed_dir, stage_config


def main(argv: list[str]) -> None:
    cfg = stage_config(argv, need_family=False)
    root, task = Path(cfg.root), cfg.task.name
    families = read_params(root)["families"]
    results = {f: read_json(root / cfg.paths.metrics / task / f"{f}.json") for f in families}
    reports = root / cfg.paths.reports
    heatmaps = {}
    with atomic_path(reports / task) as assets:
        assets.mkdir()
        plots.bleu_by_length(bleu_series(results, cfg.task.buckets), assets / "bleu_by_length.png")
        for f in families:
            heatmaps[f] = []
            for png in sorted((root / cfg.paths.plots / f).glob("attention_*.png")):
                shutil.copy(png, assets / f"{f}_{png.name}")
                heatmaps[f].append(f"{task}/{f}_{png.name}")
    t = cfg.train
    cfg_lines = [(f"Profile `{cfg.profile}`, data `{cfg.data.source}`, seeds {list(cfg.seeds)}, "
                  f"beam {cfg.evaluate.beam}, length penalty {cfg.evaluate.len_penalty}. "
                  f"Every family trains for {t.max_epochs} epochs (batch {t.batch_size}, Adam lr {t.lr}, "
                  f"{t.warmup_steps} warm-up steps then cosine decay); families are listed in timeline order. "
                  "Ablations of one family's switches: `attention-lab ablations` writes [ablations.md](ablations.md) "
                  "from `dvc exp run` experiments.")]
    write_text(reports / f"{task}.md", render(task, results, cfg.task.buckets, heatmaps, cfg_lines))
    write_json(root / cfg.paths.metrics / "summary.json",
               {task: {f: {k: v for k, v in m.items() if k.startswith(("test/", "train/")) and not isinstance(v, str)}
                       for f, m in results.items()}})
    mlflow.set_tracking_uri(tracking.tracking_uri(cfg))
    with mlflow.start_run(experiment_id=tracking.experiment_id(cfg), run_name=f"{task}-report",
                          tags={"kind": "report", "task": task, "git_commit": tracking.git_commit(root)}) as run:
        mlflow.log_artifact(str(reports / f"{task}.md"))
        mlflow.log_artifacts(str(reports / task), artifact_path=task)
    client = mlflow.MlflowClient()
    for f in families:  # the UI then nests every family run under the report run that compares them
        for seed in results[f]["seeds"]:
            run_id = read_json(seed_dir(cfg, seed, family=f) / "run.json")["run_id"]
            client.set_tag(run_id, "mlflow.parentRunId", run.info.run_id)
    print(f"wrote {reports / f'{task}.md'}")


if __name__ == "__main__":
    main(sys.argv[1:])
