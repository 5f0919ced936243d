"""Where the committed results come from, and whether they still agree with each other and with dvc.lock.

Two different questions, kept apart so that a code change never has to wait for a ~3-hour pipeline run:

- **agreement** (CI, tests/test_results.py): every `cache: false` output that is committed in git (metrics, reports,
  tuned values) has the hash dvc.lock records for it; every stage's recorded hash of a committed output it reads (a
  report's metrics, a training run's tuned values) is that output's current hash; and the README's provenance block
  names this dvc.lock. Hand edits and half-committed re-runs fail it; code changes do not.
- **freshness** (`make check-results`, i.e. `attention-lab readme --check`): no dependency kept in git changed since
  dvc.lock was written (`dvc status`), and README.md is exactly what `attention-lab readme` writes now.

`readme_block` renders the README's provenance block (which commit recorded dvc.lock, and what `dvc status` says
changed since); `attention-lab readme` splices it between `<!-- provenance:begin ... -->` and `<!-- provenance:end -->`.
"""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
import re
import subprocess
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

LOCK = "dvc.lock"
BEGIN = "<!-- provenance:begin"
END = "<!-- provenance:end -->"
HEADER = (f"{BEGIN} (written by `attention-lab readme` from git, dvc.lock and `dvc status`; "
          "tests/test_results.py checks it) -->")
COUNT = "\0"    # where summarise puts a file count (or range) into a line
MD5_CHARS = 12  # the dvc.lock digest the block shows: enough to tell two locks apart


# -- git ----------------------------------------------------------------------------------------------------------

def git(root: Path, *args: str) -> str:
    """stdout of `git <args>` in root; ValueError (with git's message) when it fails, e.g. outside a git checkout."""
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    if done.returncode:
        raise ValueError(f"`git {' '.join(args)}` failed in {root}: {done.stderr.strip()} "
                         "(results provenance needs the project's git checkout)")
    return done.stdout


def tracked(root: Path, commit: str | None = None) -> set[str]:
    """The files git tracks: in the index (commit None) or in `commit`'s tree."""
    out = git(root, "ls-tree", "-r", "--name-only", commit) if commit else git(root, "ls-files")
    return set(out.splitlines())


def in_files(path: str, files: set[str]) -> bool:
    """`path` is one of `files` or a folder holding some of them."""
    path = path.rstrip("/")
    return path in files or any(f.startswith(path + "/") for f in files)


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def lock_source(root: Path) -> dict:
    """Which commit recorded the working tree's dvc.lock: {md5, committed, commit, date}.

    committed: dvc.lock is as the last commit that changed it left it (`git log -1 -- dvc.lock`), which is `commit`;
    otherwise dvc.lock has changes not committed yet and `commit` is HEAD, the commit they sit on.
    """
    digest = md5((root / LOCK).read_bytes())
    last = git(root, "log", "-1", "--format=%h %cs", "--", LOCK).split()
    clean = bool(last) and not git(root, "status", "--porcelain", "--", LOCK).strip()
    commit, date = last if clean else git(root, "log", "-1", "--format=%h %cs", "HEAD").split()
    return {"md5": digest, "committed": clean, "commit": commit, "date": date}


# -- DVC --------------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _repo(root: Path) -> Iterator:
    """dvc.repo.Repo(root); a DVC error (no project, an unreadable dvc.yaml or dvc.lock) becomes a ValueError that
    names the folder."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    try:
        with Repo(str(root)) as repo:
            yield repo
    except DvcException as err:
        raise ValueError(f"cannot read the DVC pipeline in {root}: {err}") from err


def _name(stage_or_key) -> str:
    """A stage's name as dvc.yaml at the root spells it (`train_translate@bahdanau`); DVC's `addressing` (and the keys
    of `dvc status`) prefix it with the path of dvc.yaml when the working directory is elsewhere."""
    name = getattr(stage_or_key, "addressing", stage_or_key)
    return name.rpartition(":")[2]


def stage_names(repo) -> list[str]:
    """Every stage of dvc.yaml (foreach expanded), in dvc.yaml's order."""
    return [_name(stage) for stage in repo.index.stages]


