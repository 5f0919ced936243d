"""dvc.yaml, rendered from params.yaml and the code's imports (core.code_deps); never edit dvc.yaml.

The family groups loop over params.yaml's own lists and dicts (`foreach: ${translate.families}`,
`${translate.ablations}`; the corpora and their ablations where they exist on the task's data), so
`dvc exp run -S translate.families=[...]` runs the families it names. An item's own deps are
named from its family alone: conf/model/<family>.py (a link to the module its `_target_` names:
generated.links()), conf/tune/<family>.yaml, `<task>.family_params.<family>`. pipeline.generated
writes it and what it names; tests/test_dvc_deps.py fails while they are not current. Only the
tasks of `tasks` have stages."""

from __future__ import annotations

from pathlib import Path

import yaml

from attention_lab.core.code_deps import PACKAGE, Source
from attention_lab.core.params import corpus_suffix
from attention_lab.core.paths import CONF_DIR, METRICS, PREPARED, REPLICATION, REPORTS, RESULTS
from attention_lab.pipeline.stage_kinds import KINDS, LISTED, NAMES, ON_CORPORA, RECORDS, Kind

STAGES = "attention_lab.stages"
PREFIX = """\
# Written by `attention-lab stages` (src/attention_lab/pipeline/dvc_yaml.py) from params.yaml and
# the code's imports: do not edit; `attention-lab repro` (make pipeline) rewrites it first, and
# tests/test_dvc_deps.py checks it is current. Only the tasks of params.yaml `tasks` have stages.
# Code deps: the source files each stage's command can import.
# The family groups loop over params.yaml's lists: `dvc exp run -S translate.families=[...]` works.
"""


def family_lists(params: dict, task: str, root: Path) -> dict[str, list[str]]:
    """The task's items of each kind as params.yaml has them now (every ablation, run or not; the
    corpora and their ablations where the corpora exist on the task's data)."""
    from attention_lab.core.params import corpora, corpora_apply, replication

    section = params.get(task) or {}
    pretrained = list(section.get("pretrained") or [])
    replicated = list(replication(params, task, root))
    on = corpora_apply(params, task, root)
    return {
        "families": list(section.get("families") or []),
        "pretrained": pretrained,
        "ablations": list(section.get("ablations") or {}),
        "corpus_ablations": list(section.get("corpus_ablations") or {}) if on else [],
        "corpora": list(corpora(params, task, root)) if on else [],
        "replication": [f for f in replicated if f not in pretrained],
        "replication_pretrained": [f for f in replicated if f in pretrained],
    }


def task_families(source: Source, task: str) -> list[str]:
    """The families the code defines for `task`: those whose `_target_` is in its package."""
    found = []
    for path in sorted((source.conf / "model").glob("*.yaml")):
        target = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("_target_", "")
        if str(target).startswith(f"{PACKAGE}.{task}."):
            found.append(path.stem)
    return found


def check_params(params: dict, root: Path, task: str, lists: dict[str, list[str]]) -> None:
    """A ConfigError naming the key when a family the stages name has no `family_params` entry."""
    from attention_lab.core.config import ConfigError
    from attention_lab.core.params import ablations

    own = (params.get(task) or {}).get("family_params") or {}
    named = {
        *lists["families"],
        *lists["pretrained"],
        *(e["of"] for e in ablations(params, task, root).values()),
    }
    if missing := sorted(f for f in named if f not in own):
        raise ConfigError(
            f"{root / 'params.yaml'}: no `{task}.family_params.{missing[0]}` (give "
            "every family an entry, {} for none: its stages depend on it); missing "
            f"for {', '.join(missing)}"
        )


