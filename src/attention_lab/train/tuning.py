"""Optuna tuning under one budget for every family of a task: one study per family in a journal file
(or an RDB URL shared by many workers), over the family's search space (train.search_space). Every
trial is the full training run (train.trial), cut short by successive halving (Li et al. 2018, ASHA:
Optuna's SuccessiveHalvingPruner); the budget is counted in training updates (tune.updates), and
trial 0 is the family's untuned default."""

from __future__ import annotations

import hashlib
import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterator

import optuna
from omegaconf import DictConfig, OmegaConf

from attention_lab.core import tracking
from attention_lab.core.paths import CONF_DIR, search_space_path, trials_dir, tuned_path
from attention_lab.core.task import Task
from attention_lab.train import pool
from attention_lab.train.search_space import defaults, load_space, nested
from attention_lab.train.trial import keep_best, objective, over_cap, worker_id

FINISHED = (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
# the budget: finished trials and those under way
COUNTED = (*FINISHED, optuna.trial.TrialState.RUNNING)
BEGUN = (*COUNTED, optuna.trial.TrialState.FAIL)  # every trial but those queued
# how trials are drawn: part of a study's name
DRAWS = "tpe seeded per live trial; failed trials ignored"


def study_name(cfg: DictConfig, space: dict) -> str:
    """<task>-<family>-<hash of the space, the budget, the config trials start from, how trials are
    drawn, the data (and pretrained encoder) they train on and the code that trains them>: a changed
    search space, budget, data or training code starts a new study (as DVC re-runs the stage); the
    same one resumes, on this machine or another (the journal is committed); tune.in_flight > 1
    names another study than 1."""
    what = {
        "space": space,
        **{
            k: OmegaConf.to_container(cfg[k], resolve=True)
            for k in ("model", "train", "data", "tune")
        },
        "seed": cfg.seeds[0],
        "draws": DRAWS,
        "data_hash": tracking.data_hash(cfg),
        "code": tracking.code_hash(cfg, "train"),
    }
    what["tune"].pop("storage", None)
    # trials drawn before earlier ones end: other draws
    if (in_flight := what["tune"].pop("in_flight", 1)) != 1:
        what["in_flight"] = in_flight
    digest = hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{cfg.task.name}-{cfg.family}-{digest}"


def storage(cfg: DictConfig):
    """cfg.tune.storage (an RDB URL, e.g. postgresql://... for many machines; heartbeats fail dead
    workers' trials), else the journal file tuned/<family>.journal (file-locked: several processes
    on one machine)."""
    if cfg.tune.storage:
        return optuna.storages.RDBStorage(cfg.tune.storage, heartbeat_interval=60, grace_period=180)
    journal = tuned_path(cfg, ".journal")
    journal.parent.mkdir(parents=True, exist_ok=True)
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))


def sampler_seed(seed: int, family: str) -> int:
    """tune.seed mixed with the family's name: each family's study draws its own trial points (with
    one seed for all, every family's first trials would be the same points), reproducibly."""
    return int(hashlib.sha256(f"{seed}:{family}".encode()).hexdigest()[:8], 16)


def sampler(cfg: DictConfig, live: int) -> optuna.samplers.TPESampler:
    """TPE for the next trial, seeded by the family's seed and the number of live (not failed)
    trials before it. Optuna seeds a sampler once per process, so a study resumed after a kill would
    draw other points than one run without a break (and repeat its first random draws); seeded per
    trial, the trial that replaces a killed one draws the killed one's point, and the study ends as
    an uninterrupted one would."""
    return optuna.samplers.TPESampler(
        seed=sampler_seed(cfg.tune.seed, cfg.family) + live,
        n_startup_trials=cfg.tune.startup_trials,
    )


class _LiveTrials:
    """A study as the pruner sees it: without its failed trials."""

    def __init__(self, study: optuna.Study):
        self._study = study

    def __getattr__(self, name: str):
        return getattr(self._study, name)

    def get_trials(self, deepcopy: bool = True, states=None) -> list[optuna.trial.FrozenTrial]:
        return [
            t
            for t in self._study.get_trials(deepcopy=deepcopy, states=states)
            if t.state != optuna.trial.TrialState.FAIL
        ]


class Halving(optuna.pruners.SuccessiveHalvingPruner):
    """Successive halving (Li et al. 2018) that ignores failed trials: a killed worker's trial
    reached its rungs, and the trial that replaces it reaches them again with the same values;
    counting both would prune otherwise than a study that was never interrupted."""

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        return super().prune(_LiveTrials(study), trial)


def pruner(cfg: DictConfig) -> Halving:
    """Successive halving at validations min_resource·reduction_factor^k (counted from 0), blind to
    failed trials."""
    return Halving(min_resource=cfg.tune.min_resource, reduction_factor=cfg.tune.reduction_factor)


