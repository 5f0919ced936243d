"""tuning.py: a study's name, sampler and pruner, and the trials of dead workers (search spaces:
tests/train/test_search_space.py; the tune stage itself: tests/stages/test_tune.py)."""

import itertools
import os
import subprocess
import sys

import optuna
import pytest

from attention_lab.core.task import get_task
from attention_lab.stages.common import stage_config
from attention_lab.train.search_space import defaults, load_space, suggest
from attention_lab.train.tuning import (
    COUNTED,
    Halving,
    open_study,
    requeue_dead_trials,
    sampler,
    study_name,
    study_run,
)
from tests.train.test_search_space import write_space


def test_a_family_without_a_search_space_is_not_tuned_and_says_so(project, capsys):
    """A search space is optional: without conf/tune/<family>.yaml the tune stage runs no study and
    says so."""
    from attention_lab.train.tuning import tune

    (project / "conf" / "tune" / "bahdanau.yaml").unlink()
    cfg = stage_config(["family=bahdanau"], tuned=False)
    assert tune(cfg, get_task(cfg.task.name)) == {
        "params": {},
        "study": {"trials": 0, "untuned": "no conf/tune/bahdanau.yaml"},
    }
    assert "tune@bahdanau: no search space" in capsys.readouterr().out


def test_trials_of_a_killed_worker_are_queued_again_as_they_were(project):
    """A trial left RUNNING by a dead worker on this host goes back to Optuna's queue with its
    number, params and reported values, and is the next trial asked for; a live worker's trial is
    left alone."""
    cfg = stage_config(["family=bahdanau", "tune.trials=2"], tuned=False)
    space = load_space(project / "conf" / "tune" / "bahdanau.yaml", cfg)
    study = open_study(cfg, space)
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    trial = study.ask()
    trial.set_user_attr("worker", f"{os.uname().nodename}:{dead.stdout.strip()}")
    params = suggest(trial, space)
    trial.report(0.5, 0)
    alive = study.ask()
    alive.set_user_attr("worker", f"{os.uname().nodename}:{os.getpid()}")
    assert requeue_dead_trials(study) == [trial.number] and requeue_dead_trials(study) == []
    states = {t.number: t.state for t in study.get_trials()}
    assert states == {
        trial.number: optuna.trial.TrialState.WAITING,
        alive.number: optuna.trial.TrialState.RUNNING,
    }
    assert study.study_name == study_name(cfg, space)
    # the untuned default
    assert trial.number == 0 and trial.user_attrs["default"] and params == defaults(cfg, space)
    again = study.ask()
    assert again.number == trial.number and again.user_attrs["default"]
    assert suggest(again, space) == params and study.get_trials()[0].intermediate_values == {0: 0.5}


def test_opening_a_study_again_leaves_its_journal_as_it_was(project):
    """The journal is in git: resuming a study (every tune stage that re-runs) reads it and appends
    nothing."""
    cfg = stage_config(["family=bahdanau", "tune.trials=2"], tuned=False)
    space = load_space(project / "conf" / "tune" / "bahdanau.yaml", cfg)
    first = open_study(cfg, space)
    journal = project / "tuned" / "bahdanau.journal"
    written = journal.read_bytes()
    again = open_study(cfg, space)
    assert journal.read_bytes() == written
    # the default, queued
    assert again.study_name == first.study_name and [t.number for t in again.get_trials()] == [0]


