"""DVC stage: evaluate one family on the test split -> metrics/<task>/<family>.json, plots/<family>/*.png (+ MLflow)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import mlflow

from attention_lab import plots, tracking
from attention_lab.checkpoints import load_model
from attention_lab.data.batching import load_split
from attention_lab.evaluation import evaluate
from attention_lab.io import atomic_path, read_json, write_json
from attention_lab.metrics import bucket_of
from attention_lab.stages.common import seed_dir, stage_config
from attention_lab.tokenization import load_tokenizer


def heatmap_rows(rows: list[dict], buckets, n: int) -> list[int]:
    """Indices of n test sentences spread over the length buckets (shortest bucket first)."""
    by_bucket = {}
    for i, r in enumerate(rows):
        by_bucket.setdefault(bucket_of(len(r["src"].split()), buckets), i)
    picks = [by_bucket[b] for b in sorted(by_bucket)]
    return [picks[round(k * (len(picks) - 1) / max(n - 1, 1))] for k in range(n)] if picks else []


def main(argv: list[str]) -> None:
    cfg = stage_config(argv)
    root = Path(cfg.root)
    tok = load_tokenizer(root / cfg.paths.tokenized / "tokenizer.json")
    rows = load_split(root / cfg.paths.prepared, "test", tok)
    per_seed, plot_dir = {}, root / cfg.paths.plots / cfg.family
    with atomic_path(plot_dir) as tmp_dir:
        tmp_dir.mkdir()
        for seed in cfg.seeds:
            model, _ = load_model(seed_dir(cfg, seed) / "best.ckpt")
            scores, attentions = evaluate(model, tok, rows, cfg)
            per_seed[str(seed)] = scores
            print(f"{cfg.family} seed {seed}: " + ", ".join(
                f"{k}={v:.2f}" for k, v in scores.items() if isinstance(v, float)))
            if seed != cfg.seeds[0] or attentions is None:
                continue
            for k, i in enumerate(heatmap_rows(rows, cfg.task.buckets, cfg.evaluate.heatmaps)):
                plots.attention_heatmap(attentions[i], rows[i]["src"].split(), rows[i]["tgt"].split(),
                                        tmp_dir / f"attention_{k}.png", gold={tuple(p) for p in rows[i]["align"]},
                                        title=f"{cfg.family}: test sentence {rows[i]['id']}")
        first = per_seed[str(cfg.seeds[0])]
        numeric = [k for k, v in first.items() if isinstance(v, float)]
        summary = {k: statistics.fmean(per_seed[s][k] for s in per_seed) for k in numeric}
        trained = [read_json(seed_dir(cfg, s) / "train.json") for s in cfg.seeds]
        for key in ("params", "train_seconds", "train_tokens_per_s", "epochs"):
            summary[f"train/{key}"] = statistics.fmean(t[key] for t in trained)
        summary.update({k: v for k, v in first.items() if isinstance(v, str)},
                       family=cfg.family, seeds=list(cfg.seeds), per_seed=per_seed)
        for seed in cfg.seeds:
            run_id = read_json(seed_dir(cfg, seed) / "run.json")["run_id"]
            with tracking.reopen_run(cfg, run_id):
                mlflow.log_metrics({k: v for k, v in per_seed[str(seed)].items() if isinstance(v, float)})
                mlflow.log_artifacts(str(tmp_dir), artifact_path="plots")
    write_json(root / cfg.paths.metrics / cfg.task.name / f"{cfg.family}.json", summary)


if __name__ == "__main__":
    main(sys.argv[1:])
