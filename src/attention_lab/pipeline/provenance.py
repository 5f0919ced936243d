"""The README's results provenance block, and the checks that the committed results agree with
dvc.lock."""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
import re
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import yaml

from attention_lab.core.git import git
from attention_lab.core.paths import LOCK

BEGIN = "<!-- provenance:begin"
END = "<!-- provenance:end -->"
HEADER = (
    f"{BEGIN} (written by `attention-lab readme` from git, dvc.lock and `dvc status`; "
    "tests/test_results.py checks it) -->"
)
MD5_CHARS = 12  # the dvc.lock digest the block shows: enough to tell two locks apart


def tracked(root: Path, commit: str | None = None) -> set[str]:
    """The files git tracks: in the index (commit None) or in `commit`'s tree."""
    return set(
        (
            git(root, "ls-tree", "-r", "--name-only", commit) if commit else git(root, "ls-files")
        ).splitlines()
    )


def in_files(path: str, files: set[str]) -> bool:
    """`path` is one of `files` or a folder holding some of them."""
    return (path := path.rstrip("/")) in files or any(f.startswith(path + "/") for f in files)


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def lock_source(root: Path) -> dict:
    """{md5, committed, commit, date} of dvc.lock: the commit that last changed it, or (committed
    False) HEAD."""
    last = git(root, "log", "-1", "--format=%h %cs", "--", LOCK).split()
    clean = bool(last) and not git(root, "status", "--porcelain", "--", LOCK).strip()
    commit, date = last if clean else git(root, "log", "-1", "--format=%h %cs", "HEAD").split()
    return {
        "md5": md5((root / LOCK).read_bytes()),
        "committed": clean,
        "commit": commit,
        "date": date,
    }