def test_a_journal_from_another_machine_resumes_here(project):
    """A journal brought from another machine (in git, after its session ended): its RUNNING trial
    is queued again (its worker stayed there), and the study's MLflow run, which is not in this
    machine's store, is made anew; in an RDB study shared by machines, another host's running trial
    is left to the heartbeats."""
    cfg = stage_config(["family=bahdanau", "tune.trials=2"], tuned=False)
    space = load_space(project / "conf" / "tune" / "bahdanau.yaml", cfg)
    study = open_study(cfg, space)
    trial = study.ask()
    trial.set_user_attr("worker", "another-machine:4242")
    study.set_user_attr("mlflow_run_id", "0123456789abcdef0123456789abcdef")
    study.set_user_attr("creator", "another-machine:4241")
    assert requeue_dead_trials(study) == [trial.number]
    # made at once: no waiting for a creator that is not here
    run_id = study_run(cfg, study, wait_s=60.0)
    assert (
        run_id != "0123456789abcdef0123456789abcdef" and study.user_attrs["mlflow_run_id"] == run_id
    )
    assert study_run(cfg, study) == run_id

    shared = stage_config(
        ["family=bahdanau", "tune.trials=2", f"tune.storage=sqlite:///{project / 'optuna.db'}"],
        tuned=False,
    )
    rdb = open_study(shared, space)
    elsewhere = rdb.ask()
    elsewhere.set_user_attr("worker", "another-machine:4242")
    assert requeue_dead_trials(rdb) == []


def test_the_study_s_name_follows_its_training_code_and_data(project):
    """A study resumes only where its trials would train the same: an edit to the code the family's
    train stage imports, or other prepared data, names a new study; an edit elsewhere (the CLI) does
    not."""
    cfg = stage_config(["family=bahdanau"], tuned=False)
    space = load_space(project / "conf" / "tune" / "bahdanau.yaml", cfg)
    name = study_name(cfg, space)
    with (project / "src" / "attention_lab" / "cli.py").open("a") as f:
        f.write("# not training code\n")
    assert study_name(cfg, space) == name
    with (project / "src" / "attention_lab" / "translate" / "models" / "seq2seq.py").open("a") as f:
        f.write("# training code\n")
    edited = study_name(cfg, space)
    assert edited != name
    train = project / cfg.paths.prepared / "train.jsonl"
    train.parent.mkdir(parents=True, exist_ok=True)
    train.write_text('{"src": "a", "tgt": "b"}\n')
    assert study_name(cfg, space) not in (name, edited)


def test_each_family_study_has_its_own_sampler_seed():
    from attention_lab.train.tuning import sampler_seed

    seeds = {
        family: sampler_seed(0, family)
        for family in ("bahdanau", "luong_dot", "transformer", "han")
    }
    assert len(set(seeds.values())) == len(seeds) and seeds["bahdanau"] == sampler_seed(
        0, "bahdanau"
    )
    assert sampler_seed(1, "bahdanau") != seeds["bahdanau"]


class Killed(Exception):
    """The worker dies inside a trial."""


def test_a_study_resumed_after_a_kill_ends_as_an_uninterrupted_one(project):
    """tune()'s loop (a sampler seeded per live trial, halving blind to failed trials) on a cheap
    objective, once without a break and once killed in the first trial from trial 5 on that passed
    its first rung, and resumed in a new Study object (as a new process would): the live trials are
    the same points, pruned at the same rungs, with the same values."""
    cfg = stage_config(["family=bahdanau"], tuned=False)
    space = load_space(project / "conf" / "tune" / "bahdanau.yaml", cfg)

    def objective(kill: bool):
        def run(trial: optuna.Trial) -> float:
            v = suggest(trial, space)
            for step in range(10):  # rungs at steps 1, 3, 9
                loss = (
                    (v["train.lr"] * 1e3 - 2.0) ** 2
                    + v["model.dropout"]
                    + 64 / v["model.attn_dim"] / (step + 1)
                )
                trial.report(loss, step)
                if trial.should_prune():
                    raise optuna.TrialPruned
                if kill and trial.number >= 5 and step == 2:
                    raise Killed
            return loss

        return run

    def study(storage, name):
        return optuna.create_study(
            study_name=name,
            storage=storage,
            sampler=sampler(cfg, 0),
            load_if_exists=True,
            pruner=Halving(min_resource=1, reduction_factor=3),
        )

    def tune(storage, name, kill: bool, trials: int = 14):
        s = study(storage, name)
        while (live := len(s.get_trials(deepcopy=False, states=COUNTED))) < trials:
            s.sampler = sampler(cfg, live)
            try:
                s.optimize(objective(kill), n_trials=1)
            except Killed:
                s, kill = study(storage, name), False  # a new worker resumes the study
        return [(t.params, t.state, t.intermediate_values) for t in s.trials if t.state in COUNTED]

    storage = optuna.storages.InMemoryStorage()
    once, resumed = tune(storage, "once", kill=False), tune(storage, "resumed", kill=True)
    failed = [
        t
        for t in optuna.load_study(study_name="resumed", storage=storage).trials
        if t.state == optuna.trial.TrialState.FAIL
    ]
    # killed after it had reported (and reached a rung)
    assert len(failed) == 1 and failed[0].intermediate_values
    assert resumed == once
    assert {state for _, state, _ in once} == {
        optuna.trial.TrialState.COMPLETE,
        optuna.trial.TrialState.PRUNED,
    }
    # no point drawn twice
    assert len({tuple(sorted(params.items())) for params, _, _ in once}) == len(once)


