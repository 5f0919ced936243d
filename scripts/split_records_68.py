"""One-off (issue 68): split the committed metrics files; re-hash evaluate outputs in dvc.lock."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from attention_lab.core.config import read_params, run_ablations
from attention_lab.core.files import read_json, write_json
from attention_lab.core.task import get_task
from attention_lab.results import records
from attention_lab.results.plots import NO_ATTENTION, no_attention

ROOT = Path.cwd()
OLD_PAGE = "none.md"  # what plots/<task>/<family>/ of a family without attention held before


def same(a, b) -> bool:
    """Equal JSON values with the same types and key order, floats bit for bit."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    nan = isinstance(a, float) and math.isnan(a) and math.isnan(b)
    return type(a) is type(b) and (a == b or nan)


def convert(task: str, item: str, where: tuple[str, ...]) -> None:
    """One family's metrics file, plots folder and results folder in the new layout."""
    metrics = ROOT.joinpath("metrics", *where, task, f"{item}.json")
    folder = ROOT.joinpath(records.RESULTS, *where, task, item)
    plots = ROOT.joinpath("plots", *where, task, item)
    old = read_json(metrics)
    if folder.exists():
        raise SystemExit(f"{folder} exists: already converted?")
    folder.mkdir(parents=True)
    info = get_task(task)
    numbers, details = records.split(old, info.variants)
    write_json(metrics, numbers)
    write_json(folder / records.DETAILS, details)
    joined = records.load(metrics, folder / records.DETAILS)
    if not same(old, joined) or not same(old, json.loads(json.dumps(joined))):
        raise SystemExit(f"{metrics}: the split does not join back to the old record")
    buckets = records_buckets(task)
    records.data_plots(folder, old, buckets, records.length_metric(next(iter(info.headline))))
    for path in sorted(plots.iterdir()):
        if path.name == OLD_PAGE:
            path.unlink()
        elif path.suffix != ".png":
            path.rename(folder / path.name)
    if not any(plots.iterdir()):
        no_attention(item, plots / NO_ATTENTION)
    print(f"{metrics.relative_to(ROOT)}: {len(numbers)} metrics kept, {len(details)} details moved")


def records_buckets(task: str) -> list:
    """The task's length buckets (conf/task/<task>.yaml)."""
    from attention_lab.core.config import load_config

    return list(load_config(root=ROOT, task=task).task.buckets)


def rehash() -> list[str]:
    """dvc.lock's outputs of every evaluate stage hashed again by DVC (deps keep their hashes)."""
    from dvc.repo import Repo

    done = []
    with Repo(str(ROOT)) as repo, repo.lock:
        for stage in repo.index.stages:
            if stage.addressing.startswith("evaluate_") and all(o.exists for o in stage.outs):
                for out in stage.outs:
                    out.save()
                stage.dvcfile.dump(stage, update_pipeline=False)
                done.append(stage.addressing)
    return done


def main() -> None:
    params = read_params(ROOT)
    for task in params["tasks"]:
        names = [*params[task].get("families", []), *params[task].get("pretrained", []),
                 *run_ablations(params, task)]
        for item in names:
            convert(task, item, ())
        for path in sorted(ROOT.joinpath("metrics", "replication", task).glob("*.json")):
            convert(task, path.stem, ("replication",))
    print("re-hashed in dvc.lock:", ", ".join(rehash()))


if __name__ == "__main__":
    sys.exit(main())
