"""The `attention-lab` commands that work on the project rather than on a model: `readme` (results
tables and their provenance), `config` (--explain), `stages` (dvc.yaml), `repro` and `neutral` (the
result-neutral proof) and `ledger`: their arguments (add_parsers) and handlers. Each imports
what it needs lazily.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from attention_lab.arguments import int_in


def cost_table(summary: dict) -> str:
    """README's cost table from reports/cost.json (benchmarks/pipeline_cost.py): per task, its
    stages' wall minutes added up and its costliest family."""
    rows = [
        "| task | stage minutes, added up | costliest family | stages stopped and resumed |",
        "|---|---|---|---|",
    ]
    for task, t in summary["tasks"].items():
        family, seconds = max(t["families"].items(), key=lambda kv: kv[1])
        rows.append(
            f"| {task} | {t['seconds'] / 60:,.1f} | {family} {seconds / 60:,.1f} | {t['stopped']} |"
        )
    source = (
        f"From the logs {', '.join(summary['logs'])} ({summary['date']}, {summary['cpu']};"
        " [reports/cost.md](reports/cost.md))."
    )
    return "\n".join([*rows, "", source, ""])


def fresh_clone_table(summary: dict) -> str:
    """README's fresh-clone table from reports/cost-fresh.json (benchmarks/pipeline_cost.py on the
    logs of a clean clone's `make pipeline`): per task its machine minutes, its compute floor and
    their ratio; last, the whole run."""
    floor = summary["compute_floor"]
    rows = ["| task | machine minutes | compute floor (minutes) | ratio |", "|---|---|---|---|"]
    for t in floor["totals"]:
        ratio = f"{t['ratio']:.1f}×" if t["ratio"] else "—"
        label = (
            f"**all of `make pipeline`** ({t['machine_s'] / 3600:.2f} h)"
            if t["label"] == "fresh clone"
            else t["label"]
        )
        rows.append(
            f"| {label} | {t['machine_s'] / 60:,.1f} | {t['floor_s'] / 60:,.1f} | {ratio} |"
        )
    pieces = len(summary["logs"])
    source = (
        f"Wall time of `make pipeline` in a clean clone (after `make setup`), {pieces}"
        f" piece{'s' * (pieces > 1)} one after another, first log line to last: the logs"
        f" {', '.join(summary['logs'])} ({summary['date']}, {summary['cpu']};"
        " [reports/cost-fresh.md](reports/cost-fresh.md)). Machine minutes: each log's wall time"
        " shared among the stages that ran side by side; floor: FLOPs trained at this machine's"
        f" measured matmul peak ({floor['floor_peak']['gflops']:.1f} GFLOP/s)."
    )
    return "\n".join([*rows, "", source, ""])


def readme(args: argparse.Namespace) -> int:
    """Write README.md's generated parts: each task's results table (from its families' records,
    results.records: the families run so far; the provenance block names the stages not run yet)
    between its markers, and the provenance block (the commit that recorded dvc.lock, what `dvc
    status` says changed since). With --check, write nothing: exit 1 unless the results are fresh,
    agree with dvc.lock, and README.md is what this writes."""
    from attention_lab.core.config import load_config
    from attention_lab.core.files import read_json, write_text
    from attention_lab.core.params import families, read_params
    from attention_lab.core.paths import METRICS, REPORTS
    from attention_lab.core.task import get_task
    from attention_lab.pipeline import provenance
    from attention_lab.results import corpus_ledger, ledger, records
    from attention_lab.results.report import splice_results

    root = Path.cwd()
    params, readme_md = read_params(root), root / "README.md"
    text = current = readme_md.read_text(encoding="utf-8")
    for task in params.get("tasks", []):
        cfg = load_config(root=root, task=task)
        paths = {f: records.metrics_path(cfg, f) for f in families(params, task)}
        # the rest: not run yet
        results = {f: records.read(cfg, f) for f, p in paths.items() if p.is_file()}
        if not results:
            raise FileNotFoundError(
                f"no metrics yet: {', '.join(map(str, paths.values()))} (run `dvc repro` first)"
            )
        text = splice_results(text, get_task(task).table(results, cfg), task)
    if (ledger_json := root / METRICS / "claims.json").is_file():
        found = read_json(ledger_json)
        rows = ledger.headline(found["claims"], found.get("confirmatory") or [])
        text = splice_results(
            text, ledger.readme_table(rows, corpus_ledger.verdicts(root)), "claims"
        )
    if (cost := root / REPORTS / "cost.json").is_file():
        text = splice_results(text, cost_table(read_json(cost)), "cost")
    if (cost := root / REPORTS / "cost-fresh.json").is_file():
        text = splice_results(text, fresh_clone_table(read_json(cost)), "fresh-clone")
    fresh = provenance.freshness(root)
    block = provenance.readme_block(fresh)
    text = provenance.splice_block(text, block)
    if args.check:
        passed, lines = provenance.check_results(root, current, text, fresh)
        print("\n".join(lines))
        return 0 if passed else 1
    write_text(readme_md, text)
    print(f"updated {readme_md}; its provenance block:\n{block}")
    return 0


