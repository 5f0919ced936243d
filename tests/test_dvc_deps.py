"""dvc.yaml follows the code: it is what `attention-lab stages` writes
(attention_lab.pipeline.dvc_yaml), every stage's code deps are the source files its command can
import (attention_lab.core.code_deps, read statically), no dep names a path that does not exist, and
the tooling (serving, the CLI, reports, charts, provenance, repro, ablations, benchmarks) is a dep
of no tune, train, pretrain or evaluate stage."""

from __future__ import annotations

import functools
import re
import shutil
from pathlib import Path

import pytest
import yaml
from dvc.dependency import ParamsDependency

from attention_lab.core.code_deps import Source
from attention_lab.pipeline.dvc_yaml import render, task_families
from attention_lab.pipeline.generated import write
from tests.conftest import ROOT

SOURCE = Source(ROOT / "src", ROOT / "conf")
# core/code_deps.py is not tooling any more: a run's code hash (core/tracking.py) reads the imports
# through it
TOOLING = (
    "src/attention_lab/serving/",
    "src/attention_lab/cli.py",
    "src/attention_lab/project.py",
    "src/attention_lab/pipeline/",
    "src/attention_lab/results/report.py",
    "src/attention_lab/results/charts.py",
    "src/attention_lab/results/ablations.py",
    "src/attention_lab/translate/report.py",
    "src/attention_lab/classify/report.py",
    "src/attention_lab/caption/report.py",
    "benchmarks/",
)
TRAINING = ("tune_", "train_", "finetune_", "pretrain@", "evaluate_")


@functools.cache
def pipeline() -> tuple[tuple[tuple[str, str, tuple[str, ...]], ...], tuple[str, ...]]:
    """((name, cmd, file deps) of every stage, the outputs of every stage), resolved by DVC itself,
    as `dvc repro` sees them; a link (conf/model/<family>.py) as the file it links to, which DVC
    hashes."""
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        stages = tuple(
            (
                s.name,
                s.cmd,
                tuple(target(d.def_path) for d in s.deps if not isinstance(d, ParamsDependency)),
            )
            for s in repo.index.stages
        )
        outs = tuple(o.def_path for s in repo.index.stages for o in s.outs)
    return stages, outs


def target(dep: str) -> str:
    """The path a dep names, relative to the repository: a link's target, else the dep itself."""
    path = ROOT / dep
    return path.resolve().relative_to(ROOT).as_posix() if path.is_symlink() else dep


def code_of(cmd: str) -> set[str]:
    return {p.relative_to(ROOT).as_posix() for p in SOURCE.stage_files(cmd)}


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def test_dvc_yaml_and_the_rerun_table_are_what_the_generator_writes():
    assert write(ROOT, check=True), (
        "dvc.yaml, a link conf/model/<family>.py or the re-run table "
        "of docs/pipeline.md is stale: run `attention-lab stages`"
    )


def test_each_family_stage_names_its_model_module_through_its_link():
    """Every conf/model/<family>.yaml has its link conf/model/<family>.py to its `_target_`'s
    module (what its stages name, so that `foreach: ${<task>.families}` can name it from the family
    alone), and dvc.lock records every link of a stage it has run (`attention-lab stages` gives a
    link the hash recorded for its target)."""
    from dvc.repo import Repo

    families = sorted(p.stem for p in (ROOT / "conf" / "model").glob("*.yaml"))
    for family in families:
        link = ROOT / "conf" / "model" / f"{family}.py"
        assert link.is_symlink(), f"{link} is not a link: run `attention-lab stages`"
        module = SOURCE.module_file(SOURCE.model_module(family))
        assert link.resolve() == module.resolve(), f"{link} links to {link.resolve()}, not {module}"
    lock = yaml.safe_load((ROOT / "dvc.lock").read_text())["stages"]
    with Repo(str(ROOT)) as repo:
        for stage in repo.index.stages:
            links = {d.def_path for d in stage.deps if (ROOT / d.def_path).is_symlink()}
            recorded = {d["path"] for d in lock.get(stage.name, {}).get("deps", [])}
            assert stage.name not in lock or links <= recorded, (
                f"dvc.lock's {stage.name} lacks {sorted(links - recorded)}: `attention-lab stages`"
            )


def test_the_family_lists_are_read_from_params_yaml():
    """The family groups loop over params.yaml's lists, so `dvc exp run -S <task>.families` (or
    `<task>.ablations`) changes the stages DVC runs without rewriting dvc.yaml."""
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert stages["train_translate"]["foreach"] == "${translate.families}"
    assert stages["finetune_classify"]["foreach"] == "${classify.pretrained}"
    assert stages["train_ablation_translate"]["foreach"] == "${translate.ablations}"


