"""The project's source files a stage's command can run, read statically from the imports: what
dvc.yaml's code deps list (attention_lab.pipeline.dvc_yaml writes them; tests/test_dvc_deps.py
checks them): the stage's entry module, its task's registry module, its family's model module and
every project module those import, transitively (imports inside functions too, each package's
__init__.py on the way); a task's lazy hook counts only where the stage's code calls it.
Over-approximate on purpose (an import under `if` counts), never under (docs/design.md)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
import shlex
from collections.abc import Callable
from pathlib import Path

import yaml

PACKAGE = "attention_lab"
HOOK = re.compile(rf"^({PACKAGE}(?:\.\w+)+):(\w+)$")  # core.task.lazy("attention_lab.x.y:function")


def hook_fields() -> frozenset[str]:
    """The Task fields that are hooks (functions a stage calls): core.task.Task's Callable
    fields."""
    from attention_lab.core.task import Task

    return frozenset(f.name for f in dataclasses.fields(Task) if f.type in ("Callable", Callable))


@dataclasses.dataclass(frozen=True)
class Source:
    """The project's source tree: src/ (the folder holding attention_lab/) and conf/ (for the
    families' `_target_`)."""

    src: Path
    conf: Path

    def module_file(self, name: str) -> Path | None:
        """attention_lab.x.y -> src/attention_lab/x/y.py or src/attention_lab/x/y/__init__.py (None:
        not a module)."""
        base = self.src.joinpath(*name.split("."))
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
        return None

    @functools.cache  # noqa: B019 (a few Source objects per process, each kept for its life)
    def tree(self, name: str) -> ast.Module:
        path = self.module_file(name)
        return ast.parse(path.read_text(encoding="utf-8"), str(path))

    @functools.cache  # noqa: B019 (a few Source objects per process, each kept for its life)
    def imports(self, name: str, eager: bool = False) -> frozenset[str]:
        """The project modules one module imports: every import statement anywhere in it (functions
        included), and the module after `from package import module`; with `eager`, only those its
        import runs for sure (the statements of its body, not under a def, class, if or try)."""
        path = self.module_file(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in self.tree(name).body if eager else ast.walk(self.tree(name)):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's own package upwards
                    parts = package.split(".")
                    base = ".".join(
                        parts[: len(parts) - node.level + 1]
                        + ([node.module] if node.module else [])
                    )
                else:
                    base = node.module or ""
                found.add(base)
                # kept below only if it is a module
                found.update(f"{base}.{alias.name}" for alias in node.names)
        return frozenset(
            m for m in found if m.split(".")[0] == PACKAGE and self.module_file(m) is not None
        )

    @functools.cache  # noqa: B019 (a few Source objects per process, each kept for its life)
    def hooks(self, name: str) -> dict[str, str]:
        """A task registry module's hooks: {field: module} from its `lazy("module:function")`
        strings."""
        found = {}
        for node in ast.walk(self.tree(name)):
            if (
                isinstance(node, ast.keyword)
                and isinstance(node.value, ast.Call)
                and node.value.args
            ):
                arg = node.value.args[0]
                if (
                    isinstance(arg, ast.Constant)
                    and isinstance(arg.value, str)
                    and (m := HOOK.match(arg.value))
                ):
                    found[node.arg] = m.group(1)
        return found

    @functools.cache  # noqa: B019 (a few Source objects per process, each kept for its life)
    def calls(self, name: str) -> frozenset[str]:
        """The hooks one module uses: `get_task(...).<hook>`, or `<hook>` of a name bound to
        `get_task(...)` or of a parameter annotated `Task` (the stage resolves its task once and
        passes it down)."""

        def is_get_task(node) -> bool:
            return (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", "")) == "get_task"
            )

        nodes = list(ast.walk(self.tree(name)))
        bound = {
            t.id
            for n in nodes
            if isinstance(n, ast.Assign) and is_get_task(n.value)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        bound |= {
            n.arg
            for n in nodes
            if isinstance(n, ast.arg) and getattr(n.annotation, "id", None) == "Task"
        }
        fields = hook_fields()
        return frozenset(
            n.attr
            for n in nodes
            if isinstance(n, ast.Attribute)
            and n.attr in fields
            and (is_get_task(n.value) or getattr(n.value, "id", None) in bound)
        )

    def closure(self, roots: set[str], task: str | None = None, eager: bool = False) -> set[str]:
        """`roots` and every project module they import, transitively, with the __init__.py of each
        package on the way (importing a.b.c runs a/__init__.py and a/b/__init__.py first), and the
        modules of `task`'s hooks that these modules use; with `eager`, only the imports that
        importing `roots` runs for sure (no hooks)."""
        hooks = self.hooks(f"{PACKAGE}.{task}.task") if task else {}
        seen: set[str] = set()
        todo = list(roots)
        while todo:
            name = todo.pop()
            parents = [".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)]
            for module in (name, *parents):
                if module not in seen and self.module_file(module) is not None:
                    seen.add(module)
                    todo.extend(self.imports(module, eager))
                    todo.extend(hooks[h] for h in self.calls(module) if h in hooks and not eager)
        return seen

    def base_family(self, family: str) -> str:
        """The family itself, or for an ablation (params.yaml `<task>.ablations.<name>` or
        `<task>.corpus_ablations.<name>`, beside conf/) the family it is `of`: the one whose model
        file it runs."""
        params = self.conf.parent / "params.yaml"
        if (self.conf / "model" / f"{family}.yaml").is_file() or not params.is_file():
            return family
        tasks = (yaml.safe_load(params.read_text(encoding="utf-8")) or {}).values()
        entries = [
            t.get(key) or {}
            for t in tasks
            if isinstance(t, dict)
            for key in ("ablations", "corpus_ablations")
        ]
        return next((e[family]["of"] for e in entries if family in e), family)

    def model_module(self, family: str) -> str:
        """The module of conf/model/<family>.yaml's `_target_` (an ablation: its family's,
        base_family)."""
        path = self.conf / "model" / f"{self.base_family(family)}.yaml"
        target = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("_target_", "")
        module = next(
            (
                m
                for m in (target, target.rpartition(".")[0])
                if m and self.module_file(m) is not None
            ),
            None,
        )
        if module is None:
            raise ValueError(
                f"{path}: `_target_: {target}` names no class in a module under"
                f" {self.src / PACKAGE}"
            )
        return module

    def stage_files(self, cmd: str) -> list[Path]:
        """The source files the command `python -m attention_lab.stages.X [task=T] [family=F] ...`
        can run."""
        args = shlex.split(cmd)
        if args[:2] != ["python", "-m"] or not args[2].startswith(f"{PACKAGE}.stages."):
            raise ValueError(
                f"unexpected stage command {cmd!r}: expected python -m {PACKAGE}.stages.<stage> ..."
            )
        named = dict(a.split("=", 1) for a in args[3:] if a.startswith(("task=", "family=")))
        roots = {args[2]}
        if "task" in named:
            roots.add(f"{PACKAGE}.{named['task']}.task")
        if "family" in named:
            roots.add(self.model_module(named["family"]))
        return sorted(self.module_file(m) for m in self.closure(roots, named.get("task")))
