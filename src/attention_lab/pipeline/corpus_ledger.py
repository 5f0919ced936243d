"""`attention-lab ledger <name>`: the claims ledger on a real corpus. conf/ledgers/<name>.yaml (a
spec) names the task, the corpus's folder, the recipe, the families and ablations, and params over
the task's section; the pipeline runs in a copy of the project (data/ledgers/<name>/, resumed where
it stopped) on those files, and its verdicts, figures and compute are collected into
results/ledgers/<name>/, whose page is reports/ledgers/<name>.md (results.corpus_ledger). While it
runs, results/ledgers/<name>/progress/ follows the stages it has finished, so a commit of it resumes
the ledger on another clone (pipeline/progress.py)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from attention_lab.core.config import ConfigError, leaf_values
from attention_lab.core.files import atomic_path, write_json
from attention_lab.core.git import git
from attention_lab.core.params import ABLATION_KEYS, read_params
from attention_lab.core.paths import CONF_DIR, DATA, LEDGERS, METRICS, PREPARED, REPORTS, RESULTS
from attention_lab.pipeline import progress
from attention_lab.pipeline.scratch import copy_project, environ, init_repo

SPECS = Path(CONF_DIR) / LEDGERS
WORK = Path(DATA) / LEDGERS  # the copies (git-ignored)
RECORDS = Path(RESULTS) / LEDGERS
PAGES = Path(REPORTS) / LEDGERS
PROGRESS = "progress"  # results/ledgers/<name>/progress/: the stages the copy has finished
KEYS = {
    "title": str,
    "task": str,
    "corpus": str,
    "files": str,
    "recipe": str,
    "seeds": list,
    "families": list,
    "ablations": list,
    "params": dict,
    "published": list,
    "profile": str,
}
REQUIRED = ("title", "task", "corpus", "files", "recipe", "families", "params")


@dataclass(frozen=True)
class Spec:
    """A ledger's spec, conf/ledgers/<name>.yaml."""

    name: str
    path: Path
    title: str
    task: str
    corpus: str
    files: str
    recipe: str
    families: list[str]
    params: dict
    seeds: list[int] | None = None
    ablations: tuple[str, ...] = ()
    published: tuple[dict, ...] = ()
    profile: str | None = None


