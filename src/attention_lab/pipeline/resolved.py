"""dvc.yaml's stages as DVC resolves them for params.yaml (each foreach item by name: its cmd, deps,
params and outs), and docs/pipeline.md's re-run table they give (which stages an edit re-runs)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from attention_lab.pipeline.dvc_yaml import render

BEGIN, END = (
    "<!-- reruns:begin (written by `attention-lab stages`; tests/test_dvc_deps.py checks it) -->",
    "<!-- reruns:end -->",
)
RESOLVED = ("cmd", "deps", "params", "outs")  # what expand() gives of each stage


def expand(root: Path) -> dict[str, dict]:
    """{stage: {cmd, deps, params, outs}} of dvc_yaml.render()'s dvc.yaml, resolved for params.yaml
    as DVC does."""
    from attention_lab.core.params import read_params

    params = read_params(root)
    found: dict[str, dict] = {}
    for group, body in yaml.safe_load(render(root))["stages"].items():
        if "foreach" not in body:
            found[group] = {k: body.get(k, []) for k in RESOLVED}
            continue
        items = body["foreach"]
        if isinstance(items, str):  # ${<task>.<key>}
            items = lookup(params, items[2:-1])
        for key, value in items.items() if isinstance(items, dict) else ((i, i) for i in items):
            context = {"key": key, "item": value, "profile": params.get("profile")}
            found[f"{group}@{key}"] = {
                k: interpolate(body["do"].get(k, []), context) for k in RESOLVED
            }
    return found


def lookup(tree, dotted: str):
    """tree's value at a dotted key (`translate.families`)."""
    for part in dotted.split("."):
        tree = tree[part]
    return tree


def interpolate(value, context: dict):
    """`${a.b}` in a string, or in each string (or key: an output's `{path: {cache: false}}`) of a
    list, replaced by its value in context."""
    if isinstance(value, list):
        return [interpolate(v, context) for v in value]
    if isinstance(value, dict):
        return {interpolate(k, context): v for k, v in value.items()}
    return re.sub(r"\$\{([^}]+)\}", lambda m: str(lookup(context, m.group(1))), value)


def splice(root: Path, doc: str) -> str:
    """The page `doc` (docs/pipeline.md) with rerun_table() between its markers."""
    text = (root / doc).read_text(encoding="utf-8")
    begin, end = text.index(BEGIN), text.index(END)
    return text[: begin + len(BEGIN)] + "\n" + rerun_table(root) + "\n" + text[end:]


def rerun_table(root: Path) -> str:
    """docs/pipeline.md's "edit this → these stages re-run": the files of src/, links followed."""
    stages = expand(root)
    runs: dict[str, list[str]] = {}
    for name, body in stages.items():
        named = (
            os.path.relpath((root / d).resolve(), root) if (root / d).is_symlink() else d
            for d in body["deps"]
        )
        for dep in dict.fromkeys(named):
            if dep.startswith("src/"):
                runs.setdefault(dep, []).append(name)
    for path in sorted((root / "src").rglob("*.py")):
        runs.setdefault(path.relative_to(root).as_posix(), [])
    rows: dict[tuple[str, ...], list[str]] = {}
    for path, names in sorted(runs.items()):
        rows.setdefault(tuple(names), []).append(path.removeprefix("src/attention_lab/"))
    sizes: dict[str, int] = {}
    for name in stages:
        sizes[name.partition("@")[0]] = sizes.get(name.partition("@")[0], 0) + 1

    def summary(names: tuple[str, ...]) -> str:
        by_group: dict[str, list[str]] = {}
        for name in names:
            group, _, item = name.partition("@")
            by_group.setdefault(group, []).append(item)
        parts = [
            f"{g} (all {len(items)})"
            if len(items) == sizes[g] and len(items) > 1
            else ", ".join(f"{g}@{i}" if i else g for i in items)
            for g, items in by_group.items()
        ]
        return "; ".join(parts) or "none"

    lines = ["| edit a file of … | … and these stages re-run |", "|---|---|"]
    for names, paths in sorted(rows.items(), key=lambda kv: (len(kv[0]), kv[1])):
        lines.append(f"| {', '.join(f'`{p}`' for p in paths)} | {summary(names)} |")
    return "\n".join(lines)
