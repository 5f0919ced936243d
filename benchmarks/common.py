"""What the benchmarks share: the machine, timing, the model folders found, markdown tables, the
command a report quotes, the marked sections of reports/benchmarks.md, and the settings of a git
revision with data prepared from them (speed.py's section 6)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ORT_LEVELS = {
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}
# commits in a copy of the project
GIT_ID = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


@dataclass
class Family:
    """One exported family under --models: its task, onnx folder and (when trained here) seed-0
    checkpoint."""

    name: str
    task: str
    onnx: Path
    ckpt: Path | None


def find_families(models: Path) -> list[Family]:
    """Every <family>/onnx folder under models, in params.yaml's family order (others after, by
    name)."""
    from attention_lab.core.params import families, read_params
    from attention_lab.core.task import NAMES as TASKS

    params = read_params(ROOT)
    order = [f for task in TASKS if task in params for f in families(params, task)]
    found = []
    for meta in sorted(models.glob("*/onnx/meta.json")):
        folder = meta.parent.parent
        ckpt = folder / "checkpoints" / "seed0" / "best.ckpt"
        task = json.loads(meta.read_text(encoding="utf-8")).get("task", "translate")
        found.append(Family(folder.name, task, meta.parent, ckpt if ckpt.is_file() else None))
    return sorted(
        found, key=lambda f: (order.index(f.name) if f.name in order else len(order), f.name)
    )


def machine() -> dict:
    """CPU, cores, library versions and the thread settings the run started with."""
    import onnxruntime
    import torch

    from attention_lab.core.machine import cpu_model

    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "onnxruntime": onnxruntime.__version__,
        "torch_threads": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset"),
    }


def clock(fn: Callable, *args, **kwargs) -> tuple[float, object]:
    """(seconds, result) of one call fn(*args, **kwargs)."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t0, out


def median(values) -> float:
    return float(statistics.median(values))


def geomean(values) -> float:
    values = list(values)
    return float(statistics.geometric_mean(values)) if values else float("nan")


def num(x, digits: int = 1) -> str:
    """A number for a table cell; '—' for None."""
    if x is None:
        return "—"
    if isinstance(x, str):
        return x
    return f"{x:,.{digits}f}"


def spread(values) -> str:
    """'min–max' of a list of numbers, 2 decimals."""
    return f"{min(values):,.2f}–{max(values):,.2f}"


def table(header: list[str], rows: list[list]) -> list[str]:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


