"""dvc.yaml, written from params.yaml (`tasks`, each task's families) and the code's imports (attention_lab.core.code_deps):
`attention-lab stages` writes it, `attention-lab repro` (make pipeline) writes it before running, and
tests/test_dvc_deps.py fails while the committed file is not what this writes. Edit this module, never dvc.yaml.
Only the tasks of params.yaml `tasks` have stages; how code deps are listed: docs/design.md."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from attention_lab.core.code_deps import PACKAGE, Source
from attention_lab.core.config import corpus_suffix

STAGES = "attention_lab.stages"
DOC = "docs/pipeline.md"
BEGIN, END = "<!-- reruns:begin (written by `attention-lab stages`; tests/test_dvc_deps.py checks it) -->", "<!-- reruns:end -->"
PREFIX = """\
# Written by `attention-lab stages` (src/attention_lab/pipeline/dvc_yaml.py) from params.yaml and the code's imports: do not
# edit; `attention-lab repro` (make pipeline) rewrites it first, and tests/test_dvc_deps.py checks it is current.
# Only the tasks of params.yaml `tasks` have stages. Code deps: the source files each stage's command can import.
"""


@dataclass(frozen=True)
class Kind:
    """One kind of stage: per task, a foreach group `<kind>_<task>` whose items are the task's families, or (for a
    per-task kind, families="") the one stage `<kind>_<task>`, so that each task's stage imports that task's code alone."""

    name: str                       # dvc.yaml group (or, per task, stage) name; `{task}` is replaced
    module: str                     # attention_lab.stages.<module>
    comment: str
    deps: tuple[str, ...] = ()      # data and conf deps: {task}, {item} (the family or task), {of} (the family whose
    #                                 model and tuned values it runs: an ablation's family, else the item), {profile},
    #                                 {data} (the folder name of its corpus: <task>, or <task>_<corpus>)
    params: tuple[str, ...] = ()
    outs: tuple[str, ...] = ()
    outs_no_cache: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    plots: tuple[str, ...] = ()
    families: str = "families"      # "families", "pretrained", "ablations", "replication" (its families and ablations),
    #                                 "replication_pretrained" (its pretrained families), "corpora" (those an ablation
    #                                 trains on: the command says corpus=) or "" (one item per task)
    overrides: str = ""             # appended to the command: replication=true


RECORDS = ("metrics", "results", "predictions")  # what report_claims reads of each evaluated family
# an evaluate stage's outputs besides metrics and plots (results/: the record's rest, data plots)
EVALUATED = ("predictions/{task}/{item}.json", "results/{task}/{item}")
REPLICATED = ("predictions/replication/{task}/{item}.json", "results/replication/{task}/{item}")
SET = "{set}"  # ${item.set}: a replicated ablation's `<task>.ablations.<name>`, else its `<task>.replication.<name>`
REPLICATION = " replication=true"
OWN = "{own}"  # ${item.params}: the family's params.yaml `<task>.family_params.<family>` (see own_params)
# the stages that train: params.yaml `trainer:` picks their conf/trainer file (any of them: `auto` names none), so
# switching it re-runs them; evaluate and export run their models on the CPU whatever it says
TRAINER = ("conf/trainer",)
CONF = ("conf/model/{of}.yaml", *TRAINER, "conf/config.yaml", "conf/task/{task}.yaml")
TRAIN_PARAMS = ("seeds", "trainer", "{task}.train", OWN)
TRAIN_DEPS = ("tuned/{of}.yaml", "data/prepared/{data}", "data/tokenized/{data}", *CONF, "conf/data/{task}",
              "conf/profile/{profile}.yaml")
PREPARE = ("conf/data/{task}", "conf/task/{task}.yaml", "conf/profile/{profile}.yaml")
TOKENIZE = ("data/prepared/{data}/train.jsonl", "conf/task/{task}.yaml", "conf/profile/{profile}.yaml")
KINDS = (
    Kind("prepare_{task}", "prepare", "data/prepared/<task>/{train,valid,test}.jsonl (+ images, rationales, stats.json)",
         deps=PREPARE, params=("profile", "{task}.data"), outs=("data/prepared/{task}",), families=""),
    Kind("tokenize_{task}", "tokenizer", "data/tokenized/<task>/tokenizer.json, trained on the training split only",
         deps=TOKENIZE, params=("{task}.tokenize",), outs=("data/tokenized/{task}",), families=""),
    Kind("prepare_corpus_{task}", "prepare", "each corpus of params.yaml `<task>.corpora` an ablation trains on: "
         "`<task>.data` with its keys changed -> data/prepared/<task>_<corpus>",
         deps=PREPARE, params=("profile", "{task}.data", "{task}.corpora.{item}"), outs=("data/prepared/{data}",),
         families="corpora"),
    Kind("tokenize_corpus_{task}", "tokenizer", "as tokenize_<task>, on the corpus -> data/tokenized/<task>_<corpus>",
         deps=TOKENIZE, params=("{task}.tokenize",), outs=("data/tokenized/{data}",), families="corpora"),
    Kind("pretrain", "pretrain", "the encoder a pretrained family starts from -> models/pretrained/<family>",
         deps=("data/prepared/{task}/train.jsonl", "data/prepared/{task}/valid.jsonl",
               "data/prepared/{task}/unlabelled.jsonl", "conf/model/{item}.yaml", "conf/task/{task}.yaml",
               "conf/profile/{profile}.yaml", *TRAINER),
         params=("seeds", "trainer", "{task}.pretrain", OWN),
         outs=("models/pretrained/{item}", "models/pretrained/{item}.run.json"),
         families="pretrained"),
    Kind("tune_{task}", "tune", "one Optuna study per family -> tuned/<family>.yaml, which its train stage merges",
         deps=("data/prepared/{task}", "data/tokenized/{task}", *CONF, "conf/data/{task}", "conf/profile/{profile}.yaml"),
         params=("{task}.tune", *TRAIN_PARAMS), outs_no_cache=("tuned/{item}.yaml",)),
    Kind("tune_finetuned", "tune", "as tune_<task>, on the pretrained encoder and its vocabulary",
         deps=("data/prepared/{task}", "models/pretrained/{item}", *CONF, "conf/profile/{profile}.yaml"),
         params=("{task}.tune", *TRAIN_PARAMS), outs_no_cache=("tuned/{item}.yaml",), families="pretrained"),
    Kind("train_{task}", "train", "every seed (and label fraction) -> models/<family>/checkpoints",
         deps=TRAIN_DEPS, params=TRAIN_PARAMS, outs=("models/{item}/checkpoints",)),
    Kind("finetune_{task}", "train", "as train_<task>, on the pretrained encoder and its vocabulary",
         deps=("tuned/{item}.yaml", "data/prepared/{task}", "models/pretrained/{item}", *CONF,
               "conf/profile/{profile}.yaml"),
         params=TRAIN_PARAMS, outs=("models/{item}/checkpoints",), families="pretrained"),
    Kind("evaluate_{task}", "evaluate", "test scores: metrics/ (numbers), results/ (the rest, data "
         "plots), plots/ (images), predictions/ (every seed's outputs, for the paired tests)",
         deps=("data/prepared/{task}", "data/tokenized/{task}", "models/{item}/checkpoints", "tuned/{item}.yaml"),
         params=("{task}.evaluate",), metrics=("metrics/{task}/{item}.json",), plots=("plots/{task}/{item}",),
         outs_no_cache=EVALUATED),
    Kind("evaluate_finetuned", "evaluate", "as evaluate_<task>, plus the pretraining figures",
         deps=("data/prepared/{task}/test.jsonl", "models/pretrained/{item}/pretrain.json",
               "models/pretrained/{item}.run.json",
               "models/pretrained/{item}/tokenizer.json", "models/{item}/checkpoints", "tuned/{item}.yaml"),
         params=("{task}.evaluate",), metrics=("metrics/{task}/{item}.json",), plots=("plots/{task}/{item}",),
         outs_no_cache=EVALUATED, families="pretrained"),
    Kind("export_{task}", "export", "ONNX graphs, tokenizer, meta.json, parity.json -> models/<family>/onnx",
         deps=("data/tokenized/{task}", "models/{item}/checkpoints", "conf/config.yaml"),
         params=("{task}.evaluate",), outs=("models/{item}/onnx",)),
    Kind("export_finetuned", "export", "as export_<task>, from the fine-tuned checkpoints",
         deps=("data/tokenized/{task}", "models/{item}/checkpoints", "conf/config.yaml"),
         params=("{task}.evaluate",), outs=("models/{item}/onnx",), families="pretrained"),
    Kind("train_ablation_{task}", "train", "each of params.yaml `<task>.ablations`: its family with one switch "
         "changed, on that family's tuned values, every seed -> models/<ablation>/checkpoints",
         deps=TRAIN_DEPS, params=(*TRAIN_PARAMS, "{task}.ablations.{item}"), outs=("models/{item}/checkpoints",),
         families="ablations"),
    Kind("evaluate_ablation_{task}", "evaluate", "as evaluate_<task>, for the ablations",
         deps=("data/prepared/{data}", "data/tokenized/{data}", "models/{item}/checkpoints"),
         params=("{task}.evaluate",), metrics=("metrics/{task}/{item}.json",), plots=("plots/{task}/{item}",),
         outs_no_cache=EVALUATED, families="ablations"),
    Kind("train_replication_{task}", "train", "the confirmatory replication: each of params.yaml "
         "`<task>.replication` on its fresh seeds, after the claims are frozen -> models/replication/<name>/checkpoints",
         deps=TRAIN_DEPS, params=("trainer", "{task}.train", OWN, "{task}.replication.{item}", SET),
         outs=("models/replication/{item}/checkpoints",), families="replication", overrides=REPLICATION),
    Kind("finetune_replication_{task}", "train", "as train_replication_<task>, for the pretrained families",
         deps=("tuned/{item}.yaml", "data/prepared/{task}", "models/pretrained/{item}", *CONF,
               "conf/profile/{profile}.yaml"),
         params=("trainer", "{task}.train", OWN, "{task}.replication.{item}"),
         outs=("models/replication/{item}/checkpoints",), families="replication_pretrained", overrides=REPLICATION),
    Kind("evaluate_replication_{task}", "evaluate", "as evaluate_<task>, for the replication -> metrics/replication/",
         deps=("data/prepared/{data}", "data/tokenized/{data}", "models/replication/{item}/checkpoints"),
         params=("{task}.evaluate",), metrics=("metrics/replication/{task}/{item}.json",),
         plots=("plots/replication/{task}/{item}",),
         outs_no_cache=REPLICATED,
         families="replication", overrides=REPLICATION),
    Kind("evaluate_replication_finetuned", "evaluate", "as evaluate_finetuned, for the replication",
         deps=("data/prepared/{task}/test.jsonl", "models/pretrained/{item}/pretrain.json",
               "models/pretrained/{item}.run.json", "models/pretrained/{item}/tokenizer.json",
               "models/replication/{item}/checkpoints"),
         params=("{task}.evaluate",), metrics=("metrics/replication/{task}/{item}.json",),
         plots=("plots/replication/{task}/{item}",),
         outs_no_cache=REPLICATED,
         families="replication_pretrained", overrides=REPLICATION),
    Kind("report_{task}", "report", "reports/<task>.md + reports/<task>/, metrics/<task>_summary.json (ranking, p-values)",
         deps=("metrics/{task}", "results/{task}", "plots/{task}", "predictions/{task}"),
         params=("{task}.families",),
         outs_no_cache=("reports/{task}.md", "reports/{task}", "metrics/{task}_summary.json"), families=""),
)


def family_lists(params: dict, task: str, root: Path) -> dict[str, list[str]]:
    from attention_lab.core.config import replication, run_ablations

    section = params.get(task) or {}
    pretrained = list(section.get("pretrained") or [])
    replicated = list(replication(params, task, root))
    ablated = run_ablations(params, task, root)
    return {"families": list(section.get("families") or []), "pretrained": pretrained,
            "ablations": list(ablated),
            "corpora": list(dict.fromkeys(e["corpus"] for e in ablated.values() if "corpus" in e)),
            "replication": [f for f in replicated if f not in pretrained],
            "replication_pretrained": [f for f in replicated if f in pretrained]}


def render(root: Path) -> str:
    """dvc.yaml's text for the project at `root` (params.yaml, conf/, src/)."""
    from attention_lab.core.config import read_params

    params = read_params(root)
    source = Source(root / "src", root / "conf")
    tasks = params.get("tasks", [])
    lists = {task: family_lists(params, task, root) for task in tasks}  # each task's checked once
    stages: dict[str, dict] = {}
    for kind in KINDS:
        for task in tasks:
            if kind.families and not lists[task][kind.families]:
                continue
            items = lists[task][kind.families] if kind.families else None
            stages[kind.name.format(task=task)] = stage(kind, source, root, params, task, items)
    ledger = f"python -m {STAGES}.claims"  # like the index, it reads every task's registry by name
    ledger_code = sorted({*code(source, root, [ledger]),
                          *(source.module_file(m).relative_to(root).as_posix()
                            for m in source.closure({f"{PACKAGE}.{task}.task" for task in tasks}))})
    stages["report_claims"] = {
        "cmd": ledger,
        "deps": ["conf/claims.yaml", *(f"{kind}/{task}" for task in tasks for kind in RECORDS),
                 *(f"data/prepared/{task}{corpus_suffix(c)}/test.jsonl"  # the test items' lengths (buckets)
                   for task in tasks for c in (None, *lists[task]["corpora"])),
                 *(f"{kind}/replication/{task}" for task in tasks for kind in RECORDS
                   if lists[task]["replication"] or lists[task]["replication_pretrained"]),
                 *(f"metrics/{task}_summary.json" for task in tasks),  # after each task's report: its MLflow run
                 *ledger_code],
        "params": ["tasks", *(f"{task}.families" for task in tasks),
                   *(f"{task}.{key}" for task in tasks for key in ("pretrained", "ablations")
                     if lists[task][key]),
                   *(f"{task}.replication" for task in tasks if (params.get(task) or {}).get("replication"))],
        "outs": [{out: {"cache": False}} for out in ("reports/claims.md", "reports/claims", "metrics/claims.json",
                                                     "reports/ablations.md")]}
    index = f"python -m {STAGES}.report index"
    # the index names no task, yet looks up every task of `tasks` by name (core.task.get_task imports its registry)
    registries = source.closure({f"{PACKAGE}.{task}.task" for task in params.get("tasks", [])})
    index_code = sorted({*code(source, root, [index]),
                         *(source.module_file(m).relative_to(root).as_posix() for m in registries)})
    stages["report_index"] = {"cmd": index, "deps": ["metrics", *index_code], "params": ["tasks"],
                              "outs": [{"reports/index.md": {"cache": False}}]}
    pipeline = {"stages": stages, "plots": data_plots(params, tasks, lists, root)}
    text = yaml.safe_dump(pipeline, sort_keys=False, width=120, default_flow_style=False)
    comments = {kind.name.format(task=t): kind.comment for kind in KINDS for t in params.get("tasks", [])}
    comments["report_claims"] = ("reports/claims.md, metrics/claims.json: the papers' claims (conf/claims.yaml), "
                                 "tested; reports/ablations.md: each ablation against its family")
    comments["report_index"] = "reports/index.md: a line and a link per task of `tasks`"
    for group, comment in comments.items():
        text = text.replace(f"\n  {group}:\n", f"\n  {group}:  # {comment}\n", 1)
    return PREFIX + text


