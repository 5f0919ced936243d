"""End to end: `attention-lab ledger` on real corpora (the `shared_data` fixture; skipped without
them), on the tiny profile: the whole pipeline in the ledger's copy, its page and README's verdicts.
Photo captions come from COCO's caption JSON (coco_mini), text from Multi30k's files with
bentrevett's BLEU flavour beside ours."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from attention_lab.pipeline import progress
from attention_lab.pipeline.corpus_ledger import PROGRESS
from attention_lab.pipeline.neutral import _stable
from attention_lab.pipeline.scratch import init_repo
from attention_lab.results import corpus_ledger
from tests.conftest import ROOT, copy_project
from tests.e2e.test_pipeline import sh

pytestmark = pytest.mark.slow


def run_ledger(tmp_path: Path, name: str, files: Path, **changes) -> tuple[Path, dict]:
    """The shipped spec `name` with `changes`, on the tiny profile, run by `attention-lab ledger` in
    a copy of this checkout; (the copy, its collected claims by id)."""
    project = copy_project(tmp_path / "project")
    init_repo(project)
    spec = {
        **yaml.safe_load((ROOT / "conf" / "ledgers" / f"{name}.yaml").read_text()),
        "profile": "tiny",
        **changes,
    }
    path = project / "conf" / "ledgers" / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    sh(["attention-lab", "ledger", name, "--files", str(files), "--slots", "2"], project)
    found = json.loads((project / "results" / "ledgers" / name / "claims.json").read_text())
    return project, {r["id"]: r for r in found["claims"]}


def test_coco_captions_through_the_ledger(tmp_path, shared_data):
    project, rows = run_ledger(tmp_path, "coco_mini", shared_data / "coco_mini", seeds=[0, 1])
    assert {r["task"] for r in rows.values()} == {"caption"}
    copy = project / "data" / "ledgers" / "coco_mini"
    stats = json.loads((copy / "data" / "prepared" / "caption" / "stats.json").read_text())
    assert (
        stats["train"]["photos"] + stats["valid"]["photos"] == 80 and stats["test"]["photos"] == 79
    )
    # no digit boxes on photos
    assert rows["xu2015-where"]["verdict"] == "not measurable on this data"
    # 72 photos decide nothing, and the page says so
    for claim in ("xu2015-soft", "vinyals2015-once"):
        verdict = rows[claim]["verdict"]
        assert verdict in ("inconclusive", "not measurable on this data"), rows[claim]
    page = (project / "reports" / "ledgers" / "coco_mini.md").read_text()
    assert "# The claims on coco_mini" in page and "cannot decide here" in page
    assert "| `./ (" in page  # the folder's checksum
    assert "| `show_attend_tell` |" in page  # its compute row
    assert set(corpus_ledger.verdicts(project)) == {"coco_mini"}
    # the same files and command on the same machine: the same figures from a fresh copy
    collected = project / "results" / "ledgers" / "coco_mini"
    before = {f: (collected / f).read_text() for f in ("claims.json", "summary.json")}
    sh(
        ["attention-lab", "ledger", "coco_mini", "--files", str(shared_data / "coco_mini")]
        + ["--fresh", "--slots", "2"],
        project,
    )
    assert (collected / "claims.json").read_text() == before["claims.json"]
    after = (collected / "summary.json").read_text()
    assert figures(after, project) == figures(before["summary.json"], project)
    # another clone: the progress a commit carried, no copy and no DVC cache; nothing trains again
    progress.save(copy, collected / PROGRESS, ("origin.json",))
    shutil.rmtree(copy)
    done = sh(
        ["attention-lab", "ledger", "coco_mini", "--files", str(shared_data / "coco_mini")],
        project,
    )
    said = done.stdout + done.stderr
    # the prepared data alone again (the page reads its split sizes): no model is trained
    assert "finished stages restored" in said and "lacks: prepare_caption\n" in said
    assert "Running stage 'train_caption" not in said
    assert (collected / "claims.json").read_text() == before["claims.json"]
    after = (collected / "summary.json").read_text()
    assert figures(after, project) == figures(before["summary.json"], project)
    assert not (collected / PROGRESS).exists()  # gone once collected


def figures(summary: str, project: Path) -> dict:
    """A ledger's summary.json without what differs between two identical runs (timings, run ids:
    the result-neutral proof's own filter), the project's path written as <root>."""
    return _stable(json.loads(summary), str(project))
