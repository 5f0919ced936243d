"""A family in three edits (docs/design.md): in a scratch copy, its model class
(tests/e2e/new_family/toy_search.py, built on nn/attention.py), conf/model/toy_search.yaml and, in
params.yaml, its name in `translate.families` and its entry `translate.family_params.toy_search:
{}`; nothing else. `attention-lab stages` then writes what its stages name (the link
conf/model/toy_search.py, an empty search space), and `dvc repro` runs them on the tiny profile:
tuned (it has no search space: not tuned, and it says so), trained, evaluated and exported."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from attention_lab.results import records
from tests.conftest import copy_project
from tests.e2e.test_pipeline import sh

pytestmark = pytest.mark.slow
HERE = Path(__file__).parent / "new_family"


def test_a_new_family_takes_three_edits_and_runs_its_stages(tmp_path, monkeypatch):
    dest = copy_project(tmp_path / "project")
    # the stages import the copy's code, its new module included
    monkeypatch.setenv("PYTHONPATH", str(dest / "src"))
    sh(["git", "init", "-q"], dest)
    sh(["dvc", "init", "-q"], dest)
    sh(["git", "add", "-A"], dest)
    sh(["git", "commit", "-qm", "project"], dest)

    shutil.copy(
        HERE / "toy_search.py",
        dest / "src" / "attention_lab" / "translate" / "models" / "toy_search.py",
    )
    shutil.copy(HERE / "toy_search.yaml", dest / "conf" / "model" / "toy_search.yaml")
    params = (dest / "params.yaml").read_text()
    last = "    - transformer          # Vaswani et al. 2017\n"
    params = params.replace(last, last + "    - toy_search\n", 1)
    own = "    transformer: {}\n"
    (dest / "params.yaml").write_text(params.replace(own, own + "    toy_search: {}\n", 1))
    sh(["git", "add", "-N", "."], dest)
    stat = sh(["git", "diff", "--stat"], dest).stdout
    assert stat.splitlines()[-1].strip().startswith("3 files changed"), stat
    for path in (
        "params.yaml",
        "conf/model/toy_search.yaml",
        "src/attention_lab/translate/models/toy_search.py",
    ):
        assert path in stat, stat

    sh(["attention-lab", "stages"], dest)
    stages = sh(["dvc", "stage", "list", "--name-only"], dest).stdout.split()
    assert {
        f"{kind}_translate@toy_search" for kind in ("tune", "train", "evaluate", "export")
    } <= set(stages)
    log = sh(
        ["dvc", "repro", "export_translate@toy_search", "evaluate_translate@toy_search"], dest
    ).stdout
    assert "not tuned" in log
    record = records.read_at(dest, "translate", "toy_search")
    assert record["family"] == "toy_search" and "test/bleu" in record
    assert (dest / "models" / "toy_search" / "onnx" / "parity.json").is_file()