def data_plots(params: dict, tasks: list[str], lists: dict, root: Path) -> list[dict]:
    """dvc.yaml's top-level plots: by length per task and group, validation curves per item."""
    from attention_lab.core.config import REPLICATION_SEED, families, replication
    from attention_lab.core.task import get_task
    from attention_lab.results import records

    plots, seeds = [], params.get("seeds", [0])
    for task in tasks:
        key, label = next(iter(get_task(task).headline.items()))
        fresh = {f: list(range(REPLICATION_SEED, REPLICATION_SEED + n))
                 for f, n in replication(params, task, root).items()}
        groups = (("", "families", {f: seeds for f in families(params, task)}),
                  ("", "ablations", {a: seeds for a in lists[task]["ablations"]}),
                  ("replication/", "replication", fresh))  # {item: its seeds}
        for where, group, items in groups:
            if not items:
                continue
            folder = f"{records.RESULTS}/{where}{task}"
            by_length = {f"{folder}/{item}/{records.BY_LENGTH}": records.length_metric(key)
                         for item in items}  # a line per item: its mean over seeds by bucket
            plots.append({f"{where}{task}/by_length/{group}": {
                "template": "linear", "x": "length", "y": by_length,
                "title": f"{task} ({group}): test {label} by length bucket, mean over seeds",
                "x_label": "length bucket (its shortest length)", "y_label": f"test {label}"}})
            for item, runs in items.items():  # a line per seed: the metric its runs stop on
                curves = {f"{folder}/{item}/{records.curve_file(seed)}": "value" for seed in runs}
                plots.append({f"{where}{task}/curves/{item}": {
                    "template": "linear", "x": "epoch", "y": curves,
                    "title": f"{task} {item}: validation curve of each seed",
                    "x_label": "epoch", "y_label": "validation metric (the one its runs stop on)"}})
    return plots