def stale_stages(status: dict, kept) -> dict[str, list[tuple[str, str]]]:
    """{stage: [(how, what), ...]} from `dvc status` output, keeping only what git keeps (`kept(path)`).

    what: a dep's path, `params.yaml: <key>` for a parameter, or `the command`. Deps that are pipeline outputs not in
    git (data/, models/, plots/, predictions/) are missing in a fresh clone and say nothing about the code: skipped,
    as are changed outputs (the agreement check covers those that git keeps).
    """
    stale = {}
    for stage, changes in status.items():
        found = []
        for change in changes:
            if change == "changed command":
                found.append(("changed", "the command"))
            if not isinstance(change, dict):
                continue
            for path, how in change.get("changed deps", {}).items():
                if not kept(path):
                    continue
                if isinstance(how, dict):  # a params file: {key: how}
                    found += [(h, f"{path}: {key}") for key, h in how.items()]
                else:
                    found.append((how, path))
        if found:
            stale[stage] = found
    return stale


def stage_tasks(stages) -> dict[str, str]:
    """{stage: the task its command names (`task=NAME`)}, for the stages whose command names one."""
    cmds = {_name(stage): stage.cmd if isinstance(stage.cmd, str) else " ".join(stage.cmd or []) for stage in stages}
    found = {name: re.search(r"\btask=([\w-]+)", cmd) for name, cmd in cmds.items()}
    return {name: m[1] for name, m in found.items() if m}


def _template(stage: str, what: str, task: str | None = None) -> str:
    """`what` with the stage's foreach item written `<item>` (conf/model/bahdanau.yaml -> conf/model/<item>.yaml), and
    a path ending in the stage's task written with `<task>` (src/attention_lab/caption -> src/attention_lab/<task>), so
    that the stages of a kind, and kinds that differ only by task, read alike."""
    item = stage.partition("@")[2]
    if task and (what == task or what.endswith(f"/{task}")):
        return what[: -len(task)] + "<task>"
    if not item or item == task:
        return what
    return re.sub(rf"(?<![\w-]){re.escape(item)}(?![\w-])", "<item>", what)


def _folders(folders: list[str]) -> str:
    """`a/`, `a/{b,c}/` for the folders a, a/b, a/c (each folder on its own when they share no parent)."""
    base = posixpath.commonpath(folders)
    if base in ("", "."):
        return ", ".join(f"`{f}/`" for f in folders)
    subs = sorted(posixpath.relpath(f, base) for f in folders if f != base)
    parts = [f"`{base}/`"] if base in folders else []
    if subs:
        parts.append(f"`{base}/{subs[0]}/`" if len(subs) == 1 else f"`{base}/{{{','.join(subs)}}}/`")
    return ", ".join(parts)


def _compact(whats: set[str], most: int = 12) -> tuple[str, list[int]]:
    """(text, counts): up to `most` paths grouped by folder (`a/{x,y}.py`); more than that: `COUNT paths in` their
    folders, the count left out of the text (in `counts`) so that stage kinds with the same folders share a line."""
    loose = sorted(w if w == "the command" else f"`{w}`" for w in whats if ":" in w or w == "the command")
    paths = sorted(PurePosixPath(w) for w in whats if ":" not in w and w != "the command")
    if len(paths) > most:
        return ", ".join([f"{COUNT} paths in " + _folders(sorted({str(p.parent) for p in paths})), *loose]), [len(paths)]
    folders = defaultdict(list)
    for path in paths:
        folders[str(path.parent)].append(path)
    parts = []
    for folder, group in folders.items():
        prefix = "" if folder == "." else f"{folder}/"
        if len(group) == 1:
            parts.append(f"`{prefix}{group[0].name}`")
        elif len({p.suffix for p in group}) == 1:
            parts.append(f"`{prefix}{{{','.join(p.stem for p in group)}}}{group[0].suffix}`")
        else:
            parts.append(f"`{prefix}{{{','.join(p.name for p in group)}}}`")
    return ", ".join(parts + loose), []


