"""pipeline/progress.py on a real DVC project: the finished stages saved with the outputs git
keeps, restored into a clone without DVC's cache, and `dvc repro --allow-missing` running only
what was not finished."""

import os
import subprocess
import sys
from pathlib import Path

import yaml

from attention_lab.pipeline import progress

# a: the model (cached, as a checkpoint is); b, c: what git keeps; d: an export of the model
PIPELINE = {
    "stages": {
        "a": {"cmd": "cp in.txt model.bin && echo a >> ran.log", "deps": ["in.txt"],
              "outs": ["model.bin"]},
        "b": {"cmd": "wc -c model.bin > metric.txt && echo b >> ran.log", "deps": ["model.bin"],
              "outs": [{"metric.txt": {"cache": False}}]},
        "c": {"cmd": "cat metric.txt > report.txt && echo c >> ran.log", "deps": ["metric.txt"],
              "outs": [{"report.txt": {"cache": False}}]},
        "d": {"cmd": "cp model.bin export.bin && echo d >> ran.log", "deps": ["model.bin"],
              "outs": ["export.bin"]},
    }
}  # fmt: skip


def sh(cwd: Path, *args: str) -> str:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout


def project(path: Path) -> Path:
    """A fresh clone: the pipeline and its input, git and DVC, no cache."""
    path.mkdir()
    (path / "dvc.yaml").write_text(yaml.safe_dump(PIPELINE), encoding="utf-8")
    (path / "in.txt").write_text("the input\n", encoding="utf-8")
    (path / ".gitignore").write_text("ran.log\n", encoding="utf-8")
    sh(path, "git", "init", "-q")
    sh(path, "dvc", "init", "-q")
    return path


def ran(path: Path) -> list[str]:
    log = path / "ran.log"
    return log.read_text(encoding="utf-8").split() if log.is_file() else []


def test_a_finished_pipeline_resumes_on_a_clone_without_running_anything(tmp_path):
    first = project(tmp_path / "first")
    sh(first, "dvc", "repro", "-q")
    assert progress.save(first, tmp_path / "saved") == 4
    # what git keeps, and nothing DVC caches
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == [
        "dvc.lock",
        "metric.txt",
        "report.txt",
    ]
    clone = project(tmp_path / "clone")
    assert progress.restore(tmp_path / "saved", clone) == (4, [])
    sh(clone, "dvc", "repro", "--allow-missing")
    assert ran(clone) == []
    assert (clone / "report.txt").read_text() == (first / "report.txt").read_text()


def test_a_stage_whose_model_an_unfinished_stage_needs_runs_again(tmp_path):
    first = project(tmp_path / "first")
    sh(first, "dvc", "repro", "-q", "b")  # a and b finished; c and d not
    (first / "report.txt").write_text("written by no finished stage\n", encoding="utf-8")
    assert progress.save(first, tmp_path / "saved") == 2
    assert not (tmp_path / "saved" / "report.txt").exists()
    clone = project(tmp_path / "clone")
    # d needs the model, which this clone lacks: a runs again; b stays (the same model again)
    assert progress.restore(tmp_path / "saved", clone) == (1, ["a"])
    sh(clone, "dvc", "repro", "--allow-missing")
    assert sorted(ran(clone)) == ["a", "c", "d"]
    assert (clone / "export.bin").read_text() == "the input\n"
    assert "modified" not in sh(clone, "dvc", "status")


def test_nothing_recorded_restores_nothing(tmp_path):
    first = project(tmp_path / "first")
    assert progress.save(first, tmp_path / "saved") == 0
    clone = project(tmp_path / "clone")
    assert progress.restore(tmp_path / "saved", clone) == (0, [])
    sh(clone, "dvc", "repro", "--allow-missing")
    assert sorted(ran(clone)) == ["a", "b", "c", "d"]


def test_following_saves_as_stages_finish(tmp_path):
    first = project(tmp_path / "first")
    with progress.following(first, tmp_path / "saved", also=("in.txt",), every=0.05):
        sh(first, "dvc", "repro", "-q")
    saved = tmp_path / "saved"
    assert (saved / "dvc.lock").read_text() == (first / "dvc.lock").read_text()
    assert (saved / "in.txt").is_file() and (saved / "report.txt").is_file()


def test_an_output_a_reader_outside_the_pipeline_needs_is_made_again(tmp_path):
    first = project(tmp_path / "first")
    sh(first, "dvc", "repro", "-q")
    progress.save(first, tmp_path / "saved")
    clone = project(tmp_path / "clone")
    assert progress.restore(tmp_path / "saved", clone, needed=("model.bin",)) == (3, ["a"])
    sh(clone, "dvc", "repro", "--allow-missing")
    assert ran(clone) == ["a"]  # b, c and d: the same model again
