"""DVC stage `evaluate_<task>@<family>`: score one family on the test split -> metrics/<task>/<family>.json,
plots/<task>/<family>/*, predictions/<task>/<family>.json (per-example outputs of every seed, for the report's paired
tests) (+ MLflow metrics and artifacts on the family's training run)."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import mlflow
from omegaconf import DictConfig, OmegaConf

from attention_lab import plots, tracking
from attention_lab.checkpoints import CheckpointError, load_model
from attention_lab.io import atomic_path, read_json, write_json
from attention_lab.metrics import bucket_of
from attention_lab.stages.common import (
    predictions_path,
    pretrained_dir,
    run_stage,
    seed_dir,
    stage_config,
    tokenizer_path,
)
from attention_lab.statistics import HEADLINE, seed_interval
from attention_lab.tokenization import load_tokenizer


def spread_over_buckets(lengths: list[int], buckets, n: int) -> list[int]:
    """Indices of n test examples spread over the length buckets (shortest bucket first)."""
    by_bucket = {}
    for i, length in enumerate(lengths):
        by_bucket.setdefault(bucket_of(length, buckets), i)
    picks = [by_bucket[b] for b in sorted(by_bucket)]
    return [picks[round(k * (len(picks) - 1) / max(n - 1, 1))] for k in range(n)] if picks else []


def translation(cfg: DictConfig, pictures: Path, fraction: float = 1.0) -> tuple[dict[str, dict], dict]:
    """Per-seed test/* scores and hypotheses of a translation family (trained on every pair: fraction is 1);
    attention heatmaps (gold alignment overlaid) of the first seed."""
    from attention_lab.data.batching import load_split
    from attention_lab.evaluation import evaluate

    root = Path(cfg.root)
    tok = load_tokenizer(root / cfg.paths.tokenized / "tokenizer.json")
    rows = load_split(root / cfg.paths.prepared, "test", tok)
    per_seed, outputs = {}, {"ids": [r["id"] for r in rows], "references": [r["tgt"] for r in rows], "seeds": {}}
    for seed in cfg.seeds:
        model, _ = load_model(seed_dir(cfg, seed) / "best.ckpt")
        per_seed[str(seed)], outputs["seeds"][str(seed)], attentions = evaluate(model, tok, rows, cfg)
        if seed != cfg.seeds[0] or attentions is None:
            continue
        lengths = [len(r["src"].split()) for r in rows]
        for k, i in enumerate(spread_over_buckets(lengths, cfg.task.buckets, cfg.evaluate.heatmaps)):
            plots.attention_heatmap(attentions[i], rows[i]["src"].split(), rows[i]["tgt"].split(),
                                    pictures / f"attention_{k}.png", gold={tuple(p) for p in rows[i]["align"]},
                                    title=f"{cfg.family}: test sentence {rows[i]['id']}")
    return per_seed, outputs


def classification(cfg: DictConfig, pictures: Path, fraction: float = 1.0) -> tuple[dict[str, dict], dict]:
    """Per-seed test/* scores and predicted label ids of a classify family trained on `fraction` of the labels;
    document pictures (PNG + HTML) and hop heatmaps of the first seed (pictures=None: none)."""
    from attention_lab.classification_eval import evaluate
    from attention_lab.data.document_batches import load_documents
    from attention_lab.highlights import write_document_html

    root = Path(cfg.root)
    tok = load_tokenizer(tokenizer_path(cfg))
    per_seed, outputs = {}, {"seeds": {}}
    for seed in cfg.seeds:
        model, trained = load_model(seed_dir(cfg, seed, fraction=fraction) / "best.ckpt")
        labels = list(trained.task.labels)
        cfg.task.labels = labels
        t = trained.train
        rows = load_documents(root / cfg.paths.prepared, "test", tok, labels, t.max_sentences, t.max_words,
                              t.get("max_tokens"))
        per_seed[str(seed)], probs, attentions = evaluate(model, rows, cfg)
        outputs.update(ids=[r["id"] for r in rows], references=[r["y"] for r in rows], labels=labels)
        outputs["seeds"][str(seed)] = probs.argmax(-1).tolist()
        if pictures is None or seed != cfg.seeds[0] or attentions[0] is None:
            continue
        for k, i in enumerate(spread_over_buckets([len(r["ids"]) for r in rows], cfg.task.buckets,
                                                  cfg.evaluate.pictures)):
            r, a = rows[i], attentions[i]
            sentences = [s[:len(w)] for s, w in zip(r["sentences"], a.words)]  # as truncated for the model
            title = f"{cfg.family}: test document {r['id']} (gold {r['label']}, predicted {labels[probs[i].argmax()]})"
            plots.document_attention(sentences, a.sentence, a.words, pictures / f"document_{k}.png", title=title,
                                     gold=r.get("rationale"))
            write_document_html(pictures / f"document_{k}.html", sentences, a.sentence, a.words, title,
                                labels[probs[i].argmax()], dict(zip(labels, probs[i].tolist())), gold=r.get("rationale"))
            if a.hops is not None:
                plots.hop_heatmap([w for s in sentences for w in s], a.hops, pictures / f"hops_{k}.png", title=title)
        if hasattr(model, "attention_maps"):
            i = spread_over_buckets([len(r["ids"]) for r in rows], cfg.task.buckets, 1)[0]
            head_grid(model, rows[i], tok, pictures / "heads.png", f"{cfg.family}: test document {rows[i]['id']}")
    return per_seed, outputs


def head_grid(model, row: dict, tok, path: Path, title: str) -> None:
    """Every layer and head of a BERT-style family on one document ([CLS] doc [SEP]), as one grid of heatmaps."""
    import torch

    ids = torch.tensor([[i for s in row["ids"] for i in s]])
    with torch.inference_mode():
        maps = model.attention_maps(ids, ids != 0)  # per layer (1, h, T + 2, T + 2)
    tokens = ["[CLS]", *[tok.id_to_token(int(i)) for i in ids[0]], "[SEP]"]
    plots.head_grid([m[0].numpy() for m in maps], tokens, path, title=title)


def captioning(cfg: DictConfig, pictures: Path, fraction: float = 1.0) -> tuple[dict[str, dict], dict]:
    """Per-seed test/* scores and captions of a captioner; per-word attention overlays (gold boxes in green) of the
    first seed on cfg.evaluate.overlays test canvases spread over the digit-count buckets."""
    from attention_lab.caption_eval import evaluate
    from attention_lab.data.canvas_batches import load_canvases
    from attention_lab.serving.captioner import overlay

    root = Path(cfg.root)
    tok = load_tokenizer(tokenizer_path(cfg))
    rows, images = load_canvases(root / cfg.paths.prepared, "test", tok)
    per_seed, outputs = {}, {"ids": [r["id"] for r in rows], "references": [r["caption"] for r in rows], "seeds": {}}
    for seed in cfg.seeds:
        model, _ = load_model(seed_dir(cfg, seed) / "best.ckpt")
        per_seed[str(seed)], hyps, outputs["seeds"][str(seed)] = evaluate(model, tok, rows, images, cfg)
        if seed != cfg.seeds[0] or not model.has_attention:
            continue
        for k, i in enumerate(spread_over_buckets([r["n_digits"] for r in rows], cfg.task.buckets,
                                                  cfg.evaluate.overlays)):
            words = [tok.id_to_token(t) for t in hyps[i].tokens]
            attn = hyps[i].attention.reshape(len(words), *model.grid)
            overlay(images[i] / 255.0, words, attn, boxes=rows[i]["boxes"]).save(pictures / f"overlay_{k}.png")
    return per_seed, outputs


TASKS = {"translate": translation, "classify": classification, "caption": captioning}


def summarize(cfg: DictConfig, per_seed: dict[str, dict], fraction: float) -> dict:
    """Mean test/* scores over seeds, for the task's headline metrics also their sd and 95% t-interval
    (`<metric>_sd`, `<metric>_ci95_low`, `<metric>_ci95_high`; absent with one seed), the mean train/* figures, and
    the per-seed scores."""
    first = per_seed[str(cfg.seeds[0])]
    summary = {k: statistics.fmean(per_seed[s][k] for s in per_seed) for k, v in first.items() if isinstance(v, float)}
    for key in HEADLINE[cfg.task.name]:
        spread = seed_interval([per_seed[s][key] for s in per_seed])
        if spread["sd"] is not None:
            summary.update({f"{key}_sd": spread["sd"], f"{key}_ci95_low": spread["low"],
                            f"{key}_ci95_high": spread["high"]})
    trained = [read_json(seed_dir(cfg, s, fraction=fraction) / "train.json") for s in cfg.seeds]
    for key in ("params", "train_seconds", "train_tokens_per_s", "epochs", "train_documents"):
        if key in trained[0]:
            summary[f"train/{key}"] = statistics.fmean(t[key] for t in trained)
    summary.update({k: v for k, v in first.items() if isinstance(v, str)}, seeds=list(cfg.seeds), per_seed=per_seed)
    return summary


def log_runs(cfg: DictConfig, per_seed: dict[str, dict], fraction: float, pictures: Path | None) -> None:
    """The test scores (and pictures) into each seed's training run."""
    for seed in cfg.seeds:
        with tracking.reopen_run(cfg, read_json(seed_dir(cfg, seed, fraction=fraction) / "run.json")["run_id"]):
            mlflow.log_metrics({k: v for k, v in per_seed[str(seed)].items() if isinstance(v, float)})
            if pictures is not None:
                mlflow.log_artifacts(str(pictures), artifact_path="plots")


def main(argv: list[str]) -> None:
    cfg = stage_config(argv)
    root = Path(cfg.root)
    OmegaConf.set_struct(cfg, False)  # classify adds task.labels from the checkpoint
    fractions = list(cfg.train.get("label_fractions", [1.0]))  # classify: a run per fraction of the labels
    main_fraction = 1.0 if 1.0 in fractions else max(fractions)
    with atomic_path(root / cfg.paths.plots / cfg.family) as pictures:
        pictures.mkdir()
        per_seed, outputs = TASKS[cfg.task.name](cfg, pictures, main_fraction)
        summary = {"family": cfg.family, **summarize(cfg, per_seed, main_fraction)}
        if cfg.get("pretrained"):  # where the encoder came from, and its own pretraining's figures, for the report
            summary["pretrain"] = read_json(pretrained_dir(cfg) / "pretrain.json")
        log_runs(cfg, per_seed, main_fraction, pictures)
        for fraction in fractions:
            if fraction != main_fraction:
                scores, _ = TASKS[cfg.task.name](cfg, None, fraction)
                summary.setdefault("label_fractions", {})[f"{fraction:g}"] = summarize(cfg, scores, fraction)
                log_runs(cfg, scores, fraction, None)
        for name, result in [(f"labels {main_fraction:g}", summary), *summary.get("label_fractions", {}).items()]:
            print(f"{cfg.family} ({name}): " + ", ".join(
                f"{k}={v:.3f}" for k, v in result.items()
                if k.startswith("test/") and "_len_" not in k and isinstance(v, float)))
    write_json(predictions_path(cfg), outputs)
    write_json(root / cfg.paths.metrics / cfg.task.name / f"{cfg.family}.json", summary)


if __name__ == "__main__":
    run_stage("evaluate", main, sys.argv[1:], CheckpointError)