def open_study(cfg: DictConfig, space: dict, store=None) -> optuna.Study:
    """The family's study (created or resumed), with a TPE sampler (`sampler`, reseeded per trial by
    tune()) and successive halving blind to failed trials (`Halving`; rungs at validation
    min_resource·reduction_factor^k, counted from 0); the worker that creates it enqueues the
    untuned default as trial 0 and is recorded (user attribute `creator`): it alone creates the
    study's MLflow run."""
    direction = "minimize" if cfg.tune.direction == "minimize" else "maximize"
    opened = {
        "study_name": study_name(cfg, space),
        "storage": store or storage(cfg),
        "sampler": sampler(cfg, 0),
        "pruner": pruner(cfg),
    }
    # resumed: a create_study of an existing name would still append a line to the journal (in git)
    try:
        return optuna.load_study(**opened)
    except KeyError:  # no study of that name yet
        pass
    # the storage's unique study name decides which of several workers starting at once creates it
    try:
        study = optuna.create_study(**opened, direction=direction)
    except optuna.exceptions.DuplicatedStudyError:
        return optuna.load_study(**opened)
    study.enqueue_trial(defaults(cfg, space), user_attrs={"default": True})
    study.set_user_attr("creator", worker_id())
    return study


def requeue_dead_trials(study: optuna.Study) -> list[int]:
    """Trials left RUNNING by a killed worker are queued again (WAITING: the same number, params and
    reported values), so the next trial to run is the killed one, resumed from its partial run's
    last.ckpt where this machine has it (train.training.train_one), else run again from its start:
    no trial is lost or repeated, and the study ends as an uninterrupted one. A worker is dead when
    it was on this host and its process is gone, or, in a journal file, when it was on another host:
    a journal serves one machine, so one brought from another (in git, say) came without its
    workers; and a trial of this pool task's own earlier attempt (worker_id: the same task id),
    whose node was lost. An RDB study's trials on other hosts are left to its heartbeats."""
    host, dead = socket.gethostname(), []
    journal = isinstance(study._storage, optuna.storages.JournalStorage)
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = str(t.user_attrs.get("worker", ""))
        worker_host, _, pid = worker.partition(":")
        here = worker_host == host and pid.isdigit()
        if (
            (here and not _alive(int(pid)))
            or (journal and not here)
            or worker == os.environ.get(pool.TASK)
        ):
            # Optuna's own queue
            study._storage.set_trial_state_values(t._trial_id, optuna.trial.TrialState.WAITING)
            dead.append(t.number)
    return dead


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def study_run(cfg: DictConfig, study: optuna.Study, wait_s: float = 120.0) -> str:
    """The study's MLflow parent run: created by the worker that created the study, its id kept in
    the study's user attributes, which the other workers (on any machine) wait for; after wait_s
    (its creator died), or at once when this tracking store lacks it (a journal from another
    machine), any worker makes it."""
    import mlflow

    experiment = tracking.experiment_id(cfg)
    client = mlflow.MlflowClient(tracking.tracking_uri(cfg))
    deadline = time.monotonic() + wait_s
    while (run_id := study.user_attrs.get("mlflow_run_id")) is None or not _recorded(
        client, run_id
    ):
        # the study came in another machine's journal; its MLflow run stayed there
        moved = run_id is not None
        if moved or study.user_attrs.get("creator") == worker_id() or time.monotonic() > deadline:
            tags = {
                "kind": "tune",
                "task": cfg.task.name,
                "family": str(cfg.family),
                "study": study.study_name,
                "git_commit": tracking.git_commit(cfg.root),
            }
            run_id = client.create_run(
                experiment, run_name=f"tune-{cfg.family}", tags=tags
            ).info.run_id
            study.set_user_attr("mlflow_run_id", run_id)
            break
        time.sleep(0.5)
    return run_id


def _recorded(client, run_id: str) -> bool:
    """Is the run in this tracking store?"""
    from mlflow.exceptions import MlflowException

    try:
        client.get_run(run_id)
    except MlflowException:
        return False
    return True


def spent(study: optuna.Study) -> int:
    """Updates the study has used: every finished trial's, plus what each running trial reserved
    (Budget). Exact for one worker; with several, a trial that has not yet reserved is not counted,
    so each extra worker may overshoot tune.updates by at most one full schedule."""
    used = 0
    for t in study.get_trials(deepcopy=False, states=COUNTED):
        running = t.state == optuna.trial.TrialState.RUNNING
        used += t.user_attrs.get("reserved", 0) if running else t.user_attrs.get("updates", 0)
    return used


def epoch_updates(study: optuna.Study) -> int:
    """Updates in one epoch, as the finished trials saw it (1 before any has validated)."""
    return max(
        (t.user_attrs.get("epoch_updates", 1) for t in study.get_trials(deepcopy=False)), default=1
    )


