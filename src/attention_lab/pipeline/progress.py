"""A pipeline's progress that git can carry to another machine: the stages dvc.lock records, saved
with the outputs git keeps (DVC's `cache: false`), and restored into a new copy of the project,
where `dvc repro --allow-missing` runs only what was not recorded (pipeline/corpus_ledger.py: a
real-data ledger resumed on another clone)."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from attention_lab.core.files import atomic_path
from attention_lab.pipeline.provenance import _name, _repo

LOCK = "dvc.lock"


def _overlaps(a: str, b: str) -> bool:
    """Whether paths a and b are one, or one holds the other."""
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _stages(lock: str) -> dict:
    """The stages of dvc.lock's text ({} for none)."""
    return (yaml.safe_load(lock) or {}).get("stages", {}) if lock else {}


def _lock(work: Path) -> str:
    """The copy's dvc.lock, "" where there is none yet."""
    path = work / LOCK
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def _graph(work: Path) -> dict[str, tuple[list[str], list[str], list[str]]]:
    """{stage: (its deps, its outputs DVC caches, its outputs git keeps)} of dvc.yaml, by path."""
    with _repo(work) as repo:
        return {
            _name(s): (
                [d.def_path for d in s.deps],
                [o.def_path for o in s.outs if o.use_cache],
                [o.def_path for o in s.outs if not o.use_cache],
            )
            for s in repo.index.stages
        }


def save(work: Path, to: Path, also: tuple[str, ...] = ()) -> int:
    """`to` written whole: the copy's dvc.lock and the outputs git keeps of each stage it records
    (read after the lock: a recorded stage's outputs are final), and the files `also` names; the
    number of stages."""
    text = _lock(work)
    stages = _stages(text)
    graph = _graph(work)
    with atomic_path(to) as tmp:
        tmp.mkdir(parents=True)
        if text:
            (tmp / LOCK).write_text(text, encoding="utf-8")
        kept = [out for stage in stages for out in graph.get(stage, ((), (), ()))[2]]
        for out in [*kept, *also]:
            source, target = work / out, tmp / out
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.is_dir():
                shutil.copytree(source, target, symlinks=True)
            elif source.is_file():
                shutil.copy2(source, target)
    return len(stages)


def prune(work: Path, needed: tuple[str, ...] = ()) -> list[str]:
    """Drop from dvc.lock each recorded stage an output of which this machine lacks (a model
    DVC caches) while a stage not recorded, or a reader outside the pipeline (`needed`: paths),
    still needs it: it runs again. The stages dropped."""
    lock = yaml.safe_load(_lock(work))
    graph, dropped = _graph(work), []
    while True:
        recorded = lock["stages"]
        lacking = {
            stage: [o for o in graph[stage][1] if not (work / o).exists()]
            for stage in recorded
            if stage in graph
        }
        unrecorded = [s for s in graph if s not in recorded]
        wanted = [*needed, *(d for s in unrecorded for d in graph[s][0])]
        drop = [
            stage
            for stage, outs in lacking.items()
            if any(_overlaps(o, w) for o in outs for w in wanted)
        ]
        if not drop:
            break
        dropped += drop
        lock["stages"] = {k: v for k, v in recorded.items() if k not in drop}
    if dropped:
        text = yaml.safe_dump(lock, sort_keys=False, width=10**6)
        (work / LOCK).write_text(text, encoding="utf-8")
    return dropped


def restore(saved: Path, work: Path, needed: tuple[str, ...] = ()) -> tuple[int, list[str]]:
    """The saved progress copied into the copy `work` (its dvc.lock and kept outputs), then
    pruned (prune: `needed`): (the stages restored, those dropped to run again)."""
    shutil.copytree(saved, work, symlinks=True, dirs_exist_ok=True)
    if not _stages(_lock(work)):
        return 0, []
    dropped = prune(work, needed)
    return len(_stages(_lock(work))), dropped


@contextmanager
def following(
    work: Path, to: Path, also: tuple[str, ...] = (), every: float = 30.0
) -> Iterator[None]:
    """While the block runs, save(work, to, also) each time the copy's dvc.lock changes (checked
    every `every` seconds), and once more at its end."""
    done = threading.Event()
    seen: list[int | None] = [None]

    def look() -> None:
        stamp = (work / LOCK).stat().st_mtime_ns if (work / LOCK).is_file() else None
        if stamp is not None and stamp != seen[0]:
            try:
                save(work, to, also)
                seen[0] = stamp
            except (yaml.YAMLError, ValueError, OSError):
                pass  # dvc.lock mid-write: the next look saves it

    def loop() -> None:
        while not done.wait(every):
            look()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        look()