@contextlib.contextmanager
def _repo(root: Path) -> Iterator:
    """dvc.repo.Repo(root); a DVC error (no project, an unreadable dvc.yaml or dvc.lock) becomes a
    ValueError."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo:
            yield repo
    except DvcException as err:
        raise ValueError(f"cannot read the DVC pipeline in {root}: {err}") from err


def _name(stage_or_key) -> str:
    """A stage's name as dvc.yaml spells it, less the `path/dvc.yaml:` of DVC's `addressing` and
    `dvc status` keys."""
    return getattr(stage_or_key, "addressing", stage_or_key).rpartition(":")[2]


NEVER_RUN = "not run yet"  # a stage dvc.lock has no entry of: its `how`, with no `what`


def stale_stages(
    status: dict, kept, locked: set[str] | None = None
) -> dict[str, list[tuple[str, str | None]]]:
    """{stage: [(how, what)]} from `dvc status`: `the command`, and changed deps that git keeps
    (`kept(path)`); a stage not in `locked` (dvc.lock's stages, where given): [(NEVER_RUN,
    None)]."""
    stale = {}
    # changed outputs are the agreement check's; data/, models/ are not in git
    for stage, changes in status.items():
        if locked is not None and stage not in locked:
            stale[stage] = [(NEVER_RUN, None)]
            continue
        found = [("changed", "the command")] if "changed command" in changes else []
        for path, how in (
            dep for c in changes if isinstance(c, dict) for dep in c.get("changed deps", {}).items()
        ):
            if kept(path):  # a params file's `how` is {key: how}, written `params.yaml: <key>`
                found += (
                    [(h, f"{path}: {key}") for key, h in how.items()]
                    if isinstance(how, dict)
                    else [(how, path)]
                )
        if found:
            stale[stage] = found
    return stale


def _paths(whats: set[str], most: int = 12) -> str:
    """Up to `most` changed paths by name, or how many and in which folders; then params keys and
    the command."""
    paths = sorted(w for w in whats if ":" not in w and w != "the command")
    folders = {posixpath.dirname(p) or "." for p in paths}
    base = posixpath.commonpath(folders or ["."]) or "."
    subs = sorted(posixpath.relpath(f, base) for f in folders)
    where = base if subs == ["."] else f"{base}/{{{','.join(subs)}}}"
    named = (
        [f"`{p}`" for p in paths] if len(paths) <= most else [f"{len(paths)} paths in `{where}/`"]
    )
    return ", ".join(
        named + sorted(w if w == "the command" else f"`{w}`" for w in whats if w not in paths)
    )


def summarise(stale: dict[str, list[tuple[str, str]]], names: list[str]) -> list[str]:
    """Markdown bullets per stage kind (the name before `@`): its stale stages, and what changed in
    any, by how."""
    # kinds that changed alike share a bullet; a stage's `@` item (not a folder): `<item>`
    kinds = defaultdict(list)
    for name in dict.fromkeys([*names, *stale]):
        kinds[name.split("@", 1)[0]].append(name)
    bullets = defaultdict(list)  # what changed -> the kinds where it did
    for kind, members in kinds.items():
        if not (hit := [name for name in members if name in stale]):
            continue
        items = [name.partition("@")[2] for name in hit]
        label = (
            ", ".join(f"`{name}`" for name in hit)
            if "@" not in members[0] or len(members) == 1
            else f"`{kind}@*` (all {len(members)})"
            if len(hit) == len(members)
            else f"`{kind}@{{{','.join(items)}}}` ({len(hit)} of {len(members)})"
        )
        changed = defaultdict(set)
        for name, item in zip(hit, items, strict=True):
            for how, what in stale[name]:
                whats = changed[how]  # NEVER_RUN: no what
                if what is not None:
                    whats.add(
                        re.sub(rf"(?<![\w-]){re.escape(item)}(?![\w/-])", "<item>", what)
                        if item
                        else what
                    )
        bullets[
            "; ".join(f"{how} {_paths(changed[how])}".rstrip() for how in sorted(changed))
        ].append(label)
    return [f"- {', '.join(labels)}: {what}" for what, labels in bullets.items()]


def freshness(root: Path) -> dict:
    """{source: lock_source, names: every stage, stale: stale_stages}; deps git keeps, or kept in
    dvc.lock's commit."""
    source = lock_source(root)
    files = tracked(root) | (tracked(root, source["commit"]) if source["committed"] else set())
    with _repo(root) as repo:
        names, status = (
            [_name(s) for s in repo.index.stages],
            {_name(k): c for k, c in repo.status().items()},
        )
    locked = set(
        (yaml.safe_load((root / LOCK).read_text(encoding="utf-8")) or {}).get("stages") or {}
    )
    return {
        "source": source,
        "names": names,
        "stale": stale_stages(status, lambda path: in_files(path, files), locked),
    }


def readme_block(fresh: dict, today: str | None = None) -> str:
    """The provenance block, markers included, from `freshness(root)`; `today` dates its `dvc
    status` (default: UTC)."""
    source, names, stale = fresh["source"], fresh["names"], fresh["stale"]
    lock, commit, date = (
        f"`dvc.lock` (md5 `{source['md5'][:MD5_CHARS]}`)",
        source["commit"],
        source["date"],
    )
    origin = "Results: the runs recorded in " + (
        f"{lock}, last changed in commit `{commit}` ({date})."
        if source["committed"]
        else f"this working tree's {lock}, not yet committed (on top of commit "
        f"`{commit}`, {date}); once it is, `attention-lab readme` names its commit here."
    )
    if not stale:
        return "\n".join(
            [
                HEADER,
                (
                    f"{origin} `dvc status` lists no changed dependency kept in git: the results"
                    " are fresh (the committed code, conf and params produce them)."
                ),
                END,
            ]
        )
    new = sum(changes == [(NEVER_RUN, None)] for changes in stale.values())
    today = today or datetime.now(UTC).date().isoformat()
    return "\n".join(
        [
            HEADER,
            origin,
            "",
            (
                "**These results may be stale.** `dvc status`"
                f" ({today}) lists dependencies changed since"
                f" that run for {len(stale) - new} of {len(names)} stages"
                + (
                    f", and {new} {'stage has' if new == 1 else 'stages have'} not run yet"
                    if new
                    else ""
                )
                + "; the committed figures, reports and tuned values stay until the next full `dvc"
                " repro`. By stage kind (`<item>`: the stage's `@` item):"
            ),
            "",
            *summarise(stale, names),
            END,
        ]
    )