def summary(cfg: DictConfig, study: optuna.Study) -> dict:
    """What tuned/<family>.yaml records: the best trial's values (nested), the study's figures, the
    untuned default's full-run value (trial 0) and every finished trial (its best value at the rung
    it reached, updates, how it ended)."""
    trials = study.get_trials(deepcopy=False, states=FINISHED)
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        over = [
            t.user_attrs["params"]
            for t in trials
            if cfg.tune.max_params and t.user_attrs.get("params", 0) > cfg.tune.max_params
        ]
        why = (
            "every one was pruned by the parameter cap, the smallest model: "
            f"{over_cap(cfg.task.name, min(over), cfg.tune.max_params)}"
            if over and len(over) == len(trials)
            else (
                f"pruned by the parameter cap tune.max_params = {cfg.tune.max_params}? see"
                f" {search_space_path(cfg)}"
            )
        )
        raise RuntimeError(f"tune@{cfg.family}: none of {len(trials)} trials completed ({why})")
    best = study.best_trial
    better = min if cfg.tune.direction == "minimize" else max
    rows = [
        {
            "trial": t.number,
            "state": t.state.name.lower(),
            "stopped_by": t.user_attrs.get("stopped_by", "rung"),
            "updates": t.user_attrs.get("updates", 0),
            "value": round(float(better(t.intermediate_values.values())), 6)
            if t.intermediate_values
            else None,
        }
        for t in trials
    ]
    default = next((t for t in complete if t.user_attrs.get("default")), None)
    return {
        "params": nested(best.params),
        "study": {
            "name": study.study_name,
            "metric": cfg.tune.metric,
            "direction": cfg.tune.direction,
            "trials": len(trials),
            "complete": len(complete),
            "pruned": len(trials) - len(complete),
            "best_trial": best.number,
            "best_value": round(float(best.value), 6),
            "default_value": round(float(default.value), 6) if default else None,
            "updates": sum(r["updates"] for r in rows),
            "budget_updates": cfg.tune.updates,
            "params_count": best.user_attrs.get("params"),
            "max_params": cfg.tune.max_params,
        },
        "trials": rows,
    }


def tune(
    cfg: DictConfig, task: Task, trial: Callable | None = None, need: dict | None = None
) -> dict:
    """Run the family's study until tune.trials trials are finished or under way, or the budget of
    tune.updates is spent: here, or with `trial` (pool_trial in a pool worker) as tasks of the pool
    asking for `need`; returns summary() (trials: 0 -> no study, empty params: train with the
    family's own settings)."""
    import mlflow

    if cfg.tune.trials <= 0:
        return {"params": {}, "study": {"trials": 0}}
    # a search space is optional: without one the family is not tuned
    if not search_space_path(cfg).is_file():
        print(
            f"tune@{cfg.family}: no search space ({search_space_path(cfg)}): not tuned, trains with"
            " its own settings"
        )
        return {
            "params": {},
            "study": {"trials": 0, "untuned": f"no {CONF_DIR}/tune/{cfg.family}.yaml"},
        }
    space = load_space(search_space_path(cfg), cfg)
    if not space:  # `{}`: what `attention-lab stages` writes for a family without a search space
        empty = f"{CONF_DIR}/tune/{cfg.family}.yaml is empty"
        print(f"tune@{cfg.family}: {empty}: not tuned, trains with its own settings")
        return {"params": {}, "study": {"trials": 0, "untuned": empty}}
    # set in family_params or on the command line
    if fixed := [key for key in space if key in cfg.explicit]:
        print(f"tune@{cfg.family}: not searching {', '.join(fixed)} (set explicitly)")
        space = {key: spec for key, spec in space.items() if key not in fixed}
    if not space:
        return {"params": {}, "study": {"trials": 0}}
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    store = storage(cfg)
    study = open_study(cfg, space, store)
    if dead := requeue_dead_trials(study):
        print(
            f"tune@{cfg.family}: trials {dead} were left running by a killed worker; resumed first"
        )
    parent = study_run(cfg, study)
    started = time.perf_counter()
    if trial is not None and pool.on_pool(need):
        for number in trials_on_pool(
            cfg, study, store, (study.study_name, space, parent), trial, need
        ):
            keep_best(study, trials_dir(cfg))
            print(trial_line(cfg, study, number, time.perf_counter() - started), flush=True)
    else:
        while (number := next_trial(cfg, task, study, space, parent)) is not None:
            keep_best(study, trials_dir(cfg))
            print(trial_line(cfg, study, number, time.perf_counter() - started), flush=True)
    result = summary(cfg, study)
    client = mlflow.MlflowClient(tracking.tracking_uri(cfg))
    # every worker finishing the study writes the same figures
    with tracking.store_lock(tracking.tracking_uri(cfg)):
        for key, value in result["study"].items():
            if (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and math.isfinite(value)
            ):
                client.log_metric(parent, key, value)
        # tags, not params: a resumed study may find a new best
        for key, value in study.best_trial.params.items():
            client.set_tag(parent, f"best.{key}", value)
        client.set_terminated(parent, "FINISHED")
    return result


