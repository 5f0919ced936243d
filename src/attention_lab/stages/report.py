"""DVC stage `report@<task>`: reports/<task>.md + reports/<task>/*, metrics/<task>_summary.json, and an MLflow run
holding the page (the task's family runs nest under it)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import mlflow
from omegaconf import DictConfig

from attention_lab import plots, tracking
from attention_lab.config import families, read_params
from attention_lab.io import atomic_path, read_json, write_json, write_text
from attention_lab.report import bucket_series, render_caption, render_classify, render_translate
from attention_lab.stages.common import seed_dir, stage_config


def budget_line(cfg: DictConfig) -> str:
    t = cfg.train
    return (f"Every family trains for {t.max_epochs} epochs (batch {t.batch_size}, Adam lr {t.lr}, "
            f"{t.warmup_steps} warm-up steps then cosine decay); families are listed in timeline order.")


def copy_pictures(cfg: DictConfig, names: list[str], assets: Path, patterns: tuple[str, ...]) -> dict[str, list[str]]:
    """Copy each family's plots/<task>/<family>/<pattern> files into reports/<task>/; their paths relative to the page."""
    task, out = cfg.task.name, {}
    for f in names:
        out[f] = []
        for pattern in patterns:
            for path in sorted((Path(cfg.root) / cfg.paths.plots / f).glob(pattern)):
                shutil.copy(path, assets / f"{f}_{path.name}")
                if path.suffix == ".png":
                    out[f].append(f"{task}/{f}_{path.name}")
    return out


def translate_page(cfg: DictConfig, results: dict[str, dict], assets: Path) -> str:
    plots.by_length(bucket_series(results, cfg.task.buckets), assets / "bleu_by_length.png")
    heatmaps = copy_pictures(cfg, list(results), assets, ("attention_*.png",))
    lines = [f"Profile `{cfg.profile}`, data `{cfg.data.source}`, seeds {list(cfg.seeds)}, beam {cfg.evaluate.beam}, "
             f"length penalty {cfg.evaluate.len_penalty}. " + budget_line(cfg) +
             " Ablations of one family's switches: `attention-lab ablations` writes [ablations.md](ablations.md) "
             "from `dvc exp run` experiments."]
    return render_translate("translate", results, cfg.task.buckets, heatmaps, lines)


def classify_page(cfg: DictConfig, results: dict[str, dict], assets: Path) -> str:
    plots.by_length(bucket_series(results, cfg.task.buckets, "accuracy"), assets / "accuracy_by_length.png",
                    title="Accuracy by document length", xlabel="document length (sentences)", ylabel="accuracy")
    pictures = copy_pictures(cfg, list(results), assets, ("document_*.png", "document_*.html", "hops_*.png",
                                                          "heads.png"))
    pretrained = {f: m["pretrain"] for f, m in results.items() if "pretrain" in m}
    lines = [f"Profile `{cfg.profile}`, data `{cfg.data.source}`, seeds {list(cfg.seeds)}. " + budget_line(cfg) +
             f" Attention penalty coefficient {cfg.train.penalty} (self-attentive); its ablation is in "
             "[ablations.md](ablations.md)."]
    return render_classify(results, cfg.task.buckets, cfg.evaluate.top_k_words, pictures, lines, pretrained)


def caption_page(cfg: DictConfig, results: dict[str, dict], assets: Path) -> str:
    plots.by_length(bucket_series(results, cfg.task.buckets, "accuracy"), assets / "accuracy_by_length.png",
                    title="Exact caption accuracy by number of digits", xlabel="digits on the canvas",
                    ylabel="exact accuracy")
    overlays = copy_pictures(cfg, list(results), assets, ("overlay_*.png",))
    d = cfg.data
    lines = [f"Profile `{cfg.profile}`, data `{d.source}` ({d.n_train} training canvases of {d.height}×{d.width} "
             f"pixels from scikit-learn's handwritten digit scans), seeds {list(cfg.seeds)}, beam {cfg.evaluate.beam}. "
             + budget_line(cfg) + f" Doubly stochastic regulariser λ = {cfg.train.penalty} (show_attend_tell)."]
    return render_caption(results, cfg.task.buckets, overlays, lines)


PAGES = {"translate": translate_page, "classify": classify_page, "caption": caption_page}


def main(argv: list[str]) -> None:
    cfg = stage_config(argv, need_family=False)
    root, task = Path(cfg.root), cfg.task.name
    names = families(read_params(root), task)
    results = {f: read_json(root / cfg.paths.metrics / task / f"{f}.json") for f in names}
    reports = root / cfg.paths.reports
    with atomic_path(reports / task) as assets:
        assets.mkdir()
        page = PAGES[task](cfg, results, assets)
    write_text(reports / f"{task}.md", page)
    write_json(root / cfg.paths.metrics / f"{task}_summary.json",
               {f: {k: v for k, v in m.items() if k.startswith(("test/", "train/")) and not isinstance(v, str)}
                for f, m in results.items()})
    mlflow.set_tracking_uri(tracking.tracking_uri(cfg))
    with mlflow.start_run(experiment_id=tracking.experiment_id(cfg), run_name=f"{task}-report",
                          tags={"kind": "report", "task": task, "git_commit": tracking.git_commit(root)}) as run:
        mlflow.log_artifact(str(reports / f"{task}.md"))
        mlflow.log_artifacts(str(reports / task), artifact_path=task)
    client = mlflow.MlflowClient()
    for f in names:  # the UI then nests every family run under the report run that compares them
        for seed in results[f]["seeds"]:
            run_id = read_json(seed_dir(cfg, seed, family=f) / "run.json")["run_id"]
            client.set_tag(run_id, "mlflow.parentRunId", run.info.run_id)
    print(f"wrote {reports / f'{task}.md'}")


if __name__ == "__main__":
    main(sys.argv[1:])
