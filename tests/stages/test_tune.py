"""The tune stage: the study, MLflow parent + nested trial runs, tuned/<family>.yaml merged by
training, resuming, the parameter cap, the best trial taken as the first seed's run, and two or
three workers sharing one study (search spaces themselves: tests/train/test_tuning.py)."""

import os
import subprocess
import sys

import mlflow
import optuna
import pytest
import yaml
from omegaconf import OmegaConf

from attention_lab.core.files import read_json
from attention_lab.core.paths import seed_dir
from attention_lab.stages import prepare, tokenizer, train, tune
from attention_lab.stages.common import stage_config
from attention_lab.train.search_space import load_space
from attention_lab.train.tuning import open_study
from tests.tiny_models import stage_overrides

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out

# attn_dim is one of the tuned values (conf/tune/bahdanau.yaml)
SMALL = [
    *stage_overrides("bahdanau", attn_dim=None),
    "train.val_bleu_sentences=5",
    "train.batch_size=16",
    "train.max_epochs=2",
    "tune.startup_trials=1",
]


@pytest.fixture
def prepared(project, one_torch_thread):
    prepare.main(["data.n_train=120", "data.n_valid=20"])
    tokenizer.main(["data.n_train=120", "tokenize.vocab_size=200"])
    return project


def test_tune_stage_writes_best_params_nests_trials_resumes_and_training_uses_them(prepared):
    tune.main(["family=bahdanau", *SMALL, "tune.trials=3"])
    tuned = yaml.safe_load((prepared / "tuned" / "bahdanau.yaml").read_text())
    study = tuned["study"]
    assert (
        study["trials"] == 3
        and study["complete"] + study["pruned"] == 3
        and study["metric"] == "val/loss"
    )
    assert set(tuned["params"]) == {"train", "model"} and study["params_count"] > 0

    mlflow.set_tracking_uri(f"sqlite:///{prepared / 'mlflow.db'}")
    parent = mlflow.search_runs(
        experiment_names=["translate"], filter_string="tags.kind = 'tune'", output_format="list"
    )
    assert len(parent) == 1 and parent[0].data.metrics["trials"] == 3
    children = mlflow.search_runs(
        experiment_names=["translate"],
        output_format="list",
        filter_string=f"tags.mlflow.parentRunId = '{parent[0].info.run_id}'",
    )
    assert sorted(r.data.tags["trial"] for r in children) == ["0", "1", "2"]

    # the train stage's config: the tuned values win over the defaults
    cfg = stage_config(["family=bahdanau"])
    assert (
        cfg.train.lr == tuned["params"]["train"]["lr"]
        and cfg.model.dropout == tuned["params"]["model"]["dropout"]
    )
    assert stage_config(["family=bahdanau"], tuned=False).train.lr != cfg.train.lr

    # nothing left to do: the same study, no new trial
    tune.main(["family=bahdanau", *SMALL, "tune.trials=3"])
    again = yaml.safe_load((prepared / "tuned" / "bahdanau.yaml").read_text())
    assert again == tuned
    assert (
        len(
            mlflow.search_runs(
                experiment_names=["translate"],
                output_format="list",
                filter_string="tags.stage = 'tune'",
            )
        )
        == 3
    )


def test_trials_over_the_parameter_cap_are_pruned_with_a_clear_error(prepared):
    with pytest.raises(
        RuntimeError,
        match=r"none of 2 trials completed \(every one was pruned by the parameter cap, "
        r"the smallest model: [\d,]+ parameters > params.yaml "
        r"`translate.tune.max_params` = 1,000; .*tokenize.vocab_size.* raise "
        r"`translate.tune.max_params` above [\d,]+ \(or set it to null\)",
    ):
        tune.main(["family=bahdanau", *SMALL, "tune.trials=2", "tune.max_params=1000"])
    assert not (prepared / "tuned" / "bahdanau.yaml").exists()