def test_stages_resolve():
    names = [name for name, _, _ in pipeline()[0]]
    assert len(names) == len(set(names))
    for expected in (
        "prepare_translate",
        "train_translate@bahdanau",
        "finetune_classify@bert",
        "report_index",
    ):
        assert expected in names


def test_every_dep_exists():
    """A dep is a file or folder in the repository, or (part of) another stage's output."""
    stages, outs = pipeline()
    made = [ROOT / o for o in outs]
    missing = [
        f"{name}: {dep}"
        for name, _, deps in stages
        for dep in deps
        if not (ROOT / dep).exists()
        and not any(inside(ROOT / dep, o) or inside(o, ROOT / dep) for o in made)
    ]
    assert not missing, "deps that name no file or folder (stale paths?):\n" + "\n".join(missing)


@pytest.mark.slow  # a second per stage, every stage: `make test-fast` leaves it out
@pytest.mark.parametrize("name", [name for name, _, _ in pipeline()[0]])
def test_stage_code_deps_are_what_its_command_imports(name):
    """A stage misses no file its command can import; it names only files that its command, or
    (for a file DVC must list once for a whole foreach group) another item its group can have,
    imports; and it names no other family's model module that only that family imports (so an
    edit to one family's model re-runs that family alone)."""
    stages = pipeline()[0]
    _, cmd, deps = next(s for s in stages if s[0] == name)
    code = {d for d in deps if d.startswith("src/")}
    own = code_of(cmd)
    assert not own - code, f"{name} misses files its command imports: {sorted(own - code)}"
    group = [c for n, c, _ in stages if n.rpartition("@")[0] == name.rpartition("@")[0]]
    if "family=" in cmd:  # any family the task's code defines can be an item (`dvc exp run -S`)
        task = cmd.partition("task=")[2].split()[0]
        group += [re.sub(r"family=\S+", f"family={f}", cmd) for f in task_families(SOURCE, task)]
    anyone = set().union(*map(code_of, group))
    assert not code - anyone, (
        f"{name} names files no stage of its group imports: {sorted(code - anyone)}"
    )
    owners: dict[str, set[str]] = {}
    for n, c, _ in stages:
        if "family=" in c:
            family = c.rpartition("family=")[2].split()[0]
            owners.setdefault(
                SOURCE.module_file(SOURCE.model_module(family)).relative_to(ROOT).as_posix(), set()
            ).add(c)
    private = [
        m
        for m in code - own
        if m in owners and not any(m in code_of(c) for c in group if c not in owners[m])
    ]
    assert not private, f"{name} names another family's own model module: {private}"


def test_tooling_is_a_dep_of_no_training_or_evaluate_stage():
    """Editing serving/, cli.py, project.py, benchmarks/ or the report, chart, provenance, repro and
    ablation code re-runs no tune, train, pretrain or evaluate stage."""
    found = [
        f"{name}: {dep}"
        for name, _, deps in pipeline()[0]
        if name.startswith(TRAINING)
        for dep in deps
        if dep.startswith(TOOLING)
    ]
    assert not found, "\n".join(found)


def test_bytecode_in_code_folders_is_dvcignored():
    """DVC hashes a folder dep whole: unless .dvcignore drops __pycache__/, the bytecode Python
    writes beside the sources would change every code folder's hash."""
    from dvc.repo import Repo

    folders = sorted(
        {
            d
            for _, _, deps in pipeline()[0]
            for d in deps
            if (ROOT / d).is_dir() and d.startswith("src/")
        }
    )
    with Repo(str(ROOT)) as repo:
        counted = [
            d for d in folders if not repo.dvcignore.is_ignored_dir(str(ROOT / d / "__pycache__"))
        ]
    assert not counted, (
        f"add `__pycache__/` to .dvcignore: DVC hashes the bytecode in {', '.join(counted)}"
    )


def test_imports_are_read_from_every_kind_of_statement(tmp_path):
    """code_deps follows absolute, relative and function-level imports, `from package import
    module`, the parents' __init__.py, and a task hook's module only where a stage uses that
    hook."""
    pkg = tmp_path / "src" / "attention_lab"
    files = {
        "__init__.py": "",
        "core/__init__.py": "",
        "core/task.py": "",
        "core/a.py": "from . import b\n",
        "core/b.py": "def f():\n    import attention_lab.core.c\n",
        "core/c.py": "",
        "toy/__init__.py": "",
        "toy/task.py": (
            'TASK = Task(build=lazy("attention_lab.toy.module:build"),'
            ' page=lazy("attention_lab.toy.page:page"))\n'
        ),
        "toy/module.py": "",
        "toy/page.py": "",
        "toy/model.py": "from ..core.a import x\n",
        "stages/__init__.py": "",
        "stages/train.py": (
            "from attention_lab.core.task import get_task\nget_task('toy').build(1)\n"
        ),
    }
    for name, text in files.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    (tmp_path / "conf" / "model").mkdir(parents=True)
    (tmp_path / "conf" / "model" / "toy.yaml").write_text(
        "_target_: attention_lab.toy.model.Model\n"
    )
    source = Source(tmp_path / "src", tmp_path / "conf")
    got = {
        p.relative_to(pkg).as_posix()
        for p in source.stage_files("python -m attention_lab.stages.train task=toy family=toy")
    }
    # not toy/page.py: train uses the build hook only
    assert got == {
        "__init__.py",
        "core/__init__.py",
        "core/task.py",
        "core/a.py",
        "core/b.py",
        "core/c.py",
        "toy/__init__.py",
        "toy/task.py",
        "toy/module.py",
        "toy/model.py",
        "stages/__init__.py",
        "stages/train.py",
    }