def stages(args: argparse.Namespace) -> int:
    """Write dvc.yaml, what it names and the re-run table, then record_new_deps(); --check:
    current?"""
    from attention_lab.pipeline.generated import write
    from attention_lab.pipeline.lock import record_new_deps

    current = write(Path.cwd(), check=args.check)
    if args.check and not current:
        print(
            "dvc.yaml, conf/model/<family>.py or docs/pipeline.md's re-run table is not what "
            "`attention-lab stages` writes from params.yaml and the code: run it",
            file=sys.stderr,
        )
        return 1
    print("dvc.yaml is current" if current else "wrote dvc.yaml (and the files its stages name)")
    if not args.check and (recorded := record_new_deps(Path.cwd())):
        more = f"; … ({len(recorded) - 5} more)" if len(recorded) > 5 else ""
        print(
            f"dvc.lock: recorded {len(recorded)} deps its stages lacked (links to files they "
            "record, files their commands cannot import): " + "; ".join(recorded[:5]) + more
        )
    return 0


def config(args: argparse.Namespace) -> int:
    """Print the config a stage of task=<task> family=<family> trains with (YAML), or with --explain
    the layer that set each key (load_config's layers, as it merged them)."""
    import yaml
    from omegaconf import OmegaConf

    from attention_lab.core.config import ConfigError, explain_config, leaf_values
    from attention_lab.core.params import ablations, families, read_params, task_params

    items, explain = list(args.items), args.explain
    # `--explain task=translate ...`: the flag alone, then the items
    if explain is not None and "=" in explain:
        items, explain = [explain, *items], "all"
    stage = {
        k: v for k, _, v in (i.partition("=") for i in items) if k in ("task", "family", "corpus")
    }
    overrides = [i for i in items if i.partition("=")[0] not in ("task", "family", "corpus")]
    task, family, corpus = stage.get("task", "translate"), stage.get("family"), stage.get("corpus")
    root = Path.cwd()
    params = read_params(root)
    task_params(params, root, task)  # an unknown task, named
    valid = families(params, task) + list(ablations(params, task, root))
    # a corpus alone: its prepare stage's config
    if family not in valid and not (family is None and corpus):
        raise ConfigError(
            f"{'no family given' if family is None else f'unknown family {family!r}'} for task"
            f" {task}; give family=<name>, one of {', '.join(valid)} (params.yaml"
            f" `{task}.families`, `{task}.pretrained`, `{task}.ablations`), or corpus=<name>"
        )
    cfg, origins = explain_config(overrides, family=family, root=root, task=task, corpus=corpus)
    if explain is None:
        print(OmegaConf.to_yaml(cfg, resolve=True), end="")
        return 0
    keys = (
        list(origins)
        if explain == "all"
        else [k for k in origins if k == explain or k.startswith(explain + ".")]
    )
    if not keys:
        raise ConfigError(
            f"no key {explain!r} in the config of {task}/{family} (keys look like model.dropout, "
            f"train.lr; `--explain all` lists every one)"
        )

    def show(value) -> str:
        return (
            yaml.safe_dump(value, default_flow_style=True, width=10**6)
            .removesuffix("\n...\n")
            .strip()
        )

    values = leaf_values(OmegaConf.to_container(cfg, resolve=True))
    for key in keys:
        *lower, (layer, _) = origins[key]
        line = f"{key}: {show(values[key])}  <- {layer}"
        if lower:
            line += (
                "  (over "
                + "; ".join(f"{name} = {show(value)}" for name, value in reversed(lower))
                + ")"
            )
        print(line)
    return 0


