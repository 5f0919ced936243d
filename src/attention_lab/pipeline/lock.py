"""dvc.lock kept true without re-runs: after `attention-lab stages`, the deps dvc.yaml adds that
cannot change a stage's outputs (record_new_deps); after a result-neutral proof (neutral.py), the
stages a change stales, and their code, conf and params deps recorded without a re-run; the report
stages, which the proof does not compare, re-run for real."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from attention_lab.core.code_deps import Source
from attention_lab.core.paths import CONF_DIR
from attention_lab.core.tracking import EQUIVALENT_CODE
from attention_lab.pipeline.dvc_yaml import code
from attention_lab.pipeline.generated import write
from attention_lab.pipeline.resolved import expand

# stages the proof does not compare: they re-run for real (seconds, from the committed results)
REPORTS = "report_"


def files(root: Path) -> list[str]:
    """The checkout's files as git sees them: tracked, and untracked ones it does not ignore."""
    return subprocess.run(
        ["git", "-C", str(root), "ls-files", "-co", "--exclude-standard"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def snapshot(root: Path) -> str:
    """One digest of the checkout's files (names and contents): what the proof proves."""
    h = hashlib.sha256()
    for name in files(root):
        if (path := root / name).is_file():
            h.update(name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def rename_locked(root: Path, defined: dict[str, frozenset[str]]) -> dict[str, str]:
    """dvc.lock's entries renamed where dvc.yaml now calls a stage otherwise (`defined`: {stage: its
    outputs}): a stage missing from the lock takes the entry, missing from dvc.yaml, that wrote the
    same outputs (prepare@translate -> prepare_translate)."""
    path = root / "dvc.lock"
    lock = yaml.safe_load(path.read_text(encoding="utf-8"))
    gone = {
        frozenset(o["path"] for o in e.get("outs", [])): name
        for name, e in lock["stages"].items()
        if name not in defined and e.get("outs")
    }
    renamed = {
        gone[outs]: name
        for name, outs in defined.items()
        if name not in lock["stages"] and outs in gone
    }
    if renamed:
        lock["stages"] = {renamed.get(k, k): v for k, v in lock["stages"].items()}
        path.write_text(yaml.safe_dump(lock, sort_keys=False, width=10**6), encoding="utf-8")
    return renamed


def stale(root: Path) -> list[str]:
    """The stages but the reports whose code, conf or params deps differ from dvc.lock's, or that
    dvc.lock lacks: those DVC would re-run for the change (data deps and outputs not looked at: a
    clone has none)."""
    from dvc.repo import Repo

    tracked = set(files(root))
    with Repo(str(root)) as repo:
        return [
            stage.addressing
            for stage in repo.index.stages
            if not stage.addressing.startswith(REPORTS)
            and (
                stage.changed_stage()
                or any(
                    d.changed()
                    for d in stage.deps
                    if d.def_path in tracked or any(t.startswith(f"{d.def_path}/") for t in tracked)
                )
            )
        ]


def record(root: Path, equivalent: dict[str, str]) -> list[str]:
    """dvc.yaml rewritten from the code, and every stage's code, conf and params deps but the
    reports' re-hashed into dvc.lock by DVC (data deps and outputs keep their recorded hashes): the
    stages DVC would re-run for the change; the studies' and runs' code hashes that changed mapped
    to the ones they replace (tuned/equivalent_code.json)."""
    from dvc.repo import Repo

    write(root)
    with Repo(str(root)) as repo:
        defined = {s.addressing: frozenset(o.def_path for o in s.outs) for s in repo.index.stages}
    renamed = rename_locked(root, defined)
    tracked = set(files(root))
    saved = [f"{old} -> {new}" for old, new in renamed.items()]
    with Repo(str(root)) as repo, repo.lock:
        for stage in repo.index.stages:
            if stage.addressing.startswith(REPORTS):
                continue
            code = [
                d
                for d in stage.deps
                if d.def_path in tracked or any(t.startswith(f"{d.def_path}/") for t in tracked)
            ]
            before = {str(d): d.hash_info for d in code}
            for dep in code:
                dep.save()
            if any(before[str(d)] != d.hash_info for d in code) or stage.changed_stage():
                stage.dvcfile.dump(stage, update_pipeline=False)
                saved.append(stage.addressing)
    path = root / EQUIVALENT_CODE
    if equivalent:
        known = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
        path.write_text(
            json.dumps(dict(sorted({**known, **equivalent}.items())), indent=1) + "\n",
            encoding="utf-8",
        )
    return saved


def finish(root: Path, equivalent: dict[str, str], do_record: bool) -> int:
    """The record (with the code hashes `equivalent` maps), then the report stages' re-run where
    their code changed."""
    if not do_record:
        print("nothing recorded")
        return 0
    saved = record(root, equivalent)
    print(
        f"recorded in dvc.lock: {len(saved)} stages' code deps"
        f" ({', '.join(saved) or 'none changed'}); {len(equivalent)} code hashes mapped to the ones"
        f" they replace ({EQUIVALENT_CODE})"
    )
    stages = expand(root)  # foreach items by name: prepare_corpus_translate@monotone
    reports = sorted(s for s in stages if s.startswith(REPORTS))
    makers = missing_makers(root, stages, reports)
    print(
        "the reports, which the proof does not compare, re-run where their code changed: dvc repro"
        f" --single-item {' '.join(makers + reports)}",
        flush=True,
    )
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(
        ["dvc", "repro", "--single-item", *makers, *reports], cwd=root, env=env, check=False
    ).returncode


def missing_makers(root: Path, stages: dict, reports: list[str]) -> list[str]:
    """The stages (of resolved.expand: foreach items by name) whose outputs hold a dep the reports
    read that this checkout lacks (the prepared test items report_claims reads, a corpus's among
    them, in a clone that never ran prepare): they re-run first, as they did."""
    missing = {d for r in reports for d in stages[r].get("deps", []) if not (root / d).exists()}
    outs = {
        name: [next(iter(o)) if isinstance(o, dict) else o for o in body.get("outs", [])]
        for name, body in stages.items()
    }
    return sorted(
        {
            name
            for name, paths in outs.items()
            for d in missing
            for o in paths
            if d == o or d.startswith(o.rstrip("/") + "/")
        }
    )


def record_new_deps(root: Path) -> list[str]:
    """Give dvc.lock the deps dvc.yaml adds where the record stays true; the `<stage>: <dep>`s."""
    # a link: the hash recorded for its target (the same file); a source file the stage's command
    # cannot import: its hash now (it cannot have changed what the stage made). DVC re-runs the
    # stages of any other dep.
    from dvc.utils.serialize import modify_yaml

    lock = root / "dvc.lock"
    if not lock.is_file():
        return []
    stages, source, done = expand(root), Source(root / "src", root / CONF_DIR), []
    with modify_yaml(lock) as data:
        for name, entry in (data.get("stages") or {}).items():
            if name not in stages:
                continue
            have, cmd, added = {d["path"]: d for d in entry.get("deps", [])}, [entry["cmd"]], []
            for dep in (d for d in stages[name]["deps"] if d not in have):
                path = root / dep
                if path.is_symlink() and (target := os.path.relpath(path.resolve(), root)) in have:
                    added.append({**have[target], "path": dep})
                elif dep.startswith("src/") and dep not in code(source, root, cmd):
                    content = path.read_bytes()
                    digest = hashlib.md5(content).hexdigest()
                    added.append({"path": dep, "hash": "md5", "md5": digest, "size": len(content)})
            if added:
                entry["deps"] = sorted([*entry["deps"], *added], key=lambda d: d["path"])
                done += [f"{name}: {d['path']}" for d in added]
    return done
