"""The report's charts (matplotlib PNGs): scores by length with bands over seeds, the expected best
validation score by trials, quality against train time (Pareto) and the validation curves of the
final runs. Drawn by the report stages only, so no training or evaluate stage depends on this
file."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt  # headless: matplotlib falls back to Agg
import numpy as np

from attention_lab.results.plots import save


def by_length(
    series: dict[str, dict[str, tuple[float, float | None]]],
    path: str | Path,
    title: str = "BLEU by source length",
    xlabel: str = "source length (words)",
    ylabel: str = "BLEU",
) -> None:
    """One line per family over the buckets, {family: {bucket label: (mean, sd over seeds or
    None)}}, with a band of mean ± sd where the sd is known (several seeds)."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    # buckets in order
    labels = list(dict.fromkeys(label for points in series.values() for label in points))
    for name, points in series.items():
        x = [labels.index(label) for label in points]
        mean = np.array([m for m, _ in points.values()], dtype=float)  # (buckets,)
        (line,) = ax.plot(x, mean, marker="o", label=name)
        sd = [s for _, s in points.values()]
        if all(s is not None for s in sd):
            sd = np.array(sd, dtype=float)
            ax.fill_between(
                x, mean - sd, mean + sd, color=line.get_color(), alpha=0.15, linewidth=0
            )
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    save(fig, path)


def expected_best(curves: dict[str, list[float]], path: str | Path, ylabel: str) -> None:
    """One line per family: the expected best validation score of n trials, n = 1..N (Dodge et al.
    2019)."""
    fig, ax = plt.subplots(figsize=(6, 3.6))
    for name, curve in curves.items():
        ax.plot(range(1, len(curve) + 1), curve, marker=".", label=name)
    ax.set_xlabel("trials")
    ax.set_ylabel(f"expected best {ylabel}")
    ax.set_title("Expected best validation score by trials (Dodge et al. 2019)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    save(fig, path)


def pareto(
    points: dict[str, tuple[float, float, float | None]],
    front: list[str],
    path: str | Path,
    xlabel: str = "train time (s)",
    ylabel: str = "BLEU",
    title: str = "",
) -> None:
    """Quality against cost, one point per family {family: (cost, mean, sd or None)}, error bars of
    ± sd, the Pareto front (no family both cheaper and better) joined and in red; log-scaled cost
    when it spans 10× (and > 0)."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, (cost, mean, sd) in points.items():
        on = name in front
        ax.errorbar(
            cost,
            mean,
            yerr=sd,
            fmt="o",
            color="crimson" if on else "tab:blue",
            capsize=3,
            markersize=7 if on else 5,
        )
        ax.annotate(name, (cost, mean), textcoords="offset points", xytext=(5, 4), fontsize=8)
    if len(front) > 1:
        ax.step(
            [points[f][0] for f in front],
            [points[f][1] for f in front],
            where="post",
            color="crimson",
            alpha=0.5,
            label="Pareto front",
        )
        ax.legend(fontsize=8)
    costs = [c for c, _, _ in points.values()]
    if costs and min(costs) > 0 and max(costs) > 10 * min(costs):
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title or f"{ylabel} against {xlabel} (red: Pareto front)", fontsize=10)
    ax.grid(alpha=0.3)
    save(fig, path)


def val_curves(curves: dict[str, dict[str, list]], path: str | Path, ylabel: str) -> None:
    """A panel per family, a line per seed of the monitored validation metric by epoch {family:
    {seed: [[epoch, value], ...]}}, an x where the run stopped (its last validation)."""
    n = max(1, len(curves))
    cols = min(3, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False)
    for ax, (family, seeds) in zip(axes.flat, curves.items()):
        for seed, curve in seeds.items():
            points = np.array(curve, dtype=float).reshape(-1, 2)  # (validations, [epoch, value])
            (line,) = ax.plot(
                points[:, 0], points[:, 1], marker=".", markersize=3, label=f"seed {seed}"
            )
            if len(points):
                ax.plot(
                    points[-1, 0], points[-1, 1], "x", color=line.get_color(), markersize=8, mew=2
                )
        ax.set_title(family, fontsize=9)
        ax.set_xlabel("epoch", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    save(fig, path)