def summarise(stale: dict[str, list[tuple[str, str]]], names: list[str], tasks: dict[str, str] | None = None
              ) -> list[str]:
    """Markdown bullets: per stage kind (the name before `@`), which of its stages are stale and what changed in any
    of them, by how (`deleted`, `modified`, ...); kinds whose changes differ only in how many paths share a line (the
    count then a range). tasks: {stage: its task} (`stage_tasks`), for `<task>` in paths."""
    tasks = tasks or {}
    kinds = defaultdict(list)
    for name in dict.fromkeys([*names, *stale]):
        kinds[name.split("@", 1)[0]].append(name)
    bullets = {}  # description, COUNT where a count goes -> [(label, counts)]
    for kind, members in kinds.items():
        hit = [name for name in members if name in stale]
        if not hit:
            continue
        if "@" not in members[0] or len(members) == 1:
            label = ", ".join(f"`{name}`" for name in hit)
        elif len(hit) == len(members):
            label = f"`{kind}@*` (all {len(members)})"
        else:
            label = f"`{kind}@{{{','.join(n.split('@', 1)[1] for n in hit)}}}` ({len(hit)} of {len(members)})"
        changed = defaultdict(set)
        for name in hit:
            for how, what in stale[name]:
                changed[how].add(_template(name, what, tasks.get(name)))
        texts, counts = [], []
        for how in sorted(changed):
            text, n = _compact(changed[how])
            texts.append(f"{how} {text}")
            counts += n
        bullets.setdefault("; ".join(texts), []).append((label, counts))
    lines = []
    for description, kinds_here in bullets.items():
        ranges = [(min(c), max(c)) for c in zip(*(counts for _, counts in kinds_here), strict=True)]
        counts = [str(low) if low == high else f"{low}–{high}" for low, high in ranges]
        for count in counts:
            description = description.replace(COUNT, count, 1)
        lines.append(f"- {', '.join(label for label, _ in kinds_here)}: {description}")
    return lines


# -- the README block -------------------------------------------------------------------------------------------------

def freshness(root: Path) -> dict:
    """What the block and `make check-results` report: {source: lock_source, names: every stage, tasks: stage_tasks,
    stale: stale_stages}.

    Stale deps count when git keeps them now or kept them in the commit that recorded dvc.lock (a deleted file).
    """
    source = lock_source(root)
    files = tracked(root) | (tracked(root, source["commit"]) if source["committed"] else set())
    with _repo(root) as repo:
        names, tasks = stage_names(repo), stage_tasks(repo.index.stages)
        status = {_name(key): changes for key, changes in repo.status().items()}
    return {"source": source, "names": names, "tasks": tasks,
            "stale": stale_stages(status, lambda path: in_files(path, files))}


def readme_block(fresh: dict, today: str | None = None) -> str:
    """The provenance block, markers included, from `freshness(root)`: dvc.lock's commit, then what `dvc status` says
    changed since (`today` dates that `dvc status`; default: today, UTC)."""
    source, names, stale = fresh["source"], fresh["names"], fresh["stale"]
    digest = source["md5"][:MD5_CHARS]
    if source["committed"]:
        origin = (f"Results: the runs recorded in `dvc.lock` (md5 `{digest}`), last changed in commit "
                  f"`{source['commit']}` ({source['date']}).")
    else:
        origin = (f"Results: the runs recorded in this working tree's `dvc.lock` (md5 `{digest}`), not yet committed "
                  f"(on top of commit `{source['commit']}`, {source['date']}); once it is, `attention-lab readme` "
                  "names its commit here.")
    if not stale:
        state = [(f"{origin} `dvc status` lists no changed dependency kept in git: the results are fresh (the "
                  "committed code, conf and params produce them).")]
    else:
        today = today or datetime.now(UTC).date().isoformat()
        state = [origin,
                 "",
                 (f"**These results may be stale.** `dvc status` ({today}) lists dependencies changed since that run "
                  f"for {len(stale)} of {len(names)} stages, so the committed figures, reports and tuned values may "
                  "not be what the current code produces; they stay until the next full `dvc repro` (then "
                  "`attention-lab readme` and `make check-results`). By stage kind (`<item>`: the stage's family, `<task>`: "
                  "its task):"),
                 "",
                 *summarise(stale, names, fresh.get("tasks"))]
    return "\n".join([HEADER, *state, END])


