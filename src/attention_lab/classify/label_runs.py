"""Classify's runs on shares of the training labels (core.task's run hooks): for every fraction f in
train.label_fractions and every seed, a run on a stratified f of the training documents
(train.label_fraction) for max_epochs / f epochs, validated every 1 / f epochs; it lives in
checkpoints/labels<percent>/seed<k> (f < 1), its MLflow run is <family>-seed<k>-labels<percent>, and
the evaluate stage reports it under "label_fractions" ("<f>"), all but the main fraction (1, else
the largest)."""

from __future__ import annotations

from omegaconf import DictConfig

from attention_lab.core.paths import seed_dir
from attention_lab.core.task import Run


def runs(cfg: DictConfig) -> list[Run]:
    """A run per (fraction, seed), fractions in train.label_fractions' order, seeds within each."""
    fractions = list(cfg.train.get("label_fractions", [1.0]))
    main = 1.0 if 1.0 in fractions else max(fractions)
    out = []
    for fraction in fractions:
        every = max(1, round(1 / fraction))
        for seed in cfg.seeds:
            folder = None if fraction == 1 else f"labels{fraction * 100:g}"
            settings = (
                ("train.label_fraction", fraction),
                ("train.max_epochs", cfg.train.max_epochs * every),
            )
            out.append(
                Run(
                    seed,
                    seed_dir(cfg, seed, folder=folder),
                    settings=settings,
                    validate_every=every,
                    variant=None if fraction == main else f"{fraction:g}",
                )
            )
    return out


def full_run(cfg: DictConfig, seed: int) -> Run:
    """The run on every label at `seed` (what a tuning trial trains, whatever train.label_fractions
    holds)."""
    return Run(seed, seed_dir(cfg, seed), settings=(("train.label_fraction", 1.0),))


def run_marks(cfg: DictConfig) -> tuple[str, dict[str, str]]:
    """-labels<percent> after the MLflow run name of a run on a share of the labels; its share as
    tag label_fraction."""
    fraction = cfg.train.get("label_fraction", 1.0)
    tags = (
        {"label_fraction": str(cfg.train.label_fraction)} if "label_fraction" in cfg.train else {}
    )
    return (f"-labels{fraction * 100:g}" if fraction != 1 else ""), tags


def train_summary(cfg: DictConfig, datamodule) -> dict:
    """train.json's label_fraction and the training documents it kept."""
    if "label_fraction" not in cfg.train:
        return {}
    return {
        "label_fraction": cfg.train.label_fraction,
        "train_documents": len(datamodule.splits["train"]),
    }