def load_spec(root: Path, name: str) -> Spec:
    """The spec conf/ledgers/<name>.yaml (or a path to one); a ConfigError names the file and key at
    fault."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else root / SPECS / f"{name}.yaml"
    if not path.is_file():
        known = sorted(p.stem for p in (root / SPECS).glob("*.yaml"))
        raise ConfigError(
            f"{path}: no such ledger spec; expected one of {', '.join(known) or 'none'} "
            f"(conf/ledgers/<name>.yaml)"
        )
    raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of {', '.join(KEYS)}")
    for key in raw:
        if key not in KEYS:
            raise ConfigError(f"{path}: unknown key {key!r}; expected one of {', '.join(KEYS)}")
    for key in REQUIRED:
        if key not in raw:
            raise ConfigError(f"{path}: {key!r} is missing")
    for key, kind in KEYS.items():
        if key in raw and not isinstance(raw[key], kind):
            raise ConfigError(
                f"{path}: {key} is {type(raw[key]).__name__}, expected a {kind.__name__}"
            )
    params = read_params(root)
    task = raw["task"]
    if task not in (params.get("tasks") or []) and task not in params:
        raise ConfigError(f"{path}: task {task!r} is not a section of params.yaml")
    section = params[task]
    known = set(section.get("families") or []) | set(section.get("pretrained") or [])
    if unknown := [f for f in raw["families"] if f not in known]:
        raise ConfigError(
            f"{path}: families {unknown} are not in params.yaml {task}.families or .pretrained"
        )
    defined = {a for key in ABLATION_KEYS for a in section.get(key) or {}}
    if unknown := [a for a in raw.get("ablations") or [] if a not in defined]:
        raise ConfigError(
            f"{path}: ablations {unknown} are not in params.yaml {task}.ablations "
            "or .corpus_ablations"
        )
    return Spec(
        name=path.stem,
        path=path,
        title=raw["title"],
        task=task,
        corpus=raw["corpus"].strip(),
        files=raw["files"],
        recipe=raw["recipe"].strip(),
        families=list(raw["families"]),
        params=raw["params"],
        seeds=raw.get("seeds"),
        ablations=tuple(raw.get("ablations") or ()),
        published=tuple(raw.get("published") or ()),
        profile=raw.get("profile"),
    )


def with_files(value, files: Path):
    """`value` (params of a spec) with "{files}" replaced by `files`, everywhere in it."""
    if isinstance(value, dict):
        return {k: with_files(v, files) for k, v in value.items()}
    if isinstance(value, list):
        return [with_files(v, files) for v in value]
    return value.replace("{files}", str(files)) if isinstance(value, str) else value


def named_files(spec: Spec, files: Path) -> list[Path]:
    """The files the spec's params name under the corpus folder (its `{files}/...` values), each
    checked to exist."""
    found = [
        v.removeprefix("{files}").lstrip("/")
        for v in leaf_values(spec.params).values()
        if isinstance(v, str) and (v == "{files}" or v.startswith("{files}/"))
    ]
    paths = [files / f for f in dict.fromkeys(found)]
    if missing := [str(p) for p in paths if not p.exists()]:
        raise FileNotFoundError(
            f"{spec.path}: the corpus's files are missing: {', '.join(missing)} (give the "
            "folder with --files)"
        )
    return paths


def checksums(paths: list[Path], files: Path) -> dict[str, str]:
    """{path under the corpus folder: sha256} of each file; a folder's is the sha256 of its files'
    `sha256sum` lines ("<sha256>  <path under it>"), sorted by path."""
    out = {}
    for path in paths:
        name = path.relative_to(files).as_posix() if path != files else "."
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file())
            lines = "".join(f"{sha256(p)}  {p.relative_to(path).as_posix()}\n" for p in inside)
            out[f"{name}/ ({len(inside)} files)"] = hashlib.sha256(lines.encode()).hexdigest()
        else:
            out[name] = sha256(path)
    return out


def sha256(path: Path) -> str:
    """The file's sha256, hex (hashlib.file_digest: read in blocks)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def edit_params(spec: Spec, files: Path):
    """The edit of the copy's params.yaml: the spec's task alone, its families and ablations, its
    params."""

    def edit(params: dict) -> None:
        params["tasks"] = [spec.task]
        for task in ("translate", "classify", "caption"):
            section = params.get(task)
            if section is None:
                continue
            pretrained = list(section.get("pretrained") or [])
            mine = spec.families if task == spec.task else []
            section["families"] = [f for f in mine if f not in pretrained]
            if "pretrained" in section:
                section["pretrained"] = [f for f in mine if f in pretrained]
            for key in ABLATION_KEYS:  # corpus_ablations: on the built-in data's corpora
                entries = section.get(key) or {}
                mine = spec.ablations if task == spec.task and key == "ablations" else ()
                section[key] = {a: entries[a] for a in mine if a in entries}
            section["replication"], section["corpora"] = {}, {}
        own = with_files(spec.params, files)
        # the corpus's data section whole: the built-in data's keys do not apply to it
        if "data" in own:
            params[spec.task]["data"] = own.pop("data")
        merge(params[spec.task], own)

    return edit


def merge(into: dict, over: dict) -> None:
    """Deep-merge `over` into `into` (mappings key by key; any other value replaces)."""
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            merge(into[key], value)
        else:
            into[key] = copy.deepcopy(value)