def splice_block(readme: str, block: str) -> str:
    """README text with its provenance block replaced by `block`."""
    begin, end = readme.find(BEGIN), readme.find(END)
    if begin < 0 or end < begin:
        raise ValueError(f"README.md has no {BEGIN} ... --> / {END} markers")
    return readme[:begin] + block + readme[end + len(END):]


def parse_block(readme: str) -> dict:
    """The README's provenance block as {md5, committed, commit, date, fresh, kinds}; ValueError when it is missing or
    not in the form `readme_block` writes."""
    begin, end = readme.find(BEGIN), readme.find(END)
    if begin < 0 or end < begin:
        raise ValueError(f"README.md has no {BEGIN} ... --> / {END} block (run `attention-lab readme`)")
    block = readme[begin:end]
    committed = re.search(r"\(md5 `([0-9a-f]+)`\), last changed in commit `([0-9a-f]{7,40})` \((\d{4}-\d\d-\d\d)\)",
                          block)
    pending = re.search(r"\(md5 `([0-9a-f]+)`\), not yet committed \(on top of commit `([0-9a-f]{7,40})`, "
                        r"(\d{4}-\d\d-\d\d)\)", block)
    found = committed or pending
    if not found:
        raise ValueError("README.md's provenance block names no dvc.lock md5 and commit (run `attention-lab readme`)")
    fresh = "the results are fresh" in block
    kinds = re.findall(r"^- `([\w-]+)[@`]", block, re.MULTILINE)
    if fresh == bool(kinds) or fresh == ("may be stale" in block):
        raise ValueError("README.md's provenance block says neither that the results are fresh nor which stages "
                         "changed since (run `attention-lab readme`)")
    return {"md5": found[1], "committed": bool(committed), "commit": found[2], "date": found[3], "fresh": fresh,
            "kinds": kinds}


# -- the checks -------------------------------------------------------------------------------------------------------

def lock_disagreements(root: Path) -> tuple[list[str], list[str]]:
    """(committed outputs checked, problems): agreement of the outputs git keeps with dvc.lock (see the module doc).

    DVC hashes both sides (`Output.get_hash`, the hash `dvc status` compares; a file's md5 is the plain md5 of its
    bytes, a folder's is DVC's `.dir` hash of its listing), so nothing here re-implements DVC's hashing.
    """
    files = tracked(root)
    with _repo(root) as repo:
        stages = list(repo.index.stages)
        outs = {out.def_path: (stage, out) for stage in stages for out in stage.outs
                if not out.use_cache and in_files(out.def_path, files)}
        problems = []
        for path, (stage, out) in sorted(outs.items()):
            if not out.exists:
                problems.append(f"{path}: committed in git but missing here")
            elif not out.hash_info:
                problems.append(f"{path}: dvc.lock has no hash for it ({_name(stage)} never ran)")
            elif (now := out.get_hash()) != out.hash_info:
                problems.append(f"{path}: dvc.lock ({_name(stage)}) records {out.hash_info.value}, the "
                                f"committed one is {now.value} (edited by hand, or not from the recorded run)")
        for stage in stages:
            for dep in stage.deps:
                path = getattr(dep, "def_path", "")
                made_here = any(p == path or p.startswith(path.rstrip("/") + "/") or path.startswith(p + "/")
                                for p in outs)
                if not made_here or not dep.hash_info or not in_files(path, files) or not dep.exists:
                    continue
                if (now := dep.get_hash()) != dep.hash_info:
                    problems.append(f"{_name(stage)}: dvc.lock says it read {path} at {dep.hash_info.value}, "
                                    f"the committed one is {now.value} (re-run {_name(stage)}, or `dvc repro` "
                                    "the stages downstream of what was re-run)")
    return sorted(outs), problems


