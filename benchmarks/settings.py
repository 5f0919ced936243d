"""The two settings the side-by-side of train_speed compares: params.yaml, conf/ and tuned/ of a git revision (default:
the committed full run) or of the working tree, and data prepared from each by the project's own stages."""

from __future__ import annotations

import hashlib
import io
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from omegaconf import OmegaConf

from benchmarks.common import ROOT

SETTINGS_PATHS = ("params.yaml", "conf", "tuned")  # what load_config reads
DATA_KEYS = ("task", "data", "tokenize")  # what the prepare and tokenize stages read


def git(*args: str) -> str:
    """stdout of `git -C ROOT <args>`."""
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def last_run_revision() -> str:
    """The commit that last changed dvc.lock: the committed full run."""
    return git("log", "-1", "--format=%H", "--", "dvc.lock")


def describe(rev: str) -> str:
    """'<short hash> (<date>)' of a revision."""
    return git("log", "-1", "--format=%h (%cs)", rev)


def settings_of(before: str, work: Path) -> tuple[Path, str]:
    """(root, label) of the 'before' settings: a folder with params.yaml and conf/ as it is, else a git revision's."""
    if Path(before).is_dir():
        return Path(before).resolve(), f"folder `{before}`"
    return checkout_settings(before, work / "before"), f"revision {describe(before)}"


def checkout_settings(rev: str, dest: Path) -> Path:
    """params.yaml, conf/ and tuned/ of revision rev extracted under dest (git archive: no worktree left behind)."""
    paths = [p for p in SETTINGS_PATHS if p in set(git("ls-tree", "--name-only", rev).split())]
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, *paths], check=True, capture_output=True).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    fill_conf(dest / "conf")
    params = dest / "params.yaml"
    if params.is_file() and not re.search(r"^trainer:", params.read_text(encoding="utf-8"), re.MULTILINE):
        with params.open("a", encoding="utf-8") as out:  # before params.yaml had the switch, conf/ picked cpu
            out.write("trainer: cpu\n")
    return dest


def fill_conf(conf: Path) -> None:
    """conf/ of an older revision under today's: each file merged over today's (keys added since then keep today's
    defaults, which today's code reads), files added since copied; the revision's values win, but for `_target_`."""
    for new in (ROOT / "conf").rglob("*.yaml"):
        old = conf / new.relative_to(ROOT / "conf")
        if not old.is_file():
            old.parent.mkdir(parents=True, exist_ok=True)
            old.write_text(new.read_text(encoding="utf-8"), encoding="utf-8")
            continue
        text = old.read_text(encoding="utf-8")
        package = text.splitlines()[0] + "\n" if text.startswith("# @package") else ""  # Hydra reads it from line 1
        today = OmegaConf.load(new)
        merged = OmegaConf.merge(today, OmegaConf.create(text))
        if "_target_" in today:  # a class path names code, not a setting: the class as it is named today
            merged._target_ = today._target_
        old.write_text(package + OmegaConf.to_yaml(merged), encoding="utf-8")


def stage_command(stage: str, task: str, data: Path) -> list[str]:
    """`python -m attention_lab.stages.<stage> task=<task>` writing under data instead of data/."""
    return [sys.executable, "-m", f"attention_lab.stages.{stage}", f"task={task}",
            f"paths.prepared={data / 'prepared' / task}", f"paths.tokenized={data / 'tokenized' / task}"]


def prepare_data(root: Path, task: str, work: Path) -> Path:
    """<work>/<key>/{prepared,tokenized}/<task> by the prepare and tokenize stages run on the settings under root; one
    folder per distinct data and tokenizer config (key), so two settings with the same data share it."""
    from attention_lab.core.config import load_config

    cfg = load_config(task=task, root=root)
    key = hashlib.sha1(OmegaConf.to_yaml(OmegaConf.masked_copy(cfg, list(DATA_KEYS))).encode()).hexdigest()[:12]
    data = work / f"data-{key}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    if not (data / "tokenized" / task / "tokenizer.json").is_file():
        for stage in ("prepare", "tokenizer"):
            done = subprocess.run(stage_command(stage, task, data), check=False, cwd=root, env=env,
                                  capture_output=True, text=True)
            if done.returncode:
                raise RuntimeError(f"{stage}@{task} under {root}: {done.stderr.strip()[-500:]}")
    return data