def render(root: Path) -> str:
    """dvc.yaml's text for the project at `root` (params.yaml, conf/, src/)."""
    from attention_lab.core.params import read_params

    params = read_params(root)
    source = Source(root / "src", root / CONF_DIR)
    tasks = params.get("tasks", [])
    lists = {task: family_lists(params, task, root) for task in tasks}  # each task's checked once
    for task in tasks:
        check_params(params, root, task, lists[task])
    stages: dict[str, dict] = {}
    for kind in KINDS:
        for task in tasks:
            if grouped(kind, params, task, lists[task], root):
                name = kind.name.format(task=task)
                stages[name] = stage(kind, source, root, params, task, lists[task])
    ledger = f"python -m {STAGES}.claims"  # like the index, it reads every task's registry by name
    registries = {f"{PACKAGE}.{task}.task" for task in tasks}
    ledger_code = sorted({*code(source, root, [ledger]), *modules(source, root, registries)})
    replicated = [t for t in tasks if lists[t]["replication"] or lists[t]["replication_pretrained"]]
    listed = ("pretrained", "ablations", "corpus_ablations", "corpora")
    stages["report_claims"] = {
        "cmd": ledger,
        "deps": [
            f"{CONF_DIR}/claims.yaml",
            *(f"{k}/{t}" for t in tasks for k in RECORDS),
            *(
                f"{PREPARED}/{t}{corpus_suffix(c)}/test.jsonl"  # the test items' lengths
                for t in tasks
                for c in (None, *lists[t]["corpora"])
            ),
            *(f"{k}/{REPLICATION}/{t}" for t in replicated for k in RECORDS),
            *(f"{METRICS}/{t}_summary.json" for t in tasks),  # after each report: its MLflow run
            *ledger_code,
        ],
        "params": [
            "tasks",
            *(f"{t}.families" for t in tasks),
            *(f"{t}.{k}" for t in tasks for k in listed if lists[t][k]),
            *(f"{t}.replication" for t in tasks if params.get(t, {}).get("replication")),
        ],
        "outs": [
            {out: {"cache": False}}
            for out in (
                f"{REPORTS}/claims.md",
                f"{REPORTS}/claims",
                f"{METRICS}/claims.json",
                f"{REPORTS}/ablations.md",
            )
        ],
    }
    index = f"python -m {STAGES}.report index"
    # the index names no task, yet looks up each task by name (get_task imports its registry)
    index_code = sorted({*code(source, root, [index]), *modules(source, root, registries)})
    stages["report_index"] = {
        "cmd": index,
        "deps": [METRICS, *index_code],
        "params": ["tasks"],
        "outs": [{f"{REPORTS}/index.md": {"cache": False}}],
    }
    pipeline = {"stages": stages, "plots": data_plots(params, tasks, lists, root)}
    text = yaml.safe_dump(pipeline, sort_keys=False, width=120, default_flow_style=False)
    comments = {kind.name.format(task=t): kind.comment for kind in KINDS for t in tasks}
    comments["report_claims"] = (
        "reports/claims.md, metrics/claims.json: the papers' claims "
        "(conf/claims.yaml), tested; reports/ablations.md: each ablation against its family"
    )
    comments["report_index"] = "reports/index.md: a line and a link per task of `tasks`"
    for group, comment in comments.items():
        text = text.replace(f"\n  {group}:\n", f"\n  {group}:  # {comment}\n", 1)
    return PREFIX + text


def modules(source: Source, root: Path, roots: set[str]) -> list[str]:
    """The files (relative to root) of `roots` and of every project module they import."""
    return [source.module_file(m).relative_to(root).as_posix() for m in source.closure(roots)]


def grouped(kind: Kind, params: dict, task: str, lists: dict[str, list[str]], root: Path) -> bool:
    """Does the task (params.yaml, its item lists) have the kind's group."""
    from attention_lab.core.params import corpora_apply

    section = params.get(task) or {}
    if not kind.families:
        return True
    if kind.families in ("families", "ablations"):  # even empty: `dvc exp run -S` can fill it
        return kind.families in section
    if kind.families in ON_CORPORA:  # as those, where the corpora exist on the task's data
        return kind.families in section and corpora_apply(params, task, root)
    return bool(lists[kind.families])  # groups named without the task, and the replication's


def data_plots(params: dict, tasks: list[str], lists: dict, root: Path) -> list[dict]:
    """dvc.yaml's top-level plots: by length per task and group, validation curves per item."""
    from attention_lab.core.params import REPLICATION_SEED, families, replication
    from attention_lab.core.task import get_task
    from attention_lab.results import records

    plots, seeds = [], params.get("seeds", [0])
    for task in tasks:
        key, label = next(iter(get_task(task).headline.items()))
        fresh = {
            f: list(range(REPLICATION_SEED, REPLICATION_SEED + n))
            for f, n in replication(params, task, root).items()
        }
        ablated = [*lists[task]["ablations"], *lists[task]["corpus_ablations"]]
        # {item: its seeds}
        groups = (
            ("", "families", {f: seeds for f in families(params, task)}),
            ("", "ablations", {a: seeds for a in ablated}),
            (f"{REPLICATION}/", "replication", fresh),
        )
        for where, group, items in groups:
            if not items:
                continue
            folder = f"{RESULTS}/{where}{task}"
            # a line per item: its mean over seeds by bucket
            by_length = {
                f"{folder}/{item}/{records.BY_LENGTH}": records.length_metric(key) for item in items
            }
            plots.append(
                {
                    f"{where}{task}/by_length/{group}": {
                        "template": "linear",
                        "x": "length",
                        "y": by_length,
                        "title": (
                            f"{task} ({group}): test {label} by length bucket, mean over seeds"
                        ),
                        "x_label": "length bucket (its shortest length)",
                        "y_label": f"test {label}",
                    }
                }
            )
            for item, runs in items.items():  # a line per seed: the metric its runs stop on
                curves = {f"{folder}/{item}/{records.curve_file(seed)}": "value" for seed in runs}
                plots.append(
                    {
                        f"{where}{task}/curves/{item}": {
                            "template": "linear",
                            "x": "epoch",
                            "y": curves,
                            "title": f"{task} {item}: validation curve of each seed",
                            "x_label": "epoch",
                            "y_label": "validation metric (the one its runs stop on)",
                        }
                    }
                )
    return plots


