"""Every stage of dvc.yaml depends on the code it runs: the project modules its entry point imports (transitively, read
statically) lie in its `deps:`, so `dvc repro` re-runs a stage whenever its code changes. No dep names a path that does
not exist (a stale path after a move), and DVC does not hash the bytecode in the code folders it depends on.

Over-approximate on purpose: the imports of a module are all its import statements (inside functions too), and a
task's lazy hooks ("attention_lab.<task>.<module>:<function>" in <task>/task.py) count as imports of their modules."""

from __future__ import annotations

import ast
import functools
import re
import shlex
from pathlib import Path

import pytest
import yaml
from dvc.dependency import ParamsDependency

from tests.conftest import ROOT

PACKAGE = "attention_lab"
SRC = ROOT / "src"
HOOK = re.compile(rf"^({PACKAGE}(?:\.\w+)+):\w+$")  # core.task.lazy("attention_lab.x.y:function")


def module_file(name: str) -> Path | None:
    """attention_lab.x.y -> src/attention_lab/x/y.py or src/attention_lab/x/y/__init__.py (None: not a module)."""
    base = SRC.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


@functools.cache
def direct_imports(name: str) -> frozenset[str]:
    """The project modules one module names: every import statement anywhere in it (functions included), the module
    after `from package import module`, and the modules of lazy hook strings "attention_lab.x.y:name"."""
    path = module_file(name)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from the module's own package upwards
                parts = package_of(name, path).split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)  # kept below only if it is a module
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (hook := HOOK.match(node.value)):
            found.add(hook.group(1))
    return frozenset(m for m in found if m.split(".")[0] == PACKAGE and module_file(m) is not None)


def closure(roots: set[str]) -> set[Path]:
    """The files of `roots` and of every project module they import, transitively, with the __init__.py of every
    package on the way (importing a.b.c runs a/__init__.py and a/b/__init__.py first)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
        for module in (name, *parents):
            if module not in seen and module_file(module) is not None:
                seen.add(module)
                todo.extend(direct_imports(module))
    return {module_file(m) for m in seen}


def entry_modules(cmd: str) -> set[str]:
    """`python -m attention_lab.stages.X task=T family=F ...` -> the modules that command runs: the entry point, the
    task's registry module attention_lab.T.task (core.task.get_task imports it by name), and the family's model
    module (conf/model/F.yaml `_target_`, built by hydra.utils.instantiate)."""
    args = shlex.split(cmd)
    assert args[:2] == ["python", "-m"] and args[2].startswith(f"{PACKAGE}.stages."), f"unexpected cmd {cmd!r}"
    named = dict(a.split("=", 1) for a in args[3:] if a.startswith(("task=", "family=")))
    roots = {args[2]}
    if "task" in named:
        roots.add(f"{PACKAGE}.{named['task']}.task")
    if "family" in named:
        target = yaml.safe_load((ROOT / "conf" / "model" / f"{named['family']}.yaml").read_text())["_target_"]
        module = next((m for m in (target, target.rpartition(".")[0]) if module_file(m) is not None), None)
        assert module, f"conf/model/{named['family']}.yaml: _target_ {target} is in no module under {SRC}"
        roots.add(module)
    return roots


@functools.cache
def pipeline() -> tuple[tuple[tuple[str, str, tuple[str, ...]], ...], tuple[str, ...]]:
    """((name, cmd, file deps) of every stage, the outputs of every stage), resolved by DVC itself (foreach, vars,
    anchors, interpolation), as `dvc repro` sees them."""
    from dvc.repo import Repo

    with Repo(str(ROOT)) as repo:
        stages = tuple((s.name, s.cmd, tuple(d.def_path for d in s.deps if not isinstance(d, ParamsDependency)))
                       for s in repo.index.stages)
        outs = tuple(o.def_path for s in repo.index.stages for o in s.outs)
    return stages, outs


def inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def test_stages_resolve():
    names = [name for name, _, _ in pipeline()[0]]
    assert len(names) == len(set(names))
    for expected in ("prepare@translate", "train_translate@bahdanau", "finetune_classify@bert", "report_index"):
        assert expected in names


def test_every_dep_exists():
    """A dep is a file or folder in the repository, or (part of) another stage's output."""
    stages, outs = pipeline()
    made = [ROOT / o for o in outs]
    missing = [f"{name}: {dep}" for name, _, deps in stages for dep in deps if not (ROOT / dep).exists()
               and not any(inside(ROOT / dep, o) or inside(o, ROOT / dep) for o in made)]
    assert not missing, "deps that name no file or folder (stale paths?):\n" + "\n".join(missing)


@pytest.mark.parametrize("name", [name for name, _, _ in pipeline()[0]])
def test_stage_deps_cover_its_code(name):
    _, cmd, deps = next(s for s in pipeline()[0] if s[0] == name)
    folders = [(ROOT / d).resolve() for d in deps]
    uncovered = sorted(p.relative_to(ROOT).as_posix() for p in closure(entry_modules(cmd))
                       if not any(inside(p, f) for f in folders))
    assert not uncovered, "\n".join(f"{name}: {p} not covered by deps" for p in uncovered)


def test_bytecode_in_code_folders_is_dvcignored():
    """DVC hashes a folder dep whole: unless .dvcignore drops __pycache__/, the bytecode Python writes beside the
    sources (the package is installed editable) changes every code folder's hash, so every stage looks changed after
    any run and in a fresh clone."""
    from dvc.repo import Repo

    folders = sorted({d for _, _, deps in pipeline()[0] for d in deps if (ROOT / d).is_dir() and d.startswith("src/")})
    with Repo(str(ROOT)) as repo:
        counted = [d for d in folders if not repo.dvcignore.is_ignored_dir(str(ROOT / d / "__pycache__"))]
    assert not counted, f"add `__pycache__/` to .dvcignore: DVC hashes the bytecode in {', '.join(counted)}"
