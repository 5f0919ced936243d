"""DVC's own commands on the tiny pipeline (translate, bahdanau, two seeds), as a user runs them: `dvc exp run -S`
with another family list re-runs that family's stages and the reports alone; `dvc exp run --queue` then `dvc queue
start` trains in a copy DVC deletes and leaves every MLflow run in the user's mlflow.db; a clone that pulls the
outputs from a DVC remote re-runs evaluate, export and report against its own, empty mlflow.db (runs stand in for
the ones it lacks), and each seed's run holds its own export. No MLFLOW_TRACKING_URI: the default store."""

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
# an entry added (Hydra's `+`: `translate.ablations={...}` would merge into the entries, which cannot add one)
XAVIER = "+translate.ablations.bahdanau_xavier={of: bahdanau, set: {model: {init: xavier}}}"


def run(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    """A command in cwd with the project's tools on the PATH and no MLFLOW_TRACKING_URI (the default store)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "DVC_ROOT")}
    env.update(GIT_ID, PATH=f"{BIN}:{env['PATH']}", PYTHONUNBUFFERED="1")
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and proc.returncode:
        pytest.fail(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def one_family(params: dict) -> None:
    """tasks: [translate], bahdanau alone, no ablation; seeds 0 and 1."""
    params["tasks"] = ["translate"]
    params["translate"].update(families=["bahdanau"], ablations={}, replication={})


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The tiny pipeline run to its end by `dvc repro` and committed, in a git and DVC repository of its own."""
    dest = scratch.copy_project(tmp_path_factory.mktemp("exp") / "project", profile="tiny", seeds=[0, 1],
                                edit=one_family)
    edit_tiny_profile(dest, "translate", tune={"trials": 0})  # studies are the tiny pipeline's test
    for args in (["attention-lab", "stages"], ["git", "init", "-q"], ["dvc", "init", "-q"],
                 ["dvc", "config", "core.analytics", "false"], ["git", "add", "-A"],
                 ["git", "commit", "-qm", "project"], ["dvc", "repro"],
                 ["git", "add", "-A"], ["git", "commit", "-qm", "results"]):
        run(args, dest)
    return dest


def baseline(project: Path) -> dict:
    """The workspace back at the committed results; their dvc.lock's stages."""
    run(["git", "reset", "-q", "--hard"], project)
    run(["git", "clean", "-qfd"], project)  # mlflow.db and mlartifacts/ are ignored: kept
    run(["dvc", "checkout", "-q", "--force"], project)
    return yaml.safe_load((project / "dvc.lock").read_text())["stages"]


def changed(before: dict, after: dict) -> set[str]:
    """The stages whose dvc.lock entry is new or differs."""
    return {name for name, entry in after.items() if before.get(name) != entry}


def runs(store: Path, **tags: str) -> list:
    """The translate runs of a sqlite store with these tags."""
    query = " and ".join(f"tags.{k} = '{v}'" for k, v in tags.items())
    return mlflow.MlflowClient(f"sqlite:///{store}").search_runs(
        [mlflow.MlflowClient(f"sqlite:///{store}").get_experiment_by_name("translate").experiment_id], query)


def test_exp_run_with_another_family_list_runs_that_family_and_the_reports(project):
    before = baseline(project)
    out = run(["dvc", "exp", "run", "-S", "translate.families=[bahdanau,luong_dot]"], project).stdout
    ran = {line.split("'")[1] for line in out.splitlines() if line.startswith("Running stage")}
    new = {f"{kind}_translate@luong_dot" for kind in ("tune", "train", "evaluate", "export")}
    reports = {"report_translate", "report_claims", "report_index"}
    assert ran == new | reports, out
    assert changed(before, yaml.safe_load((project / "dvc.lock").read_text())["stages"]) == new | reports
    shown = json.loads(run(["dvc", "exp", "show", "--json"], project).stdout)
    exps = [e for rev in shown for e in rev.get("experiments") or []]
    params = [r["data"]["params"]["params.yaml"]["data"]["translate"]["families"] for e in exps for r in e["revs"]]
    assert ["bahdanau", "luong_dot"] in params
    assert "luong_dot" in (project / "reports" / "translate.md").read_text()


def test_a_queued_experiment_keeps_its_mlflow_runs_in_the_user_s_store(project):
    before = baseline(project)
    run(["dvc", "exp", "run", "--queue", "-n", "xavier", "-S", XAVIER], project)
    try:
        run(["dvc", "queue", "start"], project)
        deadline = time.monotonic() + 900
        while (status := run(["dvc", "queue", "status"], project).stdout) and \
                any(word in status for word in ("Queued", "Running")) and time.monotonic() < deadline:
            time.sleep(5)
    finally:
        run(["dvc", "queue", "stop"], project, check=False)
    assert "Success" in status, status + run(["dvc", "queue", "logs", "xavier"], project, check=False).stdout
    assert not list((project / ".dvc" / "tmp" / "exps").glob("tmp*")), "DVC kept its temporary copy"
    rev = run(["git", "rev-parse", "refs/exps/" + exp_ref(project, "xavier")], project).stdout.strip()
    lock = yaml.safe_load(run(["git", "show", f"{rev}:dvc.lock"], project).stdout)["stages"]
    assert changed(before, lock) == {"train_ablation_translate@bahdanau_xavier",
                                     "evaluate_ablation_translate@bahdanau_xavier", "report_translate",
                                     "report_claims", "report_index"}
    trained = runs(project / "mlflow.db", family="bahdanau_xavier", stage="train")
    assert sorted(r.data.tags["seed"] for r in trained) == ["0", "1"]  # in the user's store, not the copy's
    assert all(r.data.tags["dvc_exp"] == "xavier" and "test/bleu" in r.data.metrics for r in trained)
    for r in trained:
        assert Path(r.info.artifact_uri.removeprefix("file://")).is_relative_to(project / "mlartifacts")


def exp_ref(project: Path, name: str) -> str:
    """The ref path of experiment `name` under refs/exps/."""
    refs = run(["git", "for-each-ref", "--format=%(refname)", "refs/exps/"], project).stdout.split()
    found = [r for r in refs if r.endswith(f"/{name}")]
    assert found, refs
    return found[0].removeprefix("refs/exps/")


def test_a_clone_that_pulls_the_outputs_evaluates_exports_and_reports_to_its_own_store(project, tmp_path):
    baseline(project)
    remote, clone = tmp_path / "remote", tmp_path / "clone"
    run(["dvc", "remote", "add", "-d", "disk", str(remote)], project)
    run(["git", "commit", "-qam", "remote"], project)
    run(["dvc", "push"], project)
    run(["git", "clone", "-q", str(project), str(clone)], tmp_path)
    run(["dvc", "pull"], clone)
    seeds = {s: json.loads((clone / f"models/bahdanau/checkpoints/seed{s}/run.json").read_text())["run_id"]
             for s in (0, 1)}
    out = run(["dvc", "repro", "-f", "-s", "evaluate_translate@bahdanau", "export_translate@bahdanau",
               "report_translate"], clone).stdout
    assert out.count(f"tagged {ORIGIN_TAG}=") == 2, out  # one line a run: evaluate made it, export found it
    comparison = runs(clone / "mlflow.db", kind="comparison")[0].info.run_id
    onnx = {}
    client = mlflow.MlflowClient(f"sqlite:///{clone / 'mlflow.db'}")
    for seed, original in seeds.items():
        [stand_in] = runs(clone / "mlflow.db", **{ORIGIN_TAG: original})
        assert stand_in.data.tags["seed"] == str(seed) and "test/bleu" in stand_in.data.metrics
        assert stand_in.data.tags["mlflow.parentRunId"] == comparison
        graph = client.download_artifacts(stand_in.info.run_id, "onnx/encoder.onnx.data", str(tmp_path))
        onnx[seed] = hashlib.sha256(Path(graph).read_bytes()).hexdigest()
    assert onnx[0] != onnx[1], "each seed's run holds its own export"
    deployed = clone / "models" / "bahdanau" / "onnx" / "encoder.onnx.data"
    assert hashlib.sha256(deployed.read_bytes()).hexdigest() == onnx[0]  # the folder is the first seed's
