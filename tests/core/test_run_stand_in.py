"""The default MLflow store follows DVC's repository ($DVC_ROOT, which `dvc exp run --queue` sets
in its temporary copy), and a run folder whose run.json names a run this store lacks (outputs
pulled from a DVC remote) gets a run standing in for it, made once, with the run's config."""

from __future__ import annotations

import json

import mlflow
from omegaconf import OmegaConf

from attention_lab.core import tracking
from attention_lab.core.config import load_config


def test_the_default_store_is_dvc_s_repository_s(project, monkeypatch, tmp_path):
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.delenv("DVC_ROOT", raising=False)
    assert tracking.default_tracking_uri(project) == f"sqlite:///{project / 'mlflow.db'}"
    monkeypatch.setenv("DVC_ROOT", str(tmp_path))  # a queued experiment's copy: the user's checkout
    assert tracking.default_tracking_uri(project) == f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "gone"))
    assert tracking.default_tracking_uri(project) == f"sqlite:///{project / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")  # the user's server wins
    assert tracking.default_tracking_uri(project) == "http://127.0.0.1:5000"


def test_a_run_this_store_lacks_gets_one_stand_in_with_its_config(project, tmp_path, capsys):
    cfg = load_config(root=project, family="bahdanau")
    elsewhere = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'other.db'}")  # where it trained
    original = elsewhere.create_run(elsewhere.create_experiment("translate")).info.run_id
    folder = project / "models" / "bahdanau" / "checkpoints" / "seed1"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"run_id": original}))
    OmegaConf.save(OmegaConf.merge(cfg, {"seed": 1}), folder / "config.yaml")
    with tracking.reopen_run(cfg, folder) as run:
        mlflow.log_metric("test/bleu", 12.5)
    said = capsys.readouterr().out
    assert said.count(f"{tracking.ORIGIN_TAG}={original}") == 1 and "MLFLOW_TRACKING_URI" in said
    client = mlflow.MlflowClient(tracking.tracking_uri(cfg))
    made = client.get_run(run.info.run_id)
    assert made.info.run_name == "bahdanau-seed1" and made.data.metrics["test/bleu"] == 12.5
    assert made.data.tags[tracking.ORIGIN_TAG] == original and made.data.tags["seed"] == "1"
    assert made.data.tags["stage"] == "train"
    assert made.data.params["model._target_"] == cfg.model._target_
    assert "config.yaml" in {a.path for a in client.list_artifacts(made.info.run_id)}
    with tracking.reopen_run(cfg, folder) as again:  # export after evaluate: that run, unsaid
        pass
    assert again.info.run_id == run.info.run_id and not capsys.readouterr().out
    assert tracking.local_run(cfg, original) == run.info.run_id
    (folder / "run.json").write_text(json.dumps({"run_id": run.info.run_id}))  # a run it has
    with tracking.reopen_run(cfg, folder) as own:
        pass
    assert own.info.run_id == run.info.run_id
