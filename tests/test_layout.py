"""The package's layers (docs/design.md, "Where the code lives"): imports point one way, no module
imports itself back, and what serves a model (serving/, infer/, each task's serve.py) never imports
torch."""

from __future__ import annotations

import ast

import pytest

from attention_lab.core.code_deps import PACKAGE, Source
from tests.conftest import ROOT

# lowest first: a module imports from its own layer or the ones below it, never from a higher one
LAYERS = (
    ("core",),
    ("infer",),
    ("nn",),
    ("train", "results"),
    ("translate", "classify", "caption"),
    ("stages", "serving"),
    ("pipeline", "cli", "project", "arguments"),
)
LAYER = {folder: rank for rank, folders in enumerate(LAYERS) for folder in folders}
# serving's closure: these folders, and each task's serve.py with its readers
SERVING = ("core", "infer", "serving")
HEAVY = ("torch", "lightning")
SOURCE = Source(ROOT / "src", ROOT / "conf")


def modules() -> list[str]:
    src = ROOT / "src"
    return sorted(
        ".".join(p.relative_to(src).with_suffix("").parts).removesuffix(".__init__")
        for p in (src / PACKAGE).rglob("*.py")
    )


def layer(module: str) -> int | None:
    """The rank of a module's top folder (None: the package's own __init__)."""
    parts = module.split(".")
    return LAYER[parts[1]] if len(parts) > 1 else None


def test_every_folder_has_a_layer():
    assert {m.split(".")[1] for m in modules() if "." in m} == set(LAYER)


def test_imports_point_one_way():
    upward = [
        f"{m} -> {i}"
        for m in modules()
        for i in SOURCE.imports(m)
        if layer(i) is not None and layer(m) is not None and layer(i) > layer(m)
    ]
    assert not upward, "a lower layer imports a higher one:\n" + "\n".join(upward)


def test_no_import_loop():
    graph = {m: {i for i in SOURCE.imports(m) if i != PACKAGE} for m in modules()}
    loops = []

    def visit(module: str, path: list[str], done: set[str]) -> None:
        if module in path:
            loops.append(" -> ".join(path[path.index(module) :] + [module]))
            return
        if module in done:
            return
        for nxt in graph.get(module, ()):
            visit(nxt, [*path, module], done)
        done.add(module)

    done: set[str] = set()
    for module in graph:
        visit(module, [], done)
    assert not loops, "import loops:\n" + "\n".join(sorted(set(loops)))


def heavy_imports(module: str) -> set[str]:
    """torch or lightning, where a module imports them anywhere in it (functions included)."""
    found = set()
    for node in ast.walk(SOURCE.tree(module)):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else [node.module]
            if isinstance(node, ast.ImportFrom) and node.module and not node.level
            else []
        )
        found.update(n.split(".")[0] for n in names if n.split(".")[0] in HEAVY)
    return found


def serves(module: str) -> bool:
    """A module serving may reach: core/, infer/, serving/, a task's serve.py, its data readers, the
    packages."""
    parts = module.split(".")
    return len(parts) < 3 or parts[1] in SERVING or parts[2] in ("serve", "data")


@pytest.mark.parametrize("root", ["serving", "infer"])
def test_serving_stays_in_its_folders_and_never_imports_torch(root):
    folder = ROOT / "src" / PACKAGE / root
    closure = SOURCE.closure(
        {f"{PACKAGE}.{root}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"}
    )
    assert f"{PACKAGE}.infer.runtime" in closure
    assert not [m for m in closure if not serves(m)], f"{root}/ reaches beyond serving's folders"
    assert not {m: h for m in closure if (h := heavy_imports(m))}, (
        f"{root}/ imports torch or lightning"
    )