@contextlib.contextmanager
def torch_threads(n: int):
    """torch intra-op threads set to n inside the block, restored after."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# How a report quotes its command: runnable in any clone, from its root

RENAMED = {"work": "scratch", "out": "output"}  # option -> its placeholder's word, where clearer


def shown_path(path: Path | str, option: str = "") -> str:
    """path as a report shows it: relative to the repository's root when inside it (a relative path
    is the working directory's), else a placeholder named after its option: `--models` -> `<models
    folder>`, `--work` -> `<scratch folder>`, `--out x.md` -> `<output file>` (no option: `<folder>`
    or `<file>`)."""
    path = Path(path).expanduser()
    for where in (Path(os.path.abspath(path)), path.resolve()):
        if where.is_relative_to(ROOT):
            return where.relative_to(ROOT).as_posix() or "."
    name = option.lstrip("-")
    words = [RENAMED.get(name, name.replace("-", " ").replace("_", " "))] if name else []
    is_file = path.is_file() if path.exists() else bool(path.suffix)
    if not words or words[0].split()[-1] not in ("dir", "folder", "file", "path"):
        words.append("file" if is_file else "folder")
    return f"<{' '.join(words)}>"


def command(script: Path | str, argv: list[str] | None = None) -> str:
    """`python <script> <argv>` (argv: default sys.argv[1:]) as a report quotes it, for a user to
    run in their clone from its root: an option's value that is a path (absolute, or found from a
    working directory other than the root) shown by shown_path, every other word quoted for the
    shell."""
    argv = sys.argv[1:] if argv is None else argv
    words, option = [], ""
    for arg in argv:
        name, eq, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        if arg.startswith("-") and not eq:
            words.append(shlex.quote(arg))
            option = arg
            continue
        option = name or option
        elsewhere = Path.cwd() != ROOT and Path(value).exists()  # typed from another folder
        is_path = os.path.isabs(value) or bool(option and elsewhere)
        shown = shown_path(value, option) if is_path else shlex.quote(value)
        words.append(f"{name}={shown}" if eq else shown)
        option = ""
    return " ".join(["python", shown_path(script), *words])


# a section another script writes and keeps
MARKED = re.compile(r"<!-- ([\w-]+):start -->.*?<!-- \1:end -->", re.DOTALL)


def write_marked_section(md: Path, name: str, lines: list[str], figures: dict) -> None:
    """Replace (or append) section `name` of md, between its markers, and its key in md's .json
    twin."""
    text = md.read_text(encoding="utf-8") if md.is_file() else "# Speed benchmarks\n"
    block = "\n".join([f"<!-- {name}:start -->", *lines, f"<!-- {name}:end -->"])
    pattern = re.compile(rf"<!-- {name}:start -->.*?<!-- {name}:end -->", re.DOTALL)
    text = (
        pattern.sub(lambda _: block, text)
        if pattern.search(text)
        else text.rstrip() + "\n\n" + block + "\n"
    )
    md.write_text(text, encoding="utf-8")
    js = md.with_suffix(".json")
    summary = json.loads(js.read_text(encoding="utf-8")) if js.is_file() else {}
    summary[name] = figures
    js.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


def keep_marked_sections(md: Path, text: str, summary: dict) -> tuple[str, dict]:
    """(text, summary) of a rewrite of md with the marked sections of the old md (and their .json
    keys) kept."""
    old = md.read_text(encoding="utf-8") if md.is_file() else ""
    js = md.with_suffix(".json")
    old_json = json.loads(js.read_text(encoding="utf-8")) if js.is_file() else {}
    for m in MARKED.finditer(old):
        text = text.rstrip() + "\n\n" + m.group(0) + "\n"
        if m.group(1) in old_json:
            summary = {**summary, m.group(1): old_json[m.group(1)]}
    return text, summary


# The settings of a git revision (default: the committed full run) or of a folder, and data prepared
# from them

SETTINGS_PATHS = ("params.yaml", "conf", "tuned")  # what load_config reads
DATA_KEYS = ("task", "data", "tokenize")  # what the prepare and tokenize stages read


def git(*args: str) -> str:
    """stdout of `git -C ROOT <args>`."""
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


def last_run_revision() -> str:
    """The commit that last changed dvc.lock: the committed full run."""
    return git("log", "-1", "--format=%H", "--", "dvc.lock")


def describe(rev: str) -> str:
    """'<short hash> (<date>)' of a revision."""
    return git("log", "-1", "--format=%h (%cs)", rev)


def settings_of(before: str, work: Path) -> tuple[Path, str]:
    """(root, label) of the 'before' settings: a folder with params.yaml and conf/ as it is, else a
    git revision's."""
    if Path(before).is_dir():
        return Path(before).resolve(), f"folder `{shown_path(before, '--before')}`"
    return checkout_settings(before, work / "before"), f"revision {describe(before)}"


def checkout_settings(rev: str, dest: Path) -> Path:
    """params.yaml, conf/ and tuned/ of revision rev extracted under dest (git archive: no worktree
    left behind)."""
    paths = [p for p in SETTINGS_PATHS if p in set(git("ls-tree", "--name-only", rev).split())]
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, *paths], check=True, capture_output=True
    ).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    fill_conf(dest / "conf")
    params = dest / "params.yaml"
    if params.is_file() and not re.search(
        r"^trainer:", params.read_text(encoding="utf-8"), re.MULTILINE
    ):
        # before params.yaml had the switch, conf/ picked cpu
        with params.open("a", encoding="utf-8") as out:
            out.write("trainer: cpu\n")
    return dest


def fill_conf(conf: Path) -> None:
    """conf/ of an older revision under today's: each file merged over today's (keys added since
    then keep today's defaults, which today's code reads), files added since copied; the revision's
    values win, but for `_target_`."""
    from omegaconf import OmegaConf

    for new in (ROOT / "conf").rglob("*.yaml"):
        old = conf / new.relative_to(ROOT / "conf")
        if not old.is_file():
            old.parent.mkdir(parents=True, exist_ok=True)
            old.write_text(new.read_text(encoding="utf-8"), encoding="utf-8")
            continue
        text = old.read_text(encoding="utf-8")
        # Hydra reads it from line 1
        package = text.splitlines()[0] + "\n" if text.startswith("# @package") else ""
        today = OmegaConf.load(new)
        merged = OmegaConf.merge(today, OmegaConf.create(text))
        # a class path names code, not a setting: the class as it is named today
        if "_target_" in today:
            merged._target_ = today._target_
        old.write_text(package + OmegaConf.to_yaml(merged), encoding="utf-8")


def stage_command(stage: str, task: str, data: Path) -> list[str]:
    """`python -m attention_lab.stages.<stage> task=<task>` writing under data instead of data/."""
    return [
        sys.executable,
        "-m",
        f"attention_lab.stages.{stage}",
        f"task={task}",
        f"paths.prepared={data / 'prepared' / task}",
        f"paths.tokenized={data / 'tokenized' / task}",
    ]


def prepare_data(root: Path, task: str, work: Path) -> Path:
    """<work>/<key>/{prepared,tokenized}/<task> by the prepare and tokenize stages run on the
    settings under root; one folder per distinct data and tokenizer config (key), so two settings
    with the same data share it."""
    from omegaconf import OmegaConf

    from attention_lab.core.config import load_config

    cfg = load_config(task=task, root=root)
    key = hashlib.sha1(
        OmegaConf.to_yaml(OmegaConf.masked_copy(cfg, list(DATA_KEYS))).encode()
    ).hexdigest()[:12]
    return prepared(task, work / f"data-{key}", root)


def prepared(task: str, data: Path, root: Path = ROOT) -> Path:
    """data/{prepared,tokenized}/<task> by the project's prepare and tokenize stages on root's
    settings, when missing."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
    }
    if not (data / "tokenized" / task / "tokenizer.json").is_file():
        for stage in ("prepare", "tokenizer"):
            done = subprocess.run(
                stage_command(stage, task, data),
                check=False,
                cwd=root,
                env=env,
                capture_output=True,
                text=True,
            )
            if done.returncode:
                raise RuntimeError(f"{stage}@{task} under {root}: {done.stderr.strip()[-500:]}")
    return data