def origin(root: Path) -> dict:
    """The commit the copy is made from, and whether the working tree differed from it."""
    try:
        commit = git(root, "rev-parse", "--short", "HEAD").strip()
        dirty = bool(git(root, "status", "--porcelain", "--", "src", "conf", "params.yaml").strip())
    except ValueError:
        commit, dirty = None, None
    return {
        "commit": commit,
        "dirty": dirty,
        "made": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


def prepare(root: Path, spec: Spec, files: Path, work: Path, fresh: bool = False) -> Path:
    """The copy at `work` (made once: a copy that exists is resumed as it is, unless `fresh`); a
    new copy takes the stages results/ledgers/<name>/progress/ records (progress.restore)."""
    if fresh and work.exists():
        shutil.rmtree(work)
    if (work / "origin.json").is_file():
        return work
    if work.exists():  # a copy that stopped before it was complete
        shutil.rmtree(work)
    partial = work.with_name(work.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    # the copy's params name the files through it: no machine path in its lock
    link = Path("corpora") / spec.name
    copy_project(
        partial, root, profile=spec.profile, seeds=spec.seeds, edit=edit_params(spec, link)
    )
    (partial / link).parent.mkdir(parents=True, exist_ok=True)
    (partial / link).symlink_to(files.resolve(), target_is_directory=True)
    (partial / "ledger.yaml").write_text(spec.path.read_text(encoding="utf-8"), encoding="utf-8")
    init_repo(partial)
    saved = root / RECORDS / spec.name / PROGRESS
    if saved.is_dir() and not fresh:
        from attention_lab.pipeline.generated import write

        write(partial, developer=False)  # the copy's stages, as its repro writes them
        # the page reads the corpus's split sizes from the prepared data
        restored, again = progress.restore(saved, partial, (f"{PREPARED}/{spec.task}",))
        print(
            f"ledger {spec.name}: {restored} finished stages restored from "
            f"{saved.relative_to(root)}"
            + (f"; run again for what this machine lacks: {', '.join(again)}" if again else ""),
            flush=True,
        )
    if not (partial / "origin.json").is_file():  # a restored copy keeps the first one's
        write_json(partial / "origin.json", origin(root))
    partial.rename(work)
    return work


def run(work: Path, jobs: int, slots: int | None = None) -> int:
    """`attention-lab repro --allow-missing` in the copy (a restored stage whose models this machine
    lacks is not re-run), its output streamed; its exit status."""
    args = [sys.executable, "-m", "attention_lab.cli", "repro", "--jobs", str(jobs)]
    args += ["--allow-missing"]
    args += ["--slots", str(slots)] if slots else []
    env = environ(
        work, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    )
    return subprocess.run(args, cwd=work, env=env, check=False).returncode


def collect(root: Path, spec: Spec, work: Path, files: Path) -> Path:
    """results/ledgers/<name>/: the copy's claims (metrics/claims.json), dvc.lock, origin, the
    corpus's checksums and each family's figures (results.corpus_ledger.summary)."""
    from attention_lab.results import corpus_ledger

    claims_file = work / METRICS / "claims.json"
    if not claims_file.is_file():
        raise FileNotFoundError(
            f"{claims_file}: the copy's ledger was not written (its pipeline did not finish)"
        )
    corpus = {
        "files": checksums(named_files(spec, files), files),
        "origin": json.loads((work / "origin.json").read_text()),
    }
    figures = corpus_ledger.summary(work, spec)  # first: a failure writes nothing
    out = root / RECORDS / spec.name
    with atomic_path(out) as tmp:
        tmp.mkdir()
        shutil.copy(work / "dvc.lock", tmp / "dvc.lock")
        shutil.copy(claims_file, tmp / "claims.json")
        write_json(tmp / "corpus.json", corpus)
        write_json(tmp / "summary.json", figures)
    forest = work / REPORTS / "claims" / "forest.png"
    if forest.is_file():
        with atomic_path(root / PAGES / spec.name / "forest.png") as tmp:
            shutil.copy(forest, tmp)
    return out


def main(
    root: Path,
    name: str,
    files: str | None,
    jobs: int,
    slots: int | None,
    fresh: bool,
    page_only: bool,
) -> int:
    """Run (or resume) the ledger `name`, collect it and write its page; with page_only, the page
    alone."""
    from attention_lab.results import corpus_ledger

    spec = load_spec(root, name)
    folder = Path(files or spec.files)
    folder = folder if folder.is_absolute() else root / folder
    if not page_only:
        named_files(spec, folder)  # before any copy: a missing file stops here
        work = prepare(root, spec, folder, root / WORK / spec.name, fresh)
        print(f"ledger {spec.name}: the pipeline in {work} (resumed where it stopped)", flush=True)
        with progress.following(work, root / RECORDS / spec.name / PROGRESS, ("origin.json",)):
            code = run(work, jobs, slots)
        if code:
            print(
                f"ledger {spec.name}: the pipeline failed ({code}); the copy keeps what finished: "
                f"run the same command again to resume (on another clone: commit "
                f"{RECORDS / spec.name / PROGRESS} first)",
                file=sys.stderr,
            )
            return code
        collect(root, spec, work, folder)
    page = corpus_ledger.write_page(root, spec)
    print(f"ledger {spec.name}: wrote {page.relative_to(root)}")
    return 0