def _span(readme: str) -> tuple[int, int]:
    """Where the README's provenance block and its END marker begin; ValueError without the
    markers."""
    if (begin := readme.find(BEGIN)) < 0 or (end := readme.find(END)) < begin:
        raise ValueError(f"README.md has no {BEGIN} ... --> / {END} markers")
    return begin, end


def splice_block(readme: str, block: str) -> str:
    """README text with its provenance block replaced by `block`."""
    begin, end = _span(readme)
    return readme[:begin] + block + readme[end + len(END) :]


def parse_block(readme: str) -> dict:
    """The README's provenance block as {md5, committed, commit, date, fresh, kinds}; ValueError
    unless well formed."""
    block = readme[slice(*_span(readme))]
    lock = r"\(md5 `([0-9a-f]+)`\), "
    committed = re.search(
        lock + r"last changed in commit `([0-9a-f]{7,40})` \((\d{4}-\d\d-\d\d)\)", block
    )
    pending = re.search(
        lock + r"not yet committed \(on top of commit `([0-9a-f]{7,40})`, (\d{4}-\d\d-\d\d)\)",
        block,
    )
    if not (found := committed or pending):
        raise ValueError(
            "README.md's provenance block names no dvc.lock md5 and commit (run `attention-lab"
            " readme`)"
        )
    fresh, kinds = (
        "the results are fresh" in block,
        re.findall(r"^- `([\w-]+)[@`]", block, re.MULTILINE),
    )
    if fresh == bool(kinds) or fresh == ("may be stale" in block):
        raise ValueError(
            "README.md's provenance block says neither that the results are fresh nor which stages "
            "changed since (run `attention-lab readme`)"
        )
    return {
        "md5": found[1],
        "committed": bool(committed),
        "commit": found[2],
        "date": found[3],
        "fresh": fresh,
        "kinds": kinds,
    }


def lock_disagreements(root: Path) -> tuple[list[str], list[str]]:
    """(outputs checked, problems): git's `cache: false` outputs, and what stages read of them,
    match dvc.lock."""
    files = tracked(root)
    with _repo(root) as repo:  # DVC hashes both sides (`get_hash`: what `dvc status` compares)
        stages = list(repo.index.stages)
        outs = {
            out.def_path: (stage, out)
            for stage in stages
            for out in stage.outs
            if not out.use_cache and in_files(out.def_path, files)
        }
        problems = []
        for path, (stage, out) in sorted(outs.items()):
            if not out.exists:
                problems.append(f"{path}: committed in git but missing here")
            elif not out.hash_info:
                problems.append(f"{path}: dvc.lock has no hash for it ({_name(stage)} never ran)")
            elif (now := out.get_hash()) != out.hash_info:
                problems.append(
                    f"{path}: dvc.lock ({_name(stage)}) records {out.hash_info.value}, the "
                    f"committed one is {now.value} (edited by hand, or not from the recorded run)"
                )
        for stage in stages:
            # a committed output (or a folder of them, or a file in one) that the stage read
            for dep in stage.deps:
                path = getattr(dep, "def_path", "")
                if (
                    (in_files(path, outs) or any(path.startswith(p + "/") for p in outs))
                    and dep.hash_info
                    and in_files(path, files)
                    and dep.exists
                    and (now := dep.get_hash()) != dep.hash_info
                ):
                    problems.append(
                        f"{_name(stage)}: dvc.lock says it read {path} at {dep.hash_info.value},"
                        f" the committed one is {now.value} (re-run {_name(stage)}, or `dvc repro`"
                        " the stages downstream of what was re-run)"
                    )
    return sorted(outs), problems