def neutral(args: argparse.Namespace) -> int:
    """Prove the change result-neutral against --base; when it is, record its code deps
    (pipeline/neutral.py)."""
    from attention_lab.pipeline.neutral import prove

    return prove(
        Path.cwd(),
        args.base,
        args.families,
        Path(args.keep) if args.keep else None,
        args.record,
        args.new_keys,
    )


def ledger(args: argparse.Namespace) -> int:
    """Run (or resume) a real-data ledger and write its page (pipeline/corpus_ledger.py)."""
    from attention_lab.pipeline.corpus_ledger import main

    return main(Path.cwd(), args.name, args.files, args.jobs, args.slots, args.fresh, args.page)


def gpu_or_refuse(root: Path, name: str | None) -> None:
    """Before any stage runs: a trainer on the GPU (`name`, else params.yaml `trainer:`) needs torch
    to see a CUDA GPU; without one, the error says so here rather than Lightning's from inside the
    first training stage."""
    import yaml

    from attention_lab.core.config import (
        CONF_DIR,
        ConfigError,
        cuda_available,
        params_trainer,
        pipeline_trainer,
    )
    from attention_lab.core.params import PARAMS_FILE, read_params

    chosen = (
        pipeline_trainer(root, name, f"--trainer {name}")
        if name
        else params_trainer(read_params(root), root)
    )
    options = (
        yaml.safe_load((root / CONF_DIR / "trainer" / f"{chosen}.yaml").read_text(encoding="utf-8"))
        or {}
    )
    if options.get("accelerator") == "gpu" and not cuda_available():
        import torch

        where = f"--trainer {name}" if name else f"{root / PARAMS_FILE} `trainer: {chosen}`"
        raise ConfigError(
            f"{where}: trains on a CUDA GPU, and torch {torch.__version__} sees none "
            "(torch.cuda.is_available() is False); use cpu, or auto (gpu where torch sees one), or "
            "install a CUDA build of torch (docs/scaling.md)"
        )


def repro(args: argparse.Namespace) -> int:
    """`dvc repro` with the families' chains side by side (pipeline/repro.py), after setting
    params.yaml `trainer:` when asked."""
    from attention_lab.core.config import set_trainer
    from attention_lab.pipeline.repro import repro

    gpu_or_refuse(Path.cwd(), args.trainer)
    # kept in params.yaml: dvc.lock records what ran
    if args.trainer and set_trainer(Path.cwd(), args.trainer):
        print(f"params.yaml: trainer: {args.trainer}", flush=True)
    return repro(
        Path.cwd(),
        args.jobs,
        args.task,
        say=lambda line: print(line, flush=True),
        slots=args.slots,
        allow_missing=args.allow_missing,
    )


