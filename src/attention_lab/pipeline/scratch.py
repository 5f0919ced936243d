"""A throw-away copy of the project (code, config, params; no data, models or .git) to run stages
beside a checkout."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import yaml

from attention_lab.core.params import ABLATION_KEYS
from attention_lab.core.paths import CONF_DIR, TUNED_DIR

ROOT = Path(__file__).resolve().parents[3]  # the checkout holding src/attention_lab
COPIED = (CONF_DIR, "src", "dvc.yaml", "params.yaml", "pyproject.toml", ".dvcignore", ".gitignore")
SKIPPED = shutil.ignore_patterns("__pycache__", "*.egg-info", ".trials", "*.journal.*")


def copy_project(
    dest: Path,
    root: Path = ROOT,
    profile: str | None = None,
    seeds: list[int] | None = None,
    edit: Callable[[dict], None] | None = None,
    tuned: bool = False,
) -> Path:
    """Copy `root`'s pipeline files (and tuned/ when `tuned`) into `dest`; set params.yaml's
    `profile` and `seeds` where given, in its text (its comments and layout stay), then let
    `edit(params)` change the rest in place."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in COPIED + ((TUNED_DIR,) if tuned else ()):
        src = root / name
        if src.is_dir():  # links kept: conf/model/<family>.py names its module in the copy's src/
            shutil.copytree(src, dest / name, symlinks=True, ignore=SKIPPED, dirs_exist_ok=True)
        elif src.is_file():
            shutil.copy(src, dest / name)
    path = dest / "params.yaml"
    text, unset = path.read_text(encoding="utf-8"), {}
    for key, value in (("profile", profile), ("seeds", seeds)):
        if value is not None:
            # the top-level key's one-line value, its comment kept
            line = rf"^{key}:[ \t]*(\[[^\]]*\]|[^\s#]+)"
            text, found = re.subn(line, f"{key}: {value}", text, count=1, flags=re.MULTILINE)
            if not found:  # a value over several lines (a block list): set through YAML
                unset[key] = value
    path.write_text(text, encoding="utf-8")
    if unset or edit is not None:
        params = yaml.safe_load(text)
        params.update(unset)
        if edit is not None:
            edit(params)
        path.write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return dest


def environ(dest: Path, **extra: str) -> dict[str, str]:
    """The environment of a command run in the copy `dest`: its own src/ first on the path, its own
    MLflow database."""
    path = os.pathsep.join(p for p in (str(dest / "src"), os.environ.get("PYTHONPATH", "")) if p)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "PYTHONUNBUFFERED": "1",
        "MLFLOW_TRACKING_URI": f"sqlite:///{dest / 'mlflow.db'}",
        **extra,
    }


def drop_orphans(params: dict) -> None:
    """Drop each task's ablations of a family its `families` (or `pretrained`) does not list, the
    corpora no ablation left names (in either dict: an older params.yaml, a proof's base, keeps its
    ablations on a corpus in `ablations`), and the replication's entries of what was dropped."""
    # dvc.yaml gives every entry of `<task>.ablations` (and each corpus) stages: they would run all
    # the same
    for task in params.get("tasks", []):
        section = params.get(task) or {}
        kept = {*(section.get("families") or []), *(section.get("pretrained") or [])}
        for key in ABLATION_KEYS:
            if section.get(key):
                entries = section[key].items()
                section[key] = {n: e for n, e in entries if e.get("of") in kept}
        if section.get("corpora"):
            named = {
                e.get("corpus") for k in ABLATION_KEYS for e in (section.get(k) or {}).values()
            }
            section["corpora"] = {n: e for n, e in section["corpora"].items() if n in named}
        if section.get("replication"):  # an entry of a family or ablation dropped above
            named = kept | {n for k in ABLATION_KEYS for n in section.get(k) or {}}
            section["replication"] = {
                n: seeds for n, seeds in section["replication"].items() if n in named
            }


GIT_ID = {
    "GIT_AUTHOR_NAME": "attention-lab",
    "GIT_AUTHOR_EMAIL": "attention-lab@localhost",
    "GIT_COMMITTER_NAME": "attention-lab",
    "GIT_COMMITTER_EMAIL": "attention-lab@localhost",
}


def init_repo(dest: Path) -> None:
    """Make the copy `dest` a git repository with DVC, its files committed, as a user's clone is (so
    that `dvc repro` and `dvc exp run` work in it)."""
    import subprocess
    import sys

    env = {
        **os.environ,
        **GIT_ID,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]),
    }
    for args in (
        ["git", "init", "-q"],
        ["dvc", "init", "-q"],
        ["dvc", "config", "core.analytics", "false"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "project"],
    ):
        done = subprocess.run(args, cwd=dest, env=env, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"`{' '.join(args)}` failed in {dest}: {done.stderr.strip()}")
