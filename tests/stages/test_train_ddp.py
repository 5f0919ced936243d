"""Data-parallel training through Lightning's own "ddp" strategy: the translate stage as two CPU
processes (gloo, conf/trainer/ddp.yaml) against one process with the same global batch.

Each training runs the real command, `python -m attention_lab.stages.train ... trainer=ddp`, which
Lightning re-launches for rank 1. Checked: one MLflow run, one set of checkpoints, every metric
logged once per step or epoch, the loss curve of one process with the global batch, and an exact
resume of a crashed two-process run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import mlflow
import pytest
import torch

from attention_lab.core.files import read_json
from tests.conftest import copy_project
from tests.tiny_models import stage_overrides

# four two-process trainings and one single: 4.5 min on 2 cores shared with other work
pytestmark = pytest.mark.slow

B = 8  # sentences per process: two processes of B against one process of 2 * B
EPOCHS = 3
SMALL = [
    *stage_overrides("bahdanau"),
    "data.n_train=96",
    "data.n_valid=24",
    "train.val_bleu_sentences=4",
    f"train.max_epochs={EPOCHS}",
    "train.warmup_steps=3",
    "train.lr=0.005",
    "train.patience=10",
    "trainer.log_every_n_steps=1",
]
# dropout 0: every process draws its own dropout masks, so with dropout the two trainings differ by
# more than arithmetic (the resume test keeps dropout, where the point is that each process gets its
# own RNG state back)
PARITY = [*SMALL, "model.dropout=0"]
# Tolerance of the loss curves, relative. Not exact because (1) each process averages the loss over
# its own target tokens and DDP averages the two processes' gradients (and the logged losses), where
# one process averages over all tokens of the global batch: the two halves of a batch hold different
# numbers of tokens; (2) sums run in another order (gloo's all-reduce, smaller matrix products), so
# float32 rounding differs, and the differences grow with the updates. Measured here: at most 9.0e-4
# on the 18 step losses and 1.8e-4 on the 3 validation losses. The data split itself is checked
# exactly: both processes together train on every token once (tokens_seen).
RTOL = 3e-3
SEED_DIR = Path("models/bahdanau/checkpoints/seed0")
FILES = {"best.ckpt", "last.ckpt", "run.json", "config.yaml", "train.json"}
CRASH = textwrap.dedent('''
    """The train stage's own train_one (train.training) with a callback that kills every process
    as the second epoch starts."""
    import sys

    import lightning.pytorch as pl

    from attention_lab.train import training
    from attention_lab.core.paths import partial_dir, seed_dir
    from attention_lab.core.task import get_task
    from attention_lab.stages.common import stage_config


    class Crash(pl.Callback):
        def on_train_epoch_start(self, trainer, module):
            if trainer.current_epoch == 1:
                raise RuntimeError("simulated crash")


    if __name__ == "__main__":  # Lightning re-runs this file for rank 1
        # translate: the config train.main trains, so the resumed run's is the same
        cfg = stage_config(sys.argv[1:])
        out = seed_dir(cfg, 0)
        partial = partial_dir(out, out.parent)
        training.train_one(cfg, get_task(cfg.task.name), 0, out, partial, callbacks=(Crash(),))
''')


def stage(
    project: Path, db: str, *overrides: str, script: list[str] | None = None
) -> subprocess.CompletedProcess:
    """Run the train stage (or `script`) in `project` as a fresh process, logging to sqlite `db`."""
    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{project / db}", "OMP_NUM_THREADS": "1"}
    env.pop("LOCAL_RANK", None)  # a fresh launch, never a child of some other launcher
    command = script or ["-m", "attention_lab.stages.train"]
    return subprocess.run(
        [sys.executable, *command, "family=bahdanau", *overrides],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def check(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]


def mlflow_runs(project: Path, db: str) -> list:
    client = mlflow.MlflowClient(f"sqlite:///{project / db}")
    return client.search_runs([client.get_experiment_by_name("translate").experiment_id])


def histories(project: Path, db: str, run_id: str) -> dict[str, list]:
    """Every metric of the run: its (step, value) history, in logging order."""
    client = mlflow.MlflowClient(f"sqlite:///{project / db}")
    return {
        key: [(m.step, m.value) for m in client.get_metric_history(run_id, key)]
        for key in client.get_run(run_id).data.metrics
    }


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    project = copy_project(tmp_path_factory.mktemp("ddp") / "project")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for command in (
        ["attention_lab.stages.prepare", "data.n_train=96", "data.n_valid=24"],
        ["attention_lab.stages.tokenizer", "data.n_train=96", "tokenize.vocab_size=1000"],
    ):
        subprocess.run(
            [sys.executable, "-m", *command], cwd=project, env=env, check=True, capture_output=True
        )
    return project


@pytest.fixture(scope="module")
def parity(project) -> dict:
    """The same training as two processes of B sentences (ddp.db, models-ddp/) and one process of 2B
    (single.db)."""
    check(stage(project, "ddp.db", *PARITY, "trainer=ddp", f"train.batch_size={B}"))
    ddp_dir = project / "models-ddp"
    shutil.move(project / "models", ddp_dir)
    check(stage(project, "single.db", *PARITY, f"train.batch_size={2 * B}"))
    single_dir = project / "models-single"
    shutil.move(project / "models", single_dir)
    return {"ddp": ddp_dir, "single": single_dir}


def test_two_processes_write_one_mlflow_run_and_one_set_of_checkpoints(project, parity):
    runs = mlflow_runs(project, "ddp.db")
    # rank 1's MLFlowLogger never started a run
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    seed_dir = parity["ddp"] / SEED_DIR.relative_to("models")
    # no best-v1.ckpt, no per-rank files, no lightning_logs
    assert {p.name for p in seed_dir.iterdir()} == FILES
    assert [p.name for p in (parity["ddp"] / "bahdanau" / "checkpoints").iterdir()] == ["seed0"]
    # moved into place, once
    assert not any((parity["ddp"] / "bahdanau" / ".partial-checkpoints").iterdir())
    assert read_json(seed_dir / "run.json")["run_id"] == runs[0].info.run_id
    summary = read_json(seed_dir / "train.json")
    assert summary["processes"] == 2 and summary["global_batch_size"] == 2 * B
    ckpt = torch.load(seed_dir / "last.ckpt", map_location="cpu", weights_only=False)
    assert len(ckpt["torch_rng_states"]) == 2  # each process's RNG, for an exact resume
    assert (
        runs[0].data.params["trainer.devices"] == "2" and runs[0].data.tags["family"] == "bahdanau"
    )
    single = read_json(parity["single"] / SEED_DIR.relative_to("models") / "train.json")
    assert summary["steps"] == single["steps"] == EPOCHS * 96 // (2 * B)  # the same optimizer steps
    # the token count (train_tokens_per_s) sums both processes: every training token once, as with
    # one process
    single_ckpt = torch.load(
        parity["single"] / SEED_DIR.relative_to("models") / "last.ckpt",
        map_location="cpu",
        weights_only=False,
    )
    assert ckpt["tokens_seen"] == single_ckpt["tokens_seen"] > 0


def test_every_metric_is_logged_once_per_step_or_epoch(project, parity):
    (ddp_run,), (single_run,) = mlflow_runs(project, "ddp.db"), mlflow_runs(project, "single.db")
    ddp = histories(project, "ddp.db", ddp_run.info.run_id)
    single = histories(project, "single.db", single_run.info.run_id)
    assert set(ddp) == set(single)
    for key in ("train/loss", "val/loss", "val/bleu", "train/teacher_forcing"):
        steps = [step for step, _ in ddp[key]]
        assert len(steps) == len(set(steps)), f"{key} logged twice at a step: {steps}"
    assert len(ddp["train/loss"]) == EPOCHS * 96 // (2 * B) and len(ddp["val/loss"]) == EPOCHS
    assert {key: len(h) for key, h in ddp.items()} == {key: len(h) for key, h in single.items()}


def test_loss_curve_matches_one_process_with_the_same_global_batch(project, parity):
    (ddp_run,), (single_run,) = mlflow_runs(project, "ddp.db"), mlflow_runs(project, "single.db")
    ddp = histories(project, "ddp.db", ddp_run.info.run_id)
    single = histories(project, "single.db", single_run.info.run_id)
    for key in ("train/loss", "val/loss"):
        assert [s for s, _ in ddp[key]] == [s for s, _ in single[key]]
        for (step, a), (_, b) in zip(ddp[key], single[key]):
            assert a == pytest.approx(b, rel=RTOL), (
                f"{key} at step {step}: two processes {a}, one process {b}"
            )
    first, last = single["val/loss"][0][1], single["val/loss"][-1][1]
    assert last < first - 0.1  # a curve that moves, not a flat line that any two runs would share


def test_a_crashed_two_process_run_resumes_to_the_uninterrupted_result(project, tmp_path):
    """Dropout on: each process's RNG state is saved in last.ckpt and given back to the process of
    the same rank."""
    ddp = [*SMALL, "trainer=ddp", f"train.batch_size={B}", "train.max_epochs=2"]
    shutil.rmtree(project / "models", ignore_errors=True)
    check(stage(project, "straight.db", *ddp))
    straight = read_json(project / SEED_DIR / "train.json")
    shutil.rmtree(project / "models")
    (tmp_path / "crash.py").write_text(CRASH)
    crashed = stage(project, "resumed.db", *ddp, script=[str(tmp_path / "crash.py")])
    assert crashed.returncode != 0 and "simulated crash" in crashed.stderr
    partial = project / "models/bahdanau/.partial-checkpoints/seed0"
    assert (partial / "last.ckpt").is_file() and not (project / SEED_DIR).exists()
    resumed = stage(project, "resumed.db", *ddp)
    check(resumed)
    assert "resuming bahdanau seed 0" in resumed.stdout
    after = read_json(project / SEED_DIR / "train.json")
    assert after["steps"] == straight["steps"] and after["best_val"] == straight["best_val"]
    # the crashed run continued, not a second one
    assert len(mlflow_runs(project, "resumed.db")) == 1