def code(source: Source, root: Path, cmds: list[str]) -> list[str]:
    """The source files (relative to root) each of these commands can import, in a sorted union."""
    files = set().union(*(source.stage_files(c) for c in cmds))
    return sorted(p.relative_to(root).as_posix() for p in files)


def stage(kind: Kind, source: Source, root: Path, params: dict, task: str, items: list[str] | None) -> dict:
    """A task's stage of a per-task kind (items None): {cmd, deps, params, outs, ...}; else its foreach group over the
    families, {foreach, do: {cmd, deps, ...}}, looping over {family: {model: its model module's file[, space: its
    search space file][, params: its own params key]}}: the key is the family."""
    if items is None:
        values, foreach = {"task": task, "item": task, "of": task, "data": task}, None
        shared = code(source, root, [f"python -m {STAGES}.{kind.module} task={task}"])
        own_deps = []
    elif kind.families == "corpora":  # one item per corpus: the same code for each
        values = {"task": task, "item": "${key}", "data": "${item.data}"}
        foreach = {c: {"data": f"{task}{corpus_suffix(c)}"} for c in items}
        shared = code(source, root, [f"python -m {STAGES}.{kind.module} task={task}"])
        own_deps = []
    else:
        ablated = kind.families in ("ablations", "replication")  # items that may run another family's model
        values = {"task": task, "item": "${key}", "own": "${item.params}", "of": "${item.of}" if ablated else "${key}",
                  "set": "${item.set}", "data": "${item.data}" if ablated else task}
        closures = {f: code(source, root, [f"python -m {STAGES}.{kind.module} task={task} family={f}"]) for f in items}
        own = {f: source.module_file(source.model_module(f)).relative_to(root).as_posix() for f in items}
        base = {f: source.base_family(f) for f in items}
        # a family's model file is its own dep, unless another family's code imports it too
        shared = sorted({p for f, files in closures.items() for p in files
                         if p not in own.values() or any(p in closures[g] and own[g] != p for g in items)})
        tune, named, setting = kind.module == "tune", OWN in kind.params, SET in kind.params
        entries = (params.get(task) or {}).get("ablations") or {}
        corpus = {f: (entries.get(f) or {}).get("corpus") for f in items}
        foreach = {f: {"model": own[f], **({"of": base[f], "data": f"{task}{corpus_suffix(corpus[f])}"}
                                          if ablated else {}),
                       **({"space": space_file(root, f)} if tune else {}),
                       **({"params": own_params(params, task, base[f])} if named else {}),
                       **({"set": f"{task}.{'ablations' if f in entries else 'replication'}.{f}"} if setting else {})}
                   for f in items}
        own_deps = ["${item.model}"] + (["${item.space}"] if tune else [])
    deps = [d.format(profile="${profile}", **values) for d in kind.deps] + shared + own_deps
    arg = "corpus" if kind.families == "corpora" else "family"
    do: dict = {"cmd": f"python -m {STAGES}.{kind.module} task={values['task']}"
                       + (f" {arg}={values['item']}" if items is not None else "") + kind.overrides,
                "deps": list(dict.fromkeys(deps))}
    if kind.params:
        do["params"] = [p.format(**values) for p in kind.params]
    if kind.metrics:
        do["metrics"] = [{m.format(**values): {"cache": False}} for m in kind.metrics]
    if kind.plots:
        do["plots"] = [{p.format(**values): {"cache": False}} for p in kind.plots]
    outs = [o.format(**values) for o in kind.outs] + [{o.format(**values): {"cache": False}} for o in kind.outs_no_cache]
    if outs:
        do["outs"] = outs
    return do if foreach is None else {"foreach": foreach, "do": do}