def next_trial(
    cfg: DictConfig, task: Task, study: optuna.Study, space: dict, parent: str
) -> int | None:
    """Train the study's next trial (its sampler seeded by the trials counted before it, its cap
    what is left of tune.updates): its number; None when tune.trials trials are counted or the
    budget is spent."""
    if (due := next_due(cfg, study)) is None:
        return None
    counted, left = due
    study.sampler = sampler(cfg, counted)
    ran: list[int] = []
    study.optimize(
        objective(cfg, task, space, parent, trials_dir(cfg), cap=left),
        n_trials=1,
        gc_after_trial=True,
        callbacks=[lambda _, finished: ran.append(finished.number)],
    )
    return ran[0]


def next_due(cfg: DictConfig, study: optuna.Study) -> tuple[int, int | None] | None:
    """(trials counted, updates left of tune.updates) before the study's next trial; None when it is
    done."""
    counted = len(study.get_trials(deepcopy=False, states=COUNTED))
    left = None if cfg.tune.updates is None else cfg.tune.updates - spent(study)
    if counted >= cfg.tune.trials or (left is not None and left < epoch_updates(study)):
        return None
    return counted, left


def trials_on_pool(
    cfg: DictConfig, study: optuna.Study, store, about: tuple, trial: Callable, need: dict
) -> Iterator[int]:
    """Each trial a task of the pool, tune.in_flight of them at once: trial(host, port, *about)
    trains the study's next trial in a worker, which reaches the study through Optuna's gRPC storage
    proxy, served here over `store`, so this process alone writes the journal; the number of each
    trial as it ends. Each task starts only once the one before it has begun its trial, so every
    trial's sampler is seeded by the trials counted before it, as here."""
    # run_grpc_proxy_server's, which cannot be stopped
    from optuna.storages._grpc.server import make_server

    host = pool.host()
    port = free_port(host)
    server = make_server(store, host, port)
    server.start()
    try:
        running: list = []
        while True:
            while len(running) < cfg.tune.in_flight and next_due(cfg, study) is not None:
                begun = len(study.get_trials(deepcopy=False, states=BEGUN))
                running.append(task := pool.start(trial, (host, port, *about), need))
                while len(
                    study.get_trials(deepcopy=False, states=BEGUN)
                ) == begun and not pool.ready(task):
                    time.sleep(0.2)
            if not running:
                return
            number, running = pool.next_done(running)
            if number is not None:  # None: the study was done when the task looked
                yield number
    finally:
        server.stop(grace=None)


def pool_trial(
    cfg: DictConfig, task: Task, host: str, port: int, name: str, space: dict, parent: str
) -> int | None:
    """next_trial in a pool worker, on the study `name` that the tune stage serves at host:port
    (trials_on_pool); a retried task (its node was lost) first queues its own earlier attempt's
    trial again, which then resumes."""
    import warnings

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        proxy = optuna.storages.GrpcStorageProxy(host=host, port=port)
    proxy.wait_server_ready(timeout=60)
    try:
        study = optuna.load_study(
            study_name=name, storage=proxy, sampler=sampler(cfg, 0), pruner=pruner(cfg)
        )
        if own := requeue_dead_trials(study):
            print(f"tune@{cfg.family}: trial {own} of this task's lost attempt resumed", flush=True)
        return next_trial(cfg, task, study, space, parent)
    finally:
        proxy.close()


def free_port(host: str) -> int:
    """A TCP port free on `host` now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def trial_line(cfg: DictConfig, study: optuna.Study, number: int, elapsed: float) -> str:
    """`tune <family>: trial k <state> (<how>) <metric> v, u updates; spent of budget, elapsed`
    after trial k."""
    last = study.get_trials(deepcopy=False)[number]
    counted = len(study.get_trials(deepcopy=False, states=COUNTED))
    values = list(last.intermediate_values.values())
    shown = f"{cfg.tune.metric} {values[-1]:.4f}" if values else f"{cfg.tune.metric} —"
    budget = f" of {cfg.tune.updates:,}" if cfg.tune.updates is not None else ""
    return (
        f"tune {cfg.family}: trial {last.number} {last.state.name.lower()}"
        f" ({last.user_attrs.get('stopped_by', 'rung')}) {shown},"
        f" {last.user_attrs.get('updates', 0):,} updates; {spent(study):,}{budget} spent, {counted}"
        f" of {cfg.tune.trials} trials, {elapsed:.0f} s"
    )
