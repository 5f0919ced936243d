"""One trial of a study: the family's full training run (train.training's `train_one`, as the train
stage runs it) with the sampled values, pruned at successive halving's rungs (optuna-integration's
Lightning callback), before training when its model is over the parameter cap, and cut where the
study's budget of updates runs out."""

from __future__ import annotations

import copy
import os
import shutil
import socket
from pathlib import Path

import lightning.pytorch as pl
import optuna
from omegaconf import DictConfig, OmegaConf

from attention_lab.core import tracking
from attention_lab.core.files import read_json
from attention_lab.core.task import Task
from attention_lab.train.checkpoints import count_parameters
from attention_lab.train.pool import TASK
from attention_lab.train.search_space import suggest
from attention_lab.train.training import keep_for_reuse, run_settings, train_one


def worker_id() -> str:
    """This process as a trial records its worker (user attribute `worker`): host:pid, or in a pool
    task the task's id (pool.TASK), which a retried attempt keeps."""
    return os.environ.get(TASK) or f"{socket.gethostname()}:{os.getpid()}"


class ParamCap(pl.Callback):
    """Prune a trial whose sampled model has more trainable parameters than the task's cap
    (tune.max_params)."""

    def __init__(self, trial: optuna.Trial, cap: int | None):
        self.trial, self.cap = trial, cap

    def on_fit_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        n = count_parameters(module.model)
        self.trial.set_user_attr("params", n)
        if self.cap and n > self.cap:
            self.trial.set_user_attr("stopped_by", "parameter cap")
            raise optuna.TrialPruned(over_cap(module.cfg.task.name, n, self.cap))


def over_cap(task: str, counted: int, cap: int) -> str:
    """Why a trial is over the parameter cap, and what to raise."""
    return (
        f"{counted:,} parameters > params.yaml `{task}.tune.max_params` = {cap:,}; the embedding"
        " and output layers scale with tokenize.vocab_size, so for a corpus with a larger"
        f" vocabulary raise `{task}.tune.max_params` above {counted:,} (or set it to null)"
    )


class Budget(pl.Callback):
    """Reserve what a trial may spend (user attribute `reserved`: its full schedule, at most `cap`,
    what was left of tune.updates when it began), record its updates after each validation
    (`updates`, `epoch_updates`) and stop it before an epoch that would take it past `cap`."""

    def __init__(self, trial: optuna.Trial, cap: int | None):
        self.trial, self.cap, self.cut = trial, cap, False

    def on_train_start(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        full = int(trainer.max_epochs * trainer.num_training_batches)
        self.trial.set_user_attr("reserved", full if self.cap is None else min(full, self.cap))

    def on_validation_end(self, trainer: pl.Trainer, module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        per_epoch = int(trainer.num_training_batches)
        self.trial.set_user_attr("updates", int(trainer.global_step))
        self.trial.set_user_attr("epoch_updates", per_epoch)
        last = trainer.current_epoch + 1 >= trainer.max_epochs
        if (
            self.cap is not None
            and trainer.global_step + per_epoch > self.cap
            and not (trainer.should_stop or last)
        ):
            self.cut = trainer.should_stop = True


def objective(
    cfg: DictConfig,
    task: Task,
    space: dict,
    parent_run_id: str,
    workdir: Path,
    cap: int | None = None,
):
    """Train one trial: the full training run with the sampled values (at most `cap` updates); its
    best validation value of tune.metric. Pruned at a rung, or cut by the budget, it ends PRUNED."""
    from optuna_integration import PyTorchLightningPruningCallback

    full = task.full_run(cfg, cfg.seeds[0])  # the family's run on all the data at the first seed

    def run(trial: optuna.Trial) -> float:
        trial.set_user_attr("worker", worker_id())
        values = suggest(trial, space)
        run_cfg = run_settings(cfg, full)
        for key, value in values.items():
            OmegaConf.update(run_cfg, key, value)
        # train_one adds what its data setup reads (classify's task.labels): the
        configured = copy.deepcopy(run_cfg)
        # kept trial's key is the run's as configured, the one the train stage computes before it
        # trains
        out, partial = trial_dirs(workdir, trial.number)
        name = f"{cfg.family}-trial{trial.number}"
        tags = {
            "mlflow.parentRunId": parent_run_id,
            "trial": str(trial.number),
            "study": trial.study.study_name,
        }
        budget = Budget(trial, cap)
        try:
            result = train_one(
                run_cfg,
                task,
                full.seed,
                out,
                partial,
                stage="tune",
                tags=tags,
                name=name,
                callbacks=(
                    ParamCap(trial, cfg.tune.max_params),
                    budget,
                    PyTorchLightningPruningCallback(trial, monitor=cfg.tune.metric),
                ),
            )
            trial.set_user_attr("stopped_by", "budget" if budget.cut else result["stopped_by"])
            if budget.cut:
                raise optuna.TrialPruned(f"tune.updates spent after {result['steps']} updates")
            keep_for_reuse(out, trial.number, configured, full.seed)
        except BaseException as err:  # pruned, or failed: nothing of the trial is kept
            shutil.rmtree(out, ignore_errors=True)
            # its MLflow run says so (Lightning closed it as FAILED)
            if isinstance(err, optuna.TrialPruned):
                if "stopped_by" not in trial.user_attrs:
                    trial.set_user_attr("stopped_by", "rung")
                if (partial / "run.json").is_file():
                    mark_pruned(cfg, read_json(partial / "run.json")["run_id"])
            raise
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        frozen = next(t for t in trial.study.get_trials(deepcopy=False) if t.number == trial.number)
        reported = list(frozen.intermediate_values.values())
        if not reported:
            raise RuntimeError(
                f"{cfg.family} trial {trial.number}: no `{cfg.tune.metric}` was logged; "
                "tune.metric must be a validation metric of the task (e.g. val/loss)"
            )
        return min(reported) if cfg.tune.direction == "minimize" else max(reported)

    return run


def trial_dirs(workdir: Path, number: int) -> tuple[Path, Path]:
    """Where trial `number` lands (out) and trains (its partial run); the partial run is removed
    when the trial ends, the out of a complete trial only once a better one completes
    (keep_best)."""
    return workdir / f"trial{number}", workdir / f".partial-trial{number}"


def keep_best(study: optuna.Study, workdir: Path) -> None:
    """Remove the runs of complete trials other than the study's best (which the train stage may
    take as its first seed's run: train.training.reuse_tuned_run)."""
    complete = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    best = study.best_trial.number if complete else None
    for t in complete:
        if t.number != best:
            shutil.rmtree(trial_dirs(workdir, t.number)[0], ignore_errors=True)


def mark_pruned(cfg: DictConfig, run_id: str) -> None:
    """A pruned trial's MLflow run says so (tag optuna.state PRUNED; Lightning closed it as
    FAILED)."""
    import mlflow

    client = mlflow.MlflowClient(tracking.tracking_uri(cfg))
    client.set_tag(run_id, "optuna.state", "PRUNED")
    client.set_terminated(run_id, "KILLED")