def own_params(params: dict, task: str, family: str) -> str:
    """The family's own params key: `<task>.family_params.<family>` when params.yaml has that entry; a family without
    one (entries are optional) has `seeds` here, a key its stage names anyway (DVC would fail on a missing key, and
    takes a key twice without complaint)."""
    own = (params.get(task) or {}).get("family_params") or {}
    return f"{task}.family_params.{family}" if family in own else "seeds"


def space_file(root: Path, family: str) -> str:
    """conf/tune/<family>.yaml, the family's search space; a family without one has conf/model/<family>.yaml here
    (already a dep: DVC takes a dep twice without complaint)."""
    own = f"conf/tune/{family}.yaml"
    return own if (root / own).is_file() else f"conf/model/{family}.yaml"


def write(root: Path, check: bool = False) -> bool:
    """Write root/dvc.yaml and docs/pipeline.md's re-run table (unless check); True when both already were current."""
    from attention_lab.core.files import write_text

    current, doc = True, root / DOC  # a copy of the project without docs/ gets dvc.yaml alone
    for path, text in ((root / "dvc.yaml", render(root)), *([(doc, splice(root))] if doc.is_file() else [])):
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        current = False
        if not check:
            write_text(path, text)
    return current


def splice(root: Path) -> str:
    """docs/pipeline.md with rerun_table() between its markers."""
    text = (root / DOC).read_text(encoding="utf-8")
    begin, end = text.index(BEGIN), text.index(END)
    return text[: begin + len(BEGIN)] + "\n" + rerun_table(root) + "\n" + text[end:]


