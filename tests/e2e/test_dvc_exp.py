"""DVC's own commands on the tiny pipeline (translate, bahdanau, two seeds), as a user runs them.

`dvc exp run -S` with another family list re-runs that family's stages and the reports alone;
`dvc exp run --queue` then `dvc queue start` trains in a copy DVC deletes and leaves every MLflow
run in the user's mlflow.db; a clone that pulls the outputs from a DVC remote re-runs evaluate,
export and report against its own, empty mlflow.db (runs stand in for the ones it lacks), and
each seed's run holds its own export. No MLFLOW_TRACKING_URI: the default store throughout."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import mlflow
import pytest
import yaml

from attention_lab.core.tracking import ORIGIN_TAG
from attention_lab.pipeline import scratch
from tests.e2e.test_pipeline import GIT_ID
from tests.e2e.test_user_corpora import edit_tiny_profile

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
# a new entry: Hydra's `+` (`translate.ablations={...}` merges into the entries: it cannot add one)
XAVIER = "+translate.ablations.bahdanau_xavier={of: bahdanau, set: {model: {init: xavier}}}"
REPORTS = {"report_translate", "report_claims", "report_index"}


def run(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """A command in cwd, the project's tools on the PATH, no MLFLOW_TRACKING_URI (the default)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT")}
    env.update(GIT_ID, PATH=f"{BIN}:{env['PATH']}", PYTHONUNBUFFERED="1")
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and proc.returncode:
        pytest.fail(
            f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n"
            f"{proc.stderr[-4000:]}"
        )
    return proc


def one_family(params: dict) -> None:
    """tasks: [translate], bahdanau alone, no ablation nor corpus."""
    params["tasks"] = ["translate"]
    params["translate"].update(
        families=["bahdanau"], ablations={}, corpus_ablations={}, corpora={}, replication={}
    )


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The tiny pipeline run to its end by `dvc repro` and committed, in a repository of its own."""
    dest = scratch.copy_project(
        tmp_path_factory.mktemp("exp") / "project", profile="tiny", seeds=[0, 1], edit=one_family
    )
    edit_tiny_profile(dest, "translate", tune={"trials": 0})  # studies are the tiny pipeline's test
    for args in (
        ["attention-lab", "stages"],
        ["git", "init", "-q"],
        ["dvc", "init", "-q"],
        ["dvc", "config", "core.analytics", "false"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "project"],
        ["dvc", "repro"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "results"],
    ):
        run(args, dest)
    return dest


def baseline(project: Path) -> dict:
    """The workspace back at the committed results; their dvc.lock's stages."""
    run(["git", "reset", "-q", "--hard"], project)
    run(["git", "clean", "-qfd"], project)  # mlflow.db and mlartifacts/ are ignored: kept
    run(["dvc", "checkout", "-q", "--force"], project)
    return lock(project)


def lock(project: Path) -> dict:
    return yaml.safe_load((project / "dvc.lock").read_text())["stages"]


def changed(before: dict, after: dict) -> set[str]:
    """The stages whose dvc.lock entry is new or differs."""
    return {name for name, entry in after.items() if before.get(name) != entry}


def runs(store: Path, **tags: str) -> list:
    """The translate runs of a sqlite store with these tags."""
    client = mlflow.MlflowClient(f"sqlite:///{store}")
    query = " and ".join(f"tags.{k} = '{v}'" for k, v in tags.items())
    return client.search_runs([client.get_experiment_by_name("translate").experiment_id], query)


def test_exp_run_with_another_family_list_runs_that_family_and_the_reports(project):
    before = baseline(project)
    out = run(["dvc", "exp", "run", "-S", "translate.families=[bahdanau,luong_dot]"], project)
    lines = out.stdout.splitlines()
    ran = {line.split("'")[1] for line in lines if line.startswith("Running stage")}
    new = {f"{kind}_translate@luong_dot" for kind in ("tune", "train", "evaluate", "export")}
    assert ran == new | REPORTS, out.stdout
    assert changed(before, lock(project)) == new | REPORTS
    shown = json.loads(run(["dvc", "exp", "show", "--json"], project).stdout)
    revs = [r for rev in shown for e in rev.get("experiments") or [] for r in e["revs"]]
    lists = [r["data"]["params"]["params.yaml"]["data"]["translate"]["families"] for r in revs]
    assert ["bahdanau", "luong_dot"] in lists
    assert "luong_dot" in (project / "reports" / "translate.md").read_text()