def add_parsers(sub) -> None:
    """The project's commands on the `attention-lab` parser (cli.build_parser's subparsers)."""
    r = sub.add_parser(
        "readme",
        help="write README.md's results tables (from metrics/) and their provenance (git, "
        "dvc.lock, `dvc status`)",
    )
    r.add_argument(
        "--check",
        action="store_true",
        help=(
            "write nothing; fail (exit 1) while dvc.lock is stale, the committed results disagree"
            " with it, or README.md is not what `readme` writes (make check-results)"
        ),
    )
    r.set_defaults(func=readme)
    f = sub.add_parser(
        "config",
        help="print the config a stage trains with, or with --explain which layer set a value "
        "(load_config's layers, as it merged them)",
    )
    f.add_argument(
        "items",
        nargs="*",
        metavar="task=<task> family=<family> [key=value ...]",
        help=(
            "the stage's arguments and overrides, as `python -m attention_lab.stages.train` takes"
            " them"
        ),
    )
    f.add_argument(
        "--explain",
        nargs="?",
        const="all",
        default=None,
        metavar="KEY",
        help=(
            "for KEY (a leaf such as model.input_feeding, or a section such as model), or every key"
            " without one: its value, the layer that set it and the values of the layers below it"
        ),
    )
    f.set_defaults(func=config)
    w = sub.add_parser(
        "stages",
        help="write dvc.yaml from params.yaml (`tasks`) and the code's "
        "imports (repro writes dvc.yaml first), the links conf/model/<family>.py "
        "its stages name and docs/pipeline.md's re-run table",
    )
    w.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 unless they are current"
    )
    w.set_defaults(func=stages)
    d = sub.add_parser(
        "repro", help="`dvc repro` with the families' chains of stages side by side (make pipeline)"
    )
    d.add_argument(
        "--jobs",
        type=int_in(1, 64),
        default=os.cpu_count() or 1,
        help="chains at once, one thread each (default: the machine's cores, %(default)s)",
    )
    d.add_argument(
        "--task",
        action="append",
        default=None,
        help="only this task's stages and the reports reading "
        "them (repeatable; default: every task in params.yaml)",
    )
    d.add_argument(
        "--slots",
        type=int_in(1, 256),
        default=os.cpu_count() or 1,
        help=(
            "training runs at once across every chain and worker: one pool (default: the machine's "
            "cores, %(default)s)"
        ),
    )
    d.add_argument(
        "--trainer",
        default=None,
        metavar="NAME",
        help="set params.yaml `trainer:` first (cpu, gpu, auto: "
        "gpu where torch sees a CUDA GPU; it stays set, and the stages that train re-run on it)",
    )
    d.add_argument(
        "--allow-missing",
        action="store_true",
        help="skip the stages whose only change is data this machine lacks (dvc repro "
        "--allow-missing: a clone whose git has the outputs, not the models)",
    )
    d.set_defaults(func=repro)
    e = sub.add_parser(
        "ledger",
        help=(
            "the claims ledger on a real corpus (conf/ledgers/<name>.yaml): the pipeline in a copy"
            " of the project on its files (data/ledgers/<name>/, resumed where it stopped), then"
            " reports/ledgers/<name>.md"
        ),
    )
    e.add_argument(
        "name", help="a spec of conf/ledgers/ (multi30k, yelp, coco_mini) or a path to one"
    )
    e.add_argument(
        "--files",
        default=None,
        metavar="DIR",
        help="the folder holding the corpus's files (default: the spec's `files`)",
    )
    e.add_argument(
        "--jobs", type=int_in(1, 64), default=1, help="chains at once (default: %(default)s)"
    )
    e.add_argument(
        "--slots",
        type=int_in(1, 256),
        default=None,
        help="training runs at once (default: the machine's cores)",
    )
    e.add_argument("--fresh", action="store_true", help="start the copy anew (default: resume it)")
    e.add_argument(
        "--page",
        action="store_true",
        help="only write the page from results/ledgers/<name>/ (after "
        "committing them, so the page reads the runs' commit)",
    )
    e.set_defaults(func=ledger)
    n = sub.add_parser(
        "neutral",
        help=(
            "prove the working tree's change result-neutral against a base commit (the tiny-profile"
            " training of every family whose stages it stales bit for bit, their quick-profile"
            " configs equal), then record its code deps in dvc.lock so that nothing re-runs"
        ),
    )
    n.add_argument(
        "--base", default="HEAD", help="the commit to prove against (default: %(default)s)"
    )
    n.add_argument(
        "--families",
        nargs="+",
        default=None,
        metavar="FAMILY",
        help="prove these families only (a quick look: records nothing)",
    )
    n.add_argument(
        "--keep",
        default=None,
        metavar="DIR",
        help="run in DIR and keep it (default: a temporary folder)",
    )
    n.add_argument(
        "--no-record",
        dest="record",
        action="store_false",
        help="prove only; leave dvc.lock as it is",
    )
    n.add_argument(
        "--new-key",
        dest="new_keys",
        action="append",
        default=[],
        metavar="KEY",
        help=(
            "a config key the change adds (e.g. pool.gpu_share) or drops (a rename: both keys): the"
            " quick-profile configs and runs' configs are compared without it, and the proof prints"
            " its value (repeat for several)"
        ),
    )
    n.set_defaults(func=neutral)