def test_a_study_spends_its_update_budget_starting_from_the_untuned_default(prepared, capsys):
    """tune.updates caps the updates every trial of the study trains together; trial 0 is the
    family's own settings trained in full (the gain tuning bought is measured against it); trials
    are the full schedule, cut by successive halving; one line per trial says where the study is."""
    args = [
        "family=bahdanau",
        *SMALL,
        "train.max_epochs=4",
        "train.patience=4",
        "tune.min_resource=1",
        "tune.reduction_factor=2",
        "tune.updates=160",
        "tune.trials=30",
    ]
    tune.main(args)
    tuned = yaml.safe_load((prepared / "tuned" / "bahdanau.yaml").read_text())
    study, rows = tuned["study"], tuned["trials"]
    epoch = 8  # 120 pairs at batch 16
    assert (
        study["updates"] == sum(r["updates"] for r in rows)
        and 160 - epoch < study["updates"] <= 160
    )
    assert (
        rows[0]["trial"] == 0 and rows[0]["state"] == "complete" and rows[0]["updates"] == 4 * epoch
    )
    assert study["default_value"] == rows[0]["value"]
    # successive halving stopped a trial early
    assert any(r["stopped_by"] == "rung" for r in rows), rows
    assert all(r["updates"] % epoch == 0 for r in rows)  # cut at epoch ends, never inside one
    cfg = stage_config(["family=bahdanau", *SMALL], tuned=False)
    space = load_space(prepared / "conf" / "tune" / "bahdanau.yaml", cfg)
    trial0 = open_study(stage_config(args, tuned=False), space).trials[0]
    assert (
        trial0.params == {key: OmegaConf.select(cfg, key) for key in space}
        and trial0.user_attrs["default"]
    )
    lines = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("tune bahdanau: trial")
    ]
    assert len(lines) == len(rows) and " of 160 spent" in lines[-1]