def test_a_queued_experiment_keeps_its_mlflow_runs_in_the_user_s_store(project):
    before = baseline(project)
    run(["dvc", "exp", "run", "--queue", "-n", "xavier", "-S", XAVIER], project)
    deadline = time.monotonic() + 900
    try:
        run(["dvc", "queue", "start"], project)
        status = run(["dvc", "queue", "status"], project).stdout
        while any(word in status for word in ("Queued", "Running")) and time.monotonic() < deadline:
            time.sleep(5)
            status = run(["dvc", "queue", "status"], project).stdout
    finally:
        run(["dvc", "queue", "stop"], project, check=False)
    logs = run(["dvc", "queue", "logs", "xavier"], project, check=False).stdout
    assert "Success" in status, status + logs
    assert not list((project / ".dvc" / "tmp" / "exps").glob("tmp*")), "DVC kept its copy"
    rev = run(["git", "rev-parse", exp_ref(project, "xavier")], project).stdout.strip()
    ran = yaml.safe_load(run(["git", "show", f"{rev}:dvc.lock"], project).stdout)["stages"]
    assert changed(before, ran) == {
        "train_ablation_translate@bahdanau_xavier",
        "evaluate_ablation_translate@bahdanau_xavier",
        *REPORTS,
    }
    trained = runs(project / "mlflow.db", family="bahdanau_xavier", stage="train")
    assert sorted(r.data.tags["seed"] for r in trained) == ["0", "1"]  # the user's store's
    assert all(r.data.tags["dvc_exp"] == "xavier" for r in trained)  # `dvc exp run`'s name
    assert all("test/bleu" in r.data.metrics for r in trained)
    for r in trained:
        artifacts = Path(r.info.artifact_uri.removeprefix("file://"))
        assert artifacts.is_relative_to(project / "mlartifacts")


def exp_ref(project: Path, name: str) -> str:
    """The git ref of experiment `name` (refs/exps/<baseline>/<name>)."""
    refs = run(["git", "for-each-ref", "--format=%(refname)", "refs/exps/"], project).stdout.split()
    found = [r for r in refs if r.endswith(f"/{name}")]
    assert found, refs
    return found[0]


def test_a_clone_that_pulls_evaluates_exports_and_reports_to_its_own_store(project, tmp_path):
    baseline(project)
    remote, clone = tmp_path / "remote", tmp_path / "clone"
    run(["dvc", "remote", "add", "-d", "disk", str(remote)], project)
    run(["git", "commit", "-qam", "remote"], project)
    run(["dvc", "push"], project)
    run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    run(["dvc", "pull"], clone)
    folder = clone / "models" / "bahdanau" / "checkpoints"
    seeds = {s: json.loads((folder / f"seed{s}/run.json").read_text())["run_id"] for s in (0, 1)}
    out = run(
        [
            "dvc",
            "repro",
            "-f",
            "-s",
            "evaluate_translate@bahdanau",
            "export_translate@bahdanau",
            "report_translate",
        ],
        clone,
    ).stdout
    assert out.count(f"tagged {ORIGIN_TAG}=") == 2, out  # a line a run: evaluate's; export reuses
    comparison = runs(clone / "mlflow.db", kind="comparison")[0].info.run_id
    onnx = {}
    client = mlflow.MlflowClient(f"sqlite:///{clone / 'mlflow.db'}")
    for seed, original in seeds.items():
        [stand_in] = runs(clone / "mlflow.db", **{ORIGIN_TAG: original})
        assert stand_in.data.tags["seed"] == str(seed)
        assert "test/bleu" in stand_in.data.metrics
        assert stand_in.data.tags["mlflow.parentRunId"] == comparison
        graph = client.download_artifacts(
            stand_in.info.run_id, "onnx/encoder.onnx.data", str(tmp_path)
        )
        onnx[seed] = hashlib.sha256(Path(graph).read_bytes()).hexdigest()
    assert onnx[0] != onnx[1], "each seed's run holds its own export"
    served = clone / "models" / "bahdanau" / "onnx" / "encoder.onnx.data"
    assert hashlib.sha256(served.read_bytes()).hexdigest() == onnx[0]  # the first seed's