def block_disagreements(root: Path, readme: str, names: list[str] | None = None) -> list[str]:
    """The README block's problems: missing, malformed, another dvc.lock or commit, stage kinds not
    in `names`."""
    try:
        block = parse_block(readme)
    except ValueError as err:
        return [str(err)]
    problems, digest, commit = [], md5((root / LOCK).read_bytes()), block["commit"]
    if not digest.startswith(block["md5"]) or len(block["md5"]) < MD5_CHARS:
        problems.append(
            f"README.md's provenance block names dvc.lock md5 {block['md5']}, dvc.lock is {digest} "
            "(run `attention-lab readme`)"
        )
    then = subprocess.run(
        ["git", "show", f"{commit}:{LOCK}"], cwd=root, capture_output=True, check=False
    )
    # a shallow clone may lack the commit: the md5 above checks then
    if block["committed"] and not then.returncode:
        if md5(then.stdout) != digest:
            problems.append(
                f"README.md's provenance block names commit {commit}, whose dvc.lock is not this"
                " one (run `attention-lab readme`)"
            )
        elif (date := git(root, "log", "-1", "--format=%cs", commit).strip()) != block["date"]:
            problems.append(
                f"README.md's provenance block dates commit {commit} {block['date']}; git says"
                f" {date}"
            )
    if names is None:
        with _repo(root) as repo:
            names = [_name(stage) for stage in repo.index.stages]
    if unknown := sorted(set(block["kinds"]) - {name.split("@", 1)[0] for name in names}):
        problems.append(
            f"README.md's provenance block lists stage kinds dvc.yaml does not have: {unknown}"
        )
    return problems


def check_results(root: Path, readme: str, regenerated: str, fresh: dict) -> tuple[bool, list[str]]:
    """`make check-results`: (passed, lines); fails while stale, disagreeing, off protocol or
    README.md outdated."""
    # omegaconf: only when needed
    from attention_lab.results.protocol import MIN_TRIALS, protocol_problems

    source, names, stale = fresh["source"], fresh["names"], fresh["stale"]
    recorded = (
        f"commit {source['commit']}"
        if source["committed"]
        else "the working tree (not committed yet)"
    )
    lines = (
        [
            (
                "STALE: `dvc status` lists dependencies kept in git that changed since dvc.lock"
                f" was recorded ({recorded}) for {len(stale)} of {len(names)} stages; run `dvc"
                " repro` (or `make pipeline`), then `attention-lab readme`:"
            ),
            *summarise(stale, names),
        ]
        if stale
        else [f"fresh: no dependency kept in git changed since dvc.lock was recorded ({recorded})"]
    )
    checked, problems = lock_disagreements(root)
    problems += block_disagreements(root, readme, names)
    lines += (
        [
            (
                f"DISAGREE: {len(problems)} problem(s) between the committed results, README.md and"
                " dvc.lock:"
            ),
            *(f"- {p}" for p in problems),
        ]
        if problems
        else [
            (
                f"agree: the {len(checked)} committed outputs have the hashes dvc.lock records, and"
                " the stages that read them read these; README.md's provenance block names this"
                " dvc.lock"
            )
        ]
    )
    if gaps := protocol_problems(root):
        lines += [
            (
                f"PROTOCOL: {len(gaps)} place(s) where the results break the comparison's protocol"
                f" (three seeds, every final run to early stopping, >= {MIN_TRIALS} trials a"
                " study):"
            ),
            *(f"- {g}" for g in gaps),
        ]
    if not (current := readme == regenerated):
        lines.append(
            "OUTDATED: README.md is not what `attention-lab readme` writes now (tables or"
            " provenance block): run it"
        )
    if not source["committed"]:
        lines.append(
            "note: dvc.lock has changes not committed yet; commit them with the results, then run"
            " `attention-lab readme` again (and commit README.md) so that the README names the"
            " commit"
        )
    passed = not stale and not problems and not gaps and current
    return passed, [*lines, "check-results: " + ("passed" if passed else "FAILED")]
