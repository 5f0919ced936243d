"""What `attention-lab stages` writes from params.yaml and the code: dvc.yaml (dvc_yaml.render), the
model links conf/model/<family>.py, an empty search space for a family without one, and
docs/pipeline.md's re-run table (resolved.rerun_table); `attention-lab repro` writes dvc.yaml
alone."""

from __future__ import annotations

import os
from pathlib import Path

from attention_lab.core.code_deps import Source
from attention_lab.core.paths import CONF_DIR
from attention_lab.pipeline import resolved
from attention_lab.pipeline.dvc_yaml import model_link, render, search_space

DOC = "docs/pipeline.md"


def links(root: Path) -> dict[Path, str]:
    """{conf/model/<family>.py: the relative path of the family's model module}, every family."""
    source = Source(root / "src", root / CONF_DIR)
    found = {}
    for path in sorted((root / CONF_DIR / "model").glob("*.yaml")):
        link = root / model_link(path.stem)
        target = source.module_file(source.model_module(path.stem))
        found[link] = os.path.relpath(target, link.parent)
    return found


def spaces(root: Path) -> dict[Path, str]:
    """{conf/tune/<family>.yaml: an empty search space} for each conf/model family without one."""
    note = (
        "# {family} has no search space: not tuned (written by `attention-lab stages`; "
        "replace {{}} by {{<config key>: {{low: L, high: H}}, ...}} to tune it)\n{{}}\n"
    )
    return {
        root / search_space(p.stem): note.format(family=p.stem)
        for p in sorted((root / CONF_DIR / "model").glob("*.yaml"))
        if not (root / search_space(p.stem)).is_file()
    }


def missing(root: Path) -> list[str]:
    """The links and search spaces the stages of params.yaml's items name that are not there."""
    from attention_lab.core.params import ablations, read_params

    params = read_params(root)
    wanted: set[str] = set()
    for task in params.get("tasks", []):
        section = params.get(task) or {}
        listed = [*(section.get("families") or []), *(section.get("pretrained") or [])]
        wanted.update(p for f in listed for p in (model_link(f), search_space(f)))
        wanted.update(model_link(e["of"]) for e in ablations(params, task, root).values())
    return sorted(p for p in wanted if not (root / p).is_file())


def write(root: Path, check: bool = False, developer: bool = True) -> bool:
    """Write dvc.yaml (developer: also what it names, the re-run table); True if all were so."""
    from attention_lab.core.files import write_text

    current, doc = True, root / DOC  # a copy of the project without docs/ gets dvc.yaml alone
    texts = [(root / "dvc.yaml", render(root))]
    if developer:
        texts += [
            *spaces(root).items(),
            *([(doc, resolved.splice(root, DOC))] if doc.is_file() else []),
        ]
    for path, text in texts:
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            continue
        current = False
        if not check:
            write_text(path, text)
    if developer:
        current = link(root, check) and current
    return current


def link(root: Path, check: bool = False) -> bool:
    """Make conf/model/<family>.py the links links() wants (none for gone families); were they?"""
    wanted = links(root)
    stale = [
        p for p in (root / CONF_DIR / "model").glob("*.py") if p.is_symlink() and p not in wanted
    ]
    wrong = [p for p, target in wanted.items() if not (p.is_symlink() and os.readlink(p) == target)]
    if not check:
        for path in [*stale, *wrong]:
            path.unlink(missing_ok=True)
        for path in wrong:
            path.symlink_to(wanted[path])
    return not stale and not wrong