@pytest.mark.parametrize("workers, rdb", [(2, False), (3, True)], ids=["journal", "rdb"])
def test_workers_share_one_study_and_run_every_trial_once(prepared, workers, rdb):
    """Tune processes at once on the journal file, or on one database (tune.storage, as a cluster's
    PostgreSQL): 4 trials in all, each number once, one MLflow run each, one parent run. Workers
    that finish together may each start the last trial (the count is checked before a trial starts):
    at most one trial per extra worker beyond tune.trials (docs/tuning.md)."""
    storage = [f"tune.storage=sqlite:///{prepared / 'optuna.db'}"] if rdb else []
    if rdb:
        # the database exists (its tables), as on a cluster
        optuna.storages.RDBStorage(storage[0].split("=", 1)[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [
        sys.executable,
        "-m",
        "attention_lab.stages.tune",
        "family=bahdanau",
        *SMALL,
        "tune.trials=4",
        *storage,
    ]
    procs = [
        subprocess.Popen(
            cmd, cwd=prepared, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(workers)
    ]
    logs = [w.communicate(timeout=600)[0] for w in procs]
    assert [w.returncode for w in procs] == [0] * workers, "\n\n".join(log[-3000:] for log in logs)
    cfg = stage_config(["family=bahdanau", *SMALL, "tune.trials=4", *storage], tuned=False)
    study = open_study(cfg, load_space(prepared / "conf" / "tune" / "bahdanau.yaml", cfg))
    trials = study.get_trials()
    numbers = sorted(t.number for t in trials)
    assert numbers == list(range(len(trials))) and 4 <= len(trials) <= 4 + workers - 1, numbers
    assert all(
        t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
        for t in trials
    )
    assert len({t.user_attrs["worker"] for t in trials}) >= 2, "the workers shared the trials"
    assert (prepared / "tuned" / "bahdanau.journal").exists() != rdb
    mlflow.set_tracking_uri(f"sqlite:///{prepared / 'mlflow.db'}")
    runs = mlflow.search_runs(
        experiment_names=["translate"], output_format="list", filter_string="tags.stage = 'tune'"
    )
    assert sorted(int(r.data.tags["trial"]) for r in runs) == numbers
    [parent] = mlflow.search_runs(
        experiment_names=["translate"], output_format="list", filter_string="tags.kind = 'tune'"
    )
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {parent.info.run_id}
    assert parent.info.status == "FINISHED" and parent.data.metrics["trials"] == len(trials)
    tuned = OmegaConf.to_container(OmegaConf.load(prepared / "tuned" / "bahdanau.yaml"))
    assert tuned["study"]["trials"] == len(trials)


def test_the_best_trial_is_the_first_seed_s_run_when_it_is_that_very_run(prepared, capsys):
    """The tune stage keeps its best complete trial's run (a full run at the first seed) in
    tuned/.trials/<family>; the train stage takes it as that seed's run when config, data, code and
    threads are the same (the same checkpoint, the same figures as training it again; a training run
    in MLflow with the trial's curves) and trains the other seeds; with another config it trains the
    first seed itself."""
    params = prepared / "params.yaml"
    params.write_text(
        yaml.safe_dump({**yaml.safe_load(params.read_text()), "seeds": [0, 1]}, sort_keys=False)
    )
    args = ["family=bahdanau", *SMALL, "tune.trials=2"]
    tune.main(args)
    best = yaml.safe_load((prepared / "tuned" / "bahdanau.yaml").read_text())["study"]["best_trial"]
    trials = prepared / "tuned" / ".trials" / "bahdanau"
    assert [p.name for p in trials.iterdir()] == [f"trial{best}"]
    kept = trials / f"trial{best}"
    assert read_json(kept / "reuse.json")["trial"] == best

    train.main(args)
    assert f"tuning trial {best} was this very run" in capsys.readouterr().out
    cfg = stage_config(args)
    seed0, seed1 = seed_dir(cfg, 0), seed_dir(cfg, 1)
    assert (seed0 / "best.ckpt").read_bytes() == (kept / "best.ckpt").read_bytes()
    assert read_json(seed0 / "train.json") == read_json(kept / "train.json")
    assert read_json(seed1 / "train.json")["seed"] == 1
    mlflow.set_tracking_uri(f"sqlite:///{prepared / 'mlflow.db'}")
    client, trial_run = mlflow.MlflowClient(), read_json(kept / "run.json")["run_id"]
    run = client.get_run(read_json(seed0 / "run.json")["run_id"])
    assert run.info.run_id != trial_run and run.info.status == "FINISHED"
    assert (run.data.tags["stage"], run.data.tags["seed"], run.data.tags["tuning_run_id"]) == (
        "train",
        "0",
        trial_run,
    )
    assert run.data.params["train.lr"] == str(cfg.train.lr)
    curve = [(m.step, m.value) for m in client.get_metric_history(trial_run, "val/loss")]
    assert (
        curve
        and [(m.step, m.value) for m in client.get_metric_history(run.info.run_id, "val/loss")]
        == curve
    )

    figures = read_json(kept / "train.json")
    # no kept run: the train stage trains seed 0 itself
    (kept / "reuse.json").rename(kept / "reuse.away")
    train.main(args)
    assert "was this very run" not in capsys.readouterr().out
    again = read_json(seed0 / "train.json")
    assert (again["best_val"], again["steps"]) == (figures["best_val"], figures["steps"])
    (kept / "reuse.away").rename(kept / "reuse.json")
    train.main([*args, "model.dropout=0.25"])  # another config than the trial's: trained, not taken
    assert "was this very run" not in capsys.readouterr().out
    assert (seed0 / "best.ckpt").read_bytes() != (kept / "best.ckpt").read_bytes()


def test_a_classify_trial_is_taken_though_its_run_learns_the_labels(
    project, one_torch_thread, capsys
):
    """Classify's data setup writes the labels it reads into the run's config (task.labels): the
    kept trial's key is the run's as configured, the one the train stage computes before training,
    so the trial is still taken."""
    prepare.main(["task=classify", "data.n_train=90", "data.n_valid=15"])
    tokenizer.main(["task=classify"])
    args = [
        "task=classify",
        "family=bow",
        *stage_overrides("bow"),
        "train.max_epochs=1",
        "train.min_epochs=1",
        "train.batch_size=16",
        "tune.trials=1",
    ]
    tune.main(args)
    train.main(args)
    assert "tuning trial 0 was this very run" in capsys.readouterr().out


def test_trials_on_the_pool_make_the_study_trials_here_make(prepared, monkeypatch, capsys):
    """On the pool (RAY_ADDRESS) each trial is a Ray task that reaches the study through the stage's
    gRPC storage proxy (the stage alone writes the journal): with tune.in_flight 1 the study is the
    one trained here, trial for trial; with 2 in flight on two CPUs it is another study (another
    name), every trial still counted once."""
    from attention_lab.train import pool

    args = ["family=bahdanau", *SMALL, "train.max_epochs=3", "tune.min_resource=1", "tune.trials=4"]
    tune.main(args)
    here = yaml.safe_load((prepared / "tuned" / "bahdanau.yaml").read_text())
    for made in ("tuned", "models"):  # the study starts again (its MLflow runs stay)
        subprocess.run(["rm", "-rf", str(prepared / made)], check=True)
    with pool.local_instance(2) as address:
        monkeypatch.setenv(pool.ADDRESS, address)
        tune.main(args)
        out = capsys.readouterr().out
        assert out.count("pool: trial on node") == 4  # every trial a task of the pool
        assert yaml.safe_load((prepared / "tuned" / "bahdanau.yaml").read_text()) == here
        tune.main([*args, "tune.in_flight=2"])
    both = yaml.safe_load((prepared / "tuned" / "bahdanau.yaml").read_text())
    assert both["study"]["name"] != here["study"]["name"]
    # trial 0, the untuned default, is the same run
    assert (
        sorted(r["trial"] for r in both["trials"]) == [0, 1, 2, 3]
        and both["trials"][0]["value"] == here["trials"][0]["value"]
    )
