"""Any subset of `tasks` runs to its end: with params.yaml `tasks: [<task>]`, `attention-lab stages`
then a plain `dvc repro` (as docs/data.md tells users) finish with that task's report, and no
committed file of another task is touched (the project is a git repository holding the committed
tuned/, metrics/, results/ and reports/; the family's own study journal, committed with tuned/,
gains the tiny profile's study)."""

from __future__ import annotations

import shutil

import pytest
import yaml

from attention_lab.pipeline import scratch
from tests.conftest import ROOT, copy_project
from tests.e2e.test_pipeline import sh

pytestmark = pytest.mark.slow
ONE_FAMILY = {"translate": "bahdanau", "classify": "han", "caption": "show_attend_tell"}


@pytest.mark.parametrize("task", list(ONE_FAMILY))
def test_one_task_runs_to_its_report_and_touches_no_other_task(task, tmp_path):
    dest = copy_project(tmp_path / "project")
    for name in ("tuned", "metrics", "results", "reports"):
        shutil.copytree(ROOT / name, dest / name)
    sh(["git", "init", "-q"], dest)
    sh(["dvc", "init", "-q"], dest)
    sh(["git", "add", "-A"], dest)
    sh(["git", "commit", "-qm", "project"], dest)
    params = yaml.safe_load((dest / "params.yaml").read_text())
    params["tasks"] = [task]
    params[task]["families"] = [ONE_FAMILY[task]]
    params[task].pop("pretrained", None)
    scratch.drop_orphans(params)  # every ablation has stages: as docs/data.md says
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    sh(["attention-lab", "stages"], dest)
    listed = sh(["dvc", "stage", "list", "--name-only"], dest).stdout.split()
    assert not [s for s in listed if any(other in s for other in ONE_FAMILY if other != task)], (
        listed
    )
    sh(["dvc", "repro"], dest)
    assert (dest / "reports" / f"{task}.md").is_file()
    changed = [
        line[3:]
        for line in sh(
            ["git", "status", "--porcelain", "--untracked-files=no"], dest
        ).stdout.splitlines()
    ]
    others = [
        p
        for p in changed
        if any(o in p for o in ONE_FAMILY if o != task)
        or (
            p.startswith("tuned/")
            and p not in {f"tuned/{ONE_FAMILY[task]}.{ext}" for ext in ("yaml", "journal")}
        )
    ]
    assert not others, f"files of other tasks changed: {others}"