def code(source: Source, root: Path, cmds: list[str]) -> list[str]:
    """The source files (relative to root) each of these commands can import, in a sorted union."""
    files = set().union(*(source.stage_files(c) for c in cmds))
    return sorted(p.relative_to(root).as_posix() for p in files)


def stage(
    kind: Kind, source: Source, root: Path, params: dict, task: str, lists: dict[str, list[str]]
) -> dict:
    """A per-task kind's stage {cmd, deps, ...}, or a family kind's foreach group {foreach, do}."""
    from attention_lab.core.params import ABLATION_KEYS, ablations

    if not kind.families:
        values, foreach = {**NAMES, "task": task, "item": task, "of": task, "data": task}, None
        shared, own_deps = code(source, root, [f"python -m {STAGES}.{kind.module} task={task}"]), []
    elif kind.families == "corpora":  # a dict {corpus: its data keys}: the same code for each
        foreach = f"${{{task}.corpora}}"
        values = {**NAMES, "task": task, "item": "${key}", "data": f"{task}_${{key}}"}
        shared, own_deps = code(source, root, [f"python -m {STAGES}.{kind.module} task={task}"]), []
    else:
        data = task
        if kind.families in LISTED:  # params.yaml's list (item: a family), dict (key: an ablation)
            foreach = f"${{{task}.{kind.families}}}"
            by_key = kind.families in ABLATION_KEYS
            item, of = ("${key}", "${item.of}") if by_key else ("${item}", "${item}")
            if kind.families == "corpus_ablations":
                data = f"{task}_${{item.corpus}}"
        else:  # the replication's items name a family or an ablation: their family is written here
            entries, section = ablations(params, task, root), params.get(task) or {}
            where = {a: k for k in ABLATION_KEYS for a in section.get(k) or {}}
            foreach = {
                f: {
                    "of": entries[f]["of"] if f in entries else f,
                    "set": f"{task}.{where.get(f, 'replication')}.{f}",
                    "data": task + corpus_suffix(entries.get(f, {}).get("corpus")),
                }
                for f in lists[kind.families]
            }
            item, of, data = "${key}", "${item.of}", "${item.data}"
        values = {
            **NAMES,
            "task": task,
            "item": item,
            "of": of,
            "own": f"{task}.family_params.{of}",
            "set": "${item.set}",
            "data": data,
        }
        candidates = [*task_families(source, task), *lists["families"], *lists["pretrained"]]
        shared = group_code(source, root, kind, task, candidates)
        space = [search_space(item)] if kind.module == "tune" else []
        own_deps = [model_link(of), *space]
    deps = [d.format(profile="${profile}", **values) for d in kind.deps] + shared + own_deps
    arg = "corpus" if kind.families == "corpora" else "family"
    family = f" {arg}={values['item']}" if foreach is not None else ""
    do: dict = {
        "cmd": f"python -m {STAGES}.{kind.module} task={task}{family}{kind.overrides}",
        "deps": list(dict.fromkeys(deps)),
    }
    if kind.params:
        do["params"] = [p.format(**values) for p in kind.params]
    if kind.metrics:
        do["metrics"] = [{m.format(**values): {"cache": False}} for m in kind.metrics]
    if kind.plots:
        do["plots"] = [{p.format(**values): {"cache": False}} for p in kind.plots]
    outs = [o.format(**values) for o in kind.outs]
    outs += [{o.format(**values): {"cache": False}} for o in kind.outs_no_cache]
    if outs:
        do["outs"] = outs
    return do if foreach is None else {"foreach": foreach, "do": do}


def group_code(source: Source, root: Path, kind: Kind, task: str, families: list[str]) -> list[str]:
    """The code deps a family group lists once: what a family's command imports, but own modules."""
    # a family's own model module is named by its link, unless another family's code imports it too
    families = list(dict.fromkeys(families))
    closures = {
        f: code(source, root, [f"python -m {STAGES}.{kind.module} task={task} family={f}"])
        for f in families
    }
    own = {f: model_file(source, root, f) for f in families}
    shared = {p for g in families for p in closures[g] if own[g] != p}  # imported by another's code
    return sorted(
        {p for files in closures.values() for p in files if p not in own.values() or p in shared}
    )


def model_link(family: str) -> str:
    """conf/model/<family>.py: a link to the family's model module (generated.links()), its own
    code dep."""
    return f"{CONF_DIR}/model/{family}.py"


def search_space(family: str) -> str:
    """conf/tune/<family>.yaml: the family's search space ({}: not tuned)."""
    return f"{CONF_DIR}/tune/{family}.yaml"


def model_file(source: Source, root: Path, family: str) -> str:
    """The module file of conf/model/<family>.yaml's `_target_`, relative to root."""
    return source.module_file(source.model_module(family)).relative_to(root).as_posix()