def rerun_table(root: Path) -> str:
    """docs/pipeline.md's "edit this → these stages re-run": every source file under src/, grouped by the stages
    whose deps name it (from render(): a family stage counts its own model file and the files of its whole group)."""
    stages = yaml.safe_load(render(root))["stages"]
    runs: dict[str, list[str]] = {}
    for group, body in stages.items():
        items = body.get("foreach") or {None: None}
        for item in items:
            value = items[item] if isinstance(items, dict) else None
            deps = [d.replace("${item.model}", (value or {}).get("model", "")) for d in body.get("do", body)["deps"]]
            name = f"{group}@{item}" if item is not None else group
            for dep in deps:
                if dep.startswith("src/"):
                    runs.setdefault(dep, []).append(name)
    for path in sorted((root / "src").rglob("*.py")):
        runs.setdefault(path.relative_to(root).as_posix(), [])
    rows: dict[tuple[str, ...], list[str]] = {}
    for path, names in sorted(runs.items()):
        rows.setdefault(tuple(names), []).append(path.removeprefix("src/attention_lab/"))
    sizes = {group: len(body["foreach"]) if "foreach" in body else 1 for group, body in stages.items()}

    def summary(names: tuple[str, ...]) -> str:
        by_group: dict[str, list[str]] = {}
        for name in names:
            group, _, item = name.partition("@")
            by_group.setdefault(group, []).append(item)
        parts = [f"{g} (all {len(items)})" if len(items) == sizes[g] and len(items) > 1 else
                 ", ".join(f"{g}@{i}" if i else g for i in items) for g, items in by_group.items()]
        return "; ".join(parts) or "none"

    lines = ["| edit a file of … | … and these stages re-run |", "|---|---|"]
    for names, paths in sorted(rows.items(), key=lambda kv: (len(kv[0]), kv[1])):
        lines.append(f"| {', '.join(f'`{p}`' for p in paths)} | {summary(names)} |")
    return "\n".join(lines)