def test_a_key_set_explicitly_is_not_searched(project, capsys):
    """A space that searches model.window, set explicitly (here on the command line, as
    family_params would): the study searches only the rest; and a space left empty runs no study at
    all."""
    from attention_lab.train.tuning import tune

    cfg = stage_config(
        ["task=translate", "family=luong_local_m", "train.lr=0.001", "model.window=10"], tuned=False
    )
    write_space(
        project,
        "luong_local_m",
        "model.window: {low: 3, high: 12}\ntrain.lr: {low: 1.0e-4, high: 1.0e-2}\n",
    )
    assert tune(cfg, get_task(cfg.task.name)) == {"params": {}, "study": {"trials": 0}}
    assert "not searching model.window, train.lr (set explicitly)" in capsys.readouterr().out


def test_expected_best_follows_dodge_et_al():
    """One trial expects the mean; all N expect nearly the best; the curve only improves (Dodge et
    al. 2019, eq. 1)."""
    from attention_lab.results.significance import expected_best

    losses = [4.0, 2.0, 3.0, 1.0]
    curve = expected_best(losses, "minimize")
    assert curve[0] == pytest.approx(2.5) and all(a >= b for a, b in itertools.pairwise(curve))
    assert curve[-1] == pytest.approx(
        sum(v * ((i / 4) ** 4 - ((i - 1) / 4) ** 4) for i, v in enumerate([4, 3, 2, 1], 1))
    )
    assert expected_best([0.5, 0.9], "maximize") == pytest.approx([0.7, 0.5 * 0.25 + 0.9 * 0.75])


@pytest.mark.parametrize("task, family", [("classify", "han"), ("translate", "bahdanau")])
def test_the_first_rung_comes_after_the_task_s_warm_up(task, family):
    """The task's Halving (tune.min_resource, counted in validations from 0 as Optuna's step) prunes
    no trial before its first rung, however bad: classify's first rung is after train.min_epochs and
    then some (a slow starter's climb), so a trial still flat there is not judged; translate keeps
    its rung after validation 2."""
    cfg = stage_config([f"task={task}", f"family={family}"], tuned=False)
    first = cfg.tune.min_resource  # the step of the first rung
    if task == "classify":
        assert first + 1 > cfg.train.min_epochs
    else:
        assert first == 1
    study = optuna.create_study(
        direction=cfg.tune.direction, pruner=Halving(min_resource=first, reduction_factor=3)
    )
    good, bad = (0.9, 0.1) if cfg.tune.direction == "maximize" else (0.1, 0.9)
    for _ in range(3):
        trial = study.ask()
        for step in range(first + 1):
            trial.report(good, step)
            assert not trial.should_prune()
        study.tell(trial, good)
    slow = study.ask()
    for step in range(first):
        slow.report(bad, step)
        assert not slow.should_prune(), (
            f"pruned at step {step}, before the first rung (step {first})"
        )
    slow.report(bad, first)
    assert slow.should_prune()