def block_disagreements(root: Path, readme: str, names: list[str] | None = None) -> list[str]:
    """Problems with the README's provenance block: missing, malformed, naming another dvc.lock or commit, or stage
    kinds that dvc.yaml does not have (names: dvc.yaml's stages, when the caller has them)."""
    try:
        block = parse_block(readme)
    except ValueError as err:
        return [str(err)]
    problems = []
    digest = md5((root / LOCK).read_bytes())
    if not digest.startswith(block["md5"]) or len(block["md5"]) < MD5_CHARS:
        problems.append(f"README.md's provenance block names dvc.lock md5 {block['md5']}, dvc.lock is {digest} "
                        "(run `attention-lab readme`)")
    if block["committed"]:
        known = subprocess.run(["git", "cat-file", "-e", f"{block['commit']}:{LOCK}"], cwd=root,
                               capture_output=True, check=False).returncode == 0
        if known:  # a shallow clone may lack the commit: then the md5 above is the check
            then = md5(subprocess.run(["git", "show", f"{block['commit']}:{LOCK}"], cwd=root, capture_output=True,
                                      check=True).stdout)
            if then != digest:
                problems.append(f"README.md's provenance block names commit {block['commit']}, whose dvc.lock is not "
                                "this one (run `attention-lab readme`)")
            elif (date := git(root, "log", "-1", "--format=%cs", block["commit"]).strip()) != block["date"]:
                problems.append(f"README.md's provenance block dates commit {block['commit']} {block['date']}; git "
                                f"says {date}")
    if names is None:
        with _repo(root) as repo:
            names = stage_names(repo)
    kinds = {name.split("@", 1)[0] for name in names}
    if unknown := sorted(set(block["kinds"]) - kinds):
        problems.append(f"README.md's provenance block lists stage kinds dvc.yaml does not have: {unknown}")
    return problems


def check_results(root: Path, readme: str, regenerated: str, fresh: dict) -> tuple[bool, list[str]]:
    """`make check-results`: (passed, report lines). Fails while dvc.lock is stale (`dvc status` lists a changed
    dependency kept in git), while the committed outputs or the README disagree with it, while the results break the
    protocol (results/protocol.py), or while README.md is not what `attention-lab readme` writes now (`regenerated`)."""
    # imported here: results.protocol loads omegaconf, and importing provenance loads none of the config stack
    from attention_lab.results.protocol import MIN_TRIALS, protocol_problems

    source, names, stale = fresh["source"], fresh["names"], fresh["stale"]
    lines = []
    recorded = f"commit {source['commit']}" if source["committed"] else "the working tree (not committed yet)"
    if stale:
        lines += [(f"STALE: `dvc status` lists dependencies kept in git that changed since dvc.lock was recorded "
                   f"({recorded}) for {len(stale)} of {len(names)} stages; run `dvc repro` (or `make pipeline`), then "
                   "`attention-lab readme`:"), *summarise(stale, names, fresh.get("tasks"))]
    else:
        lines.append(f"fresh: no dependency kept in git changed since dvc.lock was recorded ({recorded})")
    checked, problems = lock_disagreements(root)
    problems += block_disagreements(root, readme, names)
    if problems:
        lines += [f"DISAGREE: {len(problems)} problem(s) between the committed results, README.md and dvc.lock:",
                  *(f"- {p}" for p in problems)]
    else:
        lines.append(f"agree: the {len(checked)} committed outputs have the hashes dvc.lock records, and the stages "
                     "that read them read these; README.md's provenance block names this dvc.lock")
    if gaps := protocol_problems(root):
        lines += [(f"PROTOCOL: {len(gaps)} place(s) where the results break the comparison's protocol (three seeds, "
                  f"every final run to early stopping, >= {MIN_TRIALS} trials a study):"), *(f"- {g}" for g in gaps)]
    current = readme == regenerated
    if not current:
        lines.append("OUTDATED: README.md is not what `attention-lab readme` writes now (tables or provenance block): "
                     "run it")
    if not source["committed"]:
        lines.append("note: dvc.lock has changes not committed yet; commit them with the results, then run "
                     "`attention-lab readme` again (and commit README.md) so that the README names the commit")
    passed = not stale and not problems and not gaps and current
    lines.append("check-results: " + ("passed" if passed else "FAILED"))
    return passed, lines
