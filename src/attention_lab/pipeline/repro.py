"""`attention-lab repro --jobs N`: `dvc repro` with the families' chains of stages side by side, N
at a time. After the stages the families share (prepare, tokenize), N chains (a family's
`<kind>@<family>` stages) run at once, each stage as `dvc --wait-for-lock repro --single-item
<stage>` on one thread, their runs sharing one pool (train/pool.py: RAY_ADDRESS's cluster, else a
Ray instance of --slots CPUs it starts here); then one plain `dvc repro` does the rest. Studies come
first; a failed stage stops its chain only, and the command exits 1 naming it (docs/design.md, "Why
the modules are as they are")."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from attention_lab.train import pool

ONE_THREAD = pool.ONE_THREAD


@dataclass(frozen=True)
class Plan:
    """Which stages run how: `head` in one `dvc repro` first, then each chain's stages in order
    (chains side by side), then `dvc repro` for whatever is left (`tail`)."""

    head: list[str]
    chains: dict[str, list[str]]
    tail: list[str]


def plan(
    order: list[str],
    upstream: dict[str, set[str]],
    families: list[str],
    every: bool = True,
    of: dict[str, str] | None = None,
) -> Plan:
    """Split stages (`order`: an execution order; `upstream`: each stage's ancestors) into the
    families' chains (a stage named `<kind>@<family>`, or `<kind>@<ablation>` where `of` maps the
    ablation to its family: it runs after that family's stages, on its study), the head (what any
    chain needs that is in none) and the tail: every other stage, or with every=False only those
    downstream of a chain (a task's report, the index of the reports)."""
    family = {
        s: (of or {}).get(item, item) for s in order if "@" in s for item in [s.rpartition("@")[2]]
    }
    chains = {f: [s for s in order if family.get(s) == f] for f in families}
    chains = {f: stages for f, stages in chains.items() if stages}
    in_chain = {s for stages in chains.values() for s in stages}
    needed = set().union(*(upstream[s] for s in in_chain)) if in_chain else set()
    head = [s for s in order if s in needed and s not in in_chain]
    tail = [s for s in order if s not in in_chain and s not in needed]
    if not every:
        tail = [s for s in tail if upstream[s] & in_chain]
    return Plan(head=head, chains=chains, tail=tail)


def studies_first(stages: list[str]) -> tuple[list[str], list[str]]:
    """A chain's stages up to its study (`tune*@f`, with what the study needs: `pretrain@f`) and the
    rest."""
    cut = max((i + 1 for i, stage in enumerate(stages) if stage.startswith("tune")), default=0)
    return stages[:cut], stages[cut:]


def pipeline_plan(root: Path, tasks: list[str] | None = None) -> Plan:
    """plan() of the project's dvc.yaml (DVC's stage graph) and params.yaml (the families of every
    task, or of `tasks` only)."""
    import networkx as nx

    from attention_lab.core.params import families, pretrained_families, read_params, run_ablations
    from attention_lab.pipeline.provenance import _name, _repo

    params = read_params(root)
    chosen = tasks or params.get("tasks", [])
    if unknown := [t for t in chosen if t not in params.get("tasks", [])]:
        raise ValueError(
            f"no task {', '.join(unknown)} in params.yaml `tasks`: {params.get('tasks', [])}"
        )
    names = [
        f for task in chosen for f in [*families(params, task), *pretrained_families(params, task)]
    ]
    with _repo(root) as repo:
        graph = repo.index.graph  # edges point from a stage to the stages it depends on
        order = [_name(s) for s in reversed(list(nx.topological_sort(graph)))]
        upstream = {_name(s): {_name(d) for d in nx.descendants(graph, s)} for s in graph.nodes}
    of = {
        name: entry["of"]
        for task in chosen
        for name, entry in run_ablations(params, task, root).items()
    }
    return plan(order, upstream, names, every=not tasks, of=of)


def dvc(*args: str) -> list[str]:
    """The command line of `dvc --wait-for-lock <args>`, by the dvc beside this Python (the
    project's venv)."""
    exe = Path(sys.executable).with_name("dvc")
    return [str(exe) if exe.is_file() else "dvc", "--wait-for-lock", *args]


def run_logged(
    cmd: list[str], root: Path, label: str, env: dict, say: Callable[[str], None]
) -> tuple[int, list[str]]:
    """Run cmd in root, each output line said as `[label] line`; (exit status, its last 40
    lines)."""
    proc = subprocess.Popen(
        cmd,
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
    )
    last: list[str] = []
    for line in proc.stdout:
        say(f"[{label}] {line.rstrip()}")
        last = [*last[-39:], line.rstrip()]
    return proc.wait(), last


def repro(
    root: Path,
    jobs: int,
    tasks: list[str] | None = None,
    say: Callable[[str], None] = print,
    slots: int | None = None,
    allow_missing: bool = False,
) -> int:
    """Run the pipeline, or only `tasks`' stages and the reports that read them (see the module's
    docstring), each `dvc repro` with --allow-missing where asked; 0 when every stage is done, else
    1 after naming what failed. A generated dvc.yaml
    (dvc_yaml's header) is written anew first (dvc.yaml alone, never a file of docs/), so it has the
    stages of params.yaml's tasks and today's code deps; one without that header (by hand) is left
    as is."""
    from attention_lab.pipeline.dvc_yaml import PREFIX
    from attention_lab.pipeline.generated import missing, write

    pipeline = root / "dvc.yaml"
    generated = pipeline.is_file() and pipeline.read_text(encoding="utf-8").startswith(
        PREFIX.splitlines()[0]
    )
    if generated:
        if not write(root, developer=False):
            say(f"wrote {pipeline} from params.yaml and the code's imports")
        if absent := missing(root):
            say(
                f"attention-lab repro: the stages name {', '.join(absent)}, which are not there "
                "(a new family?): run `attention-lab stages`, which writes them"
            )
            return 1
    work = pipeline_plan(root, tasks)
    if os.environ.get(pool.ADDRESS):  # a cluster's pool
        import ray

        ray.init(address=os.environ[pool.ADDRESS], logging_level="ERROR")
        slots = int(ray.cluster_resources().get("CPU", 1))
        ray.shutdown()
        return _repro(root, jobs, tasks, work, say, slots, os.environ[pool.ADDRESS], allow_missing)
    slots = slots or os.cpu_count() or 1
    with pool.local_instance(slots) as address:
        return _repro(root, jobs, tasks, work, say, slots, address, allow_missing)


def _repro(
    root: Path,
    jobs: int,
    tasks: list[str] | None,
    work: Plan,
    say: Callable[[str], None],
    slots: int,
    address: str,
    allow_missing: bool = False,
) -> int:
    """repro's stages, their runs on the pool at `address` (`slots` CPUs)."""
    allow = ("--allow-missing",) if allow_missing else ()
    env = {
        **os.environ,
        **ONE_THREAD,
        pool.ADDRESS: address,  # one pool of runs: train/pool.py
        # stages' python
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }
    lock = threading.Lock()

    def said(line: str) -> None:
        with lock:
            say(f"{time.strftime('%H:%M:%S')} {line}")

    started = time.monotonic()
    if work.head:
        code, last = run_logged(dvc("repro", *allow, *work.head), root, "shared", env, said)
        if code:
            return failed({"shared stages": last}, say)

    def run(stages: list[str]) -> tuple[str, list[str]] | None:
        for stage in stages:
            code, last = run_logged(
                dvc("repro", *allow, "--single-item", stage), root, stage, env, said
            )
            if code:
                return stage, last
        return None

    parts = {family: studies_first(stages) for family, stages in work.chains.items()}
    studying = threading.Condition()
    unfinished = len(parts)  # chains whose study part has not ended

    def study(family: str) -> tuple[str, list[str]] | None:
        nonlocal unfinished
        try:
            return run(parts[family][0])
        finally:
            with studying:
                unfinished -= 1
                studying.notify_all()

    def rest(family: str, studied: Future) -> tuple[str, list[str]] | None:
        if studied.result():
            return None  # its study part failed, said by study()
        with studying:  # a long run must not take a slot that a study's next trial is waiting for
            studying.wait_for(lambda: unfinished < slots)
        return run(parts[family][1])

    # FIFO: every study part starts before any rest
    with ThreadPoolExecutor(max(1, jobs)) as threads:
        studies = {family: threads.submit(study, family) for family in parts}
        rests = [threads.submit(rest, family, studies[family]) for family in parts]
        results = [future.result() for future in [*studies.values(), *rests]]
    failures = {stage: last for stage, last in filter(None, results)}
    if failures:
        return failed(failures, say)
    # a task's report and the index; else whatever is left
    for stage in work.tail if tasks else [None]:
        args = ("repro", *allow, "--single-item", stage) if stage else ("repro", *allow)
        code, last = run_logged(dvc(*args), root, stage or "rest", env, said)
        if code:
            return failed({stage or "the remaining stages": last}, say)
    say(
        f"attention-lab repro: the pipeline is done ({len(work.chains)} chains, --jobs {jobs}) in "
        f"{(time.monotonic() - started) / 60:.1f} min"
    )
    return 0


def failed(failures: dict[str, list[str]], say: Callable[[str], None]) -> int:
    """Name each failed stage with the end of its output; exit status 1."""
    for stage, last in failures.items():
        say(f"attention-lab repro: {stage} failed; its last lines:\n  " + "\n  ".join(last))
    say(
        f"attention-lab repro: {len(failures)} failed ({', '.join(failures)}); every stage that"
        " finished is recorded in dvc.lock, so running it again continues from there"
    )
    return 1