def test_a_subset_of_tasks_defines_only_their_stages(tmp_path):
    """With params.yaml `tasks: [caption]`, dvc.yaml has no stage of translate or classify."""
    for name in ("conf", "src", "tuned"):
        (tmp_path / name).symlink_to(ROOT / name)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["tasks"] = ["caption"]
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    stages = yaml.safe_load(render(tmp_path))["stages"]
    text = yaml.safe_dump(stages)
    assert "translate" not in text and "classify" not in text
    ablated = (
        {"train_ablation_caption", "evaluate_ablation_caption"}
        if params["caption"].get("ablations")
        else set()
    )
    replicated = (
        {"train_replication_caption", "evaluate_replication_caption"}
        if params["caption"].get("replication")
        else set()
    )
    corpora = (
        {
            "prepare_corpus_caption",
            "tokenize_corpus_caption",
            "train_corpus_ablation_caption",
            "evaluate_corpus_ablation_caption",
        }
        if params["caption"].get("corpus_ablations")
        else set()
    )
    assert set(stages) == {
        "prepare_caption",
        "tokenize_caption",
        "tune_caption",
        "train_caption",
        "evaluate_caption",
        "export_caption",
        "report_caption",
        "report_claims",
        "report_index",
        *ablated,
        *replicated,
        *corpora,
    }


def test_a_user_s_run_writes_dvc_yaml_alone_and_names_what_stages_must_write(tmp_path):
    """`attention-lab repro` rewrites dvc.yaml and no file of docs/ (the re-run table is
    `attention-lab stages`'), and stops before any stage, naming the link and search space that a
    new family lacks."""
    from attention_lab.pipeline.repro import repro
    from attention_lab.pipeline.resolved import BEGIN, END

    (tmp_path / "src").symlink_to(ROOT / "src")
    shutil.copytree(ROOT / "conf", tmp_path / "conf", symlinks=True)
    shutil.copy(ROOT / "conf" / "model" / "bahdanau.yaml", tmp_path / "conf" / "model" / "toy.yaml")
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["tasks"] = ["translate"]
    params["translate"].update(families=["bahdanau", "toy"], ablations={}, replication={})
    params["translate"]["family_params"]["toy"] = {}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    (tmp_path / "dvc.yaml").write_text((ROOT / "dvc.yaml").read_text())
    table = f"# the stages\n{BEGIN}\nan old table\n{END}\n"
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "pipeline.md").write_text(table)
    said: list[str] = []
    assert repro(tmp_path, jobs=1, say=said.append) == 1
    assert (tmp_path / "docs" / "pipeline.md").read_text() == table
    assert "classify" not in (tmp_path / "dvc.yaml").read_text()  # written anew, for `tasks`
    assert "conf/model/toy.py, conf/tune/toy.yaml" in said[-1], said
    assert "run `attention-lab stages`" in said[-1], said
    assert not write(tmp_path, check=True)  # the developer's command would write them and the table


def test_a_pretrained_family_s_replication_fine_tunes_its_own_pretraining(tmp_path):
    """`classify.replication: {bert: 2}`: pretrain_replication@bert writes
    models/replication/pretrained/bert on the fresh seeds, and the replication's fine-tuning and
    evaluation read that, not the family's own encoder."""
    for name in ("conf", "src", "tuned"):
        (tmp_path / name).symlink_to(ROOT / name)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["classify"]["replication"] = {"bert": 2}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    stages = yaml.safe_load(render(tmp_path))["stages"]
    pre = stages["pretrain_replication"]
    assert set(pre["foreach"]) == {"bert"} and pre["do"]["cmd"].endswith("replication=true")
    encoder = "models/replication/pretrained/${key}"
    assert encoder in pre["do"]["outs"]
    assert encoder in stages["finetune_replication_classify"]["do"]["deps"]
    read = stages["evaluate_replication_finetuned"]["do"]["deps"]
    assert f"{encoder}/pretrain.json" in read
    assert not any(d.startswith("models/pretrained/") for d in read)
