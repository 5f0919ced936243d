"""Whether a verdict is exploratory or confirmatory, read from git: a claim's freezing commit is the
newest commit among its lines of conf/claims.yaml (`git blame`); a family's runs were recorded by
the commit that first put its train stage's outputs (their hash) in dvc.lock (`git log -S`). A
verdict is confirmatory when every run it reads was recorded in a descendant of its claim's freezing
commit, on seeds that no tuning study selected on; else exploratory, with the reason."""

from __future__ import annotations

import re
import time
from pathlib import Path

import yaml

from attention_lab.core.git import git
from attention_lab.core.paths import LOCK

CLAIMS = "conf/claims.yaml"
# the stages whose outputs are a family's runs
TRAIN_STAGES = ("train", "train_ablation", "finetune")
# and its confirmatory replication's
REPLICATION_STAGES = ("train_replication", "finetune_replication")


def frozen_at(root: Path, path: str = CLAIMS) -> dict[str, tuple[str, str] | None]:
    """{claim id: (commit, date) of the newest commit among its lines}; None for a claim with
    uncommitted lines."""
    porcelain = git(root, "blame", "--line-porcelain", "--", path).splitlines()
    lines: list[tuple[str, int, str]] = []  # (commit, committer time, text)
    commit, when = "", 0
    for line in porcelain:
        if re.fullmatch(r"[0-9a-f]{40} \d+ \d+( \d+)?", line):
            commit = line.split()[0]
        elif line.startswith("committer-time "):
            when = int(line.split()[1])
        elif line.startswith("\t"):
            lines.append((commit, when, line[1:]))
    blocks: dict[str, list[tuple[str, int]]] = {}
    claim = None
    for commit, when, text in lines:
        if m := re.match(r"\s*- id: (\S+)", text):
            claim = m.group(1)
            blocks[claim] = []
        # comments and blank lines freeze nothing
        if claim is not None and not re.match(r"\s*(#|$)", text):
            blocks[claim].append((commit, when))
    newest_first = {c: i for i, c in enumerate(git(root, "log", "--format=%H", "--", path).split())}
    out: dict[str, tuple[str, str] | None] = {}
    for claim, entries in blocks.items():
        # the newest (ties in time too)
        commit, when = min(entries, key=lambda e: newest_first.get(e[0], -1))
        uncommitted = any(set(c) == {"0"} for c, _ in entries)
        out[claim] = (
            None if uncommitted else (commit[:7], time.strftime("%Y-%m-%d", time.gmtime(when)))
        )
    return out


def recorded_at(
    root: Path, family: str, lock: dict | None = None, replicated: bool = False, path: str = LOCK
) -> tuple[str, str] | None:
    """(commit, date) that first recorded the family's train stage outputs (its replication's, where
    `replicated`) in the lock file at `path` (dvc.lock; a real-data ledger's copy of its own); None
    when not recorded."""
    stages = (lock or yaml.safe_load((root / path).read_text(encoding="utf-8")) or {}).get(
        "stages", {}
    )
    kinds = REPLICATION_STAGES if replicated else TRAIN_STAGES
    name = next(
        (
            s
            for s in stages
            if s.endswith(f"@{family}") and s.split("@")[0].rsplit("_", 1)[0] in kinds
        ),
        None,
    )
    outs = (stages.get(name) or {}).get("outs") or []
    if not outs or "md5" not in outs[0]:
        return None
    found = git(
        root, "log", "--reverse", "--format=%h %cs", f"-S{outs[0]['md5']}", "--", path
    ).split("\n")[0]
    return tuple(found.split()) if found else None


def evidence(
    root: Path,
    frozen: tuple[str, str] | None,
    runs: dict[str, tuple[str, str] | None],
    seeds: list[str],
    study_seeds: set[str],
) -> dict:
    """{kind: exploratory | confirmatory, why}: confirmatory when the claim is frozen, every
    family's runs were recorded in a descendant of its freezing commit, and no seed is one a study
    selected on."""
    if frozen is None:
        return {"kind": "exploratory", "why": "the claim is not committed yet"}
    if unrecorded := [f for f, r in runs.items() if r is None]:
        return {
            "kind": "exploratory",
            "why": "runs in no commit of dvc.lock yet (commit them, then re-run "
            f"report_claims): {', '.join(f'`{f}`' for f in unrecorded)}",
        }
    late = [
        f for f, r in runs.items() if r[0] == frozen[0] or not is_ancestor(root, frozen[0], r[0])
    ]
    if late:
        when = ", ".join(f"`{f}` {runs[f][1]}" for f in late)
        return {
            "kind": "exploratory",
            "why": f"runs recorded before the claim was frozen ({frozen[0]}, {frozen[1]}): {when}",
        }
    if chosen := sorted(set(seeds) & study_seeds):
        return {"kind": "exploratory", "why": f"seed {', '.join(chosen)} is a tuning study's"}
    return {
        "kind": "confirmatory",
        "why": f"frozen in {frozen[0]} ({frozen[1]}), every run recorded after it",
    }


def is_ancestor(root: Path, older: str, newer: str) -> bool:
    try:
        git(root, "merge-base", "--is-ancestor", older, newer)
    except ValueError:
        return False
    return True
