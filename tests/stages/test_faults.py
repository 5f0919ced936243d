"""Faults: a train or tune stage killed with SIGKILL resumes to the result of an uninterrupted run;
a damaged or hostile checkpoint stops evaluate, export and a resume with an error naming the file,
and is never unpickled; a stage that fails midway leaves its outputs as they were, with nothing
half-written for DVC to cache."""

import contextlib
import os
import pickle
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path

import lightning.pytorch as pl
import mlflow
import optuna
import pytest
import torch
import yaml

from attention_lab.core.files import read_json
from attention_lab.core.paths import onnx_dir, partial_dir, pretrained_dir, seed_dir
from attention_lab.core.task import get_task
from attention_lab.nn.export import ExportError
from attention_lab.stages import evaluate, export, prepare, pretrain, tokenizer, train, tune
from attention_lab.stages.common import stage_config
from attention_lab.train import training
from attention_lab.train.checkpoints import CheckpointError, load_model, read_checkpoint
from attention_lab.train.search_space import load_space
from attention_lab.train.training import run_partial
from attention_lab.train.trial import trial_dirs
from attention_lab.train.tuning import FINISHED, storage, study_name
from attention_lab.translate import export as translate_export
from tests.conftest import ROOT
from tests.tiny_models import stage_overrides

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out

SRC = ROOT / "src"
TRAIN = [
    "family=bahdanau",
    *stage_overrides("bahdanau"),
    "data.n_train=200",
    "data.n_valid=30",
    "train.val_bleu_sentences=10",
    "train.batch_size=16",
    "train.max_minutes=5",
    # every step's train/loss reaches MLflow: how the tests see an epoch under way
    "trainer.log_every_n_steps=1",
]
# attn_dim is tuned (conf/tune/bahdanau.yaml)
TUNE = [
    "family=bahdanau",
    *stage_overrides("bahdanau", attn_dim=None),
    "train.val_bleu_sentences=5",
    "train.batch_size=16",
    "train.max_epochs=2",
    "tune.startup_trials=1",
    "tune.trials=3",
]
State = optuna.trial.TrialState


@pytest.fixture
def translate_data(project, one_torch_thread):
    """200 training pairs and a 1000-token BPE vocabulary: short sequences, an epoch of 13 steps in
    about a second."""
    prepare.main(["data.n_train=200", "data.n_valid=30"])
    tokenizer.main(["data.n_train=200", "tokenize.vocab_size=1000"])
    return project


def launch(project: Path, stage: str, args: list[str], log: Path) -> subprocess.Popen:
    """`python -m attention_lab.stages.<stage> <args>` in the project on one thread, its output in
    `log` (a pipe that nobody reads while polling would fill up and stall the stage)."""
    with log.open("w") as out:
        return subprocess.Popen(
            [sys.executable, "-m", f"attention_lab.stages.{stage}", *args],
            cwd=project,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def run_to_the_end(project: Path, stage: str, args: list[str], **env: str) -> str:
    """The same command run to its end (one thread; `env` on top of ours); its output."""
    done = subprocess.run(
        [sys.executable, "-m", f"attention_lab.stages.{stage}", *args],
        cwd=project,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1", **env},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def kill_when(proc: subprocess.Popen, ready, log: Path, what: str, timeout: float = 480) -> None:
    """Poll ready() every 50 ms while the stage runs, and SIGKILL it the moment it holds."""
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            if proc.poll() is not None:
                pytest.fail(
                    f"the stage ended (exit status {proc.returncode}) before"
                    f" {what}:\n{log.read_text()[-4000:]}"
                )
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} after {timeout:.0f} s:\n{log.read_text()[-4000:]}")
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"exit status {proc.returncode}: not our SIGKILL"


def snapshot(*paths: Path) -> dict[str, bytes]:
    """Every file under `paths` (files or folders), by path: what a failed stage must leave as it
    was."""
    files = [
        f
        for p in paths
        for f in ([p] if p.is_file() else sorted(p.rglob("*")) if p.is_dir() else [])
    ]
    return {str(f): f.read_bytes() for f in files if f.is_file()}


# three processes of the stage (each about 20 s to start on a busy machine)
def test_sigkilled_training_resumes_from_last_ckpt_to_the_uninterrupted_result(
    translate_data, tmp_path
):
    """A real process killed with SIGKILL in its second epoch: nothing reaches
    models/<family>/checkpoints; the same command run again resumes the partial run (the same MLflow
    run) and ends with the uninterrupted run's figures."""
    args = [*TRAIN, "train.max_epochs=3"]
    run_to_the_end(translate_data, "train", args)  # uninterrupted
    out = seed_dir(stage_config(args), 0)
    straight = read_json(out / "train.json")
    per_epoch = straight["steps"] // straight["epochs"]
    assert straight["epochs"] == 3 and per_epoch >= 8
    shutil.rmtree(out)

    partial, client = (
        partial_dir(out, out.parent),
        mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"]),
    )

    def second_epoch_under_way() -> bool:
        if not ((partial / "last.ckpt").is_file() and (partial / "run.json").is_file()):
            return False
        try:
            steps = client.get_metric_history(
                read_json(partial / "run.json")["run_id"], "train/loss"
            )
        # the stage holds the sqlite file's lock this moment: look again
        except mlflow.exceptions.MlflowException:
            return False
        return max((m.step for m in steps), default=0) >= per_epoch + 2

    log = tmp_path / "train.log"
    kill_when(
        launch(translate_data, "train", args, log),
        second_epoch_under_way,
        log,
        "second epoch under way",
    )
    killed = read_checkpoint(partial / "last.ckpt")
    assert (killed["epoch"], killed["global_step"]) == (0, per_epoch), (
        "killed in the second epoch, before its save"
    )
    assert not out.exists() and not any(out.parent.iterdir()), (
        "nothing half-written in the stage's DVC output"
    )
    assert not (partial / "train.json").exists()
    run_id = read_json(partial / "run.json")["run_id"]

    assert f"resuming bahdanau seed 0 from {partial / 'last.ckpt'}" in run_to_the_end(
        translate_data, "train", args
    )
    resumed = read_json(out / "train.json")
    assert resumed["best_val"] == straight["best_val"]
    assert (resumed["steps"], resumed["epochs"], resumed["last_val"]) == (
        straight["steps"],
        3,
        straight["last_val"],
    )
    assert (
        read_json(out / "run.json")["run_id"] == run_id
        and client.get_run(run_id).info.status == "FINISHED"
    )
    assert not partial.exists()


@pytest.fixture
def tune_data(project, one_torch_thread):
    prepare.main(["data.n_train=120", "data.n_valid=20"])
    tokenizer.main(["data.n_train=120", "tokenize.vocab_size=1000"])
    return project


# three runs of the study in processes of their own
def test_sigkilled_tuning_resumes_the_killed_trial_and_ends_as_an_uninterrupted_study(
    tune_data, tmp_path, capsys
):
    """A tune process killed with SIGKILL inside a trial's epoch, after a trial finished and after
    the running one's first checkpoint: run again, the killed trial is resumed first (its number,
    params, reported values, MLflow run) from its last.ckpt, the finished trials are kept as they
    were, and every trial ends as in an uninterrupted study."""
    # 15 updates an epoch: room to kill inside one
    args = [*TUNE, "train.batch_size=8", "trainer.log_every_n_steps=1"]
    cfg = stage_config(args, tuned=False)
    name = study_name(cfg, load_space(tune_data / "conf" / "tune" / "bahdanau.yaml", cfg))
    workdir, tuned_file = (
        tune_data / "tuned" / ".trials" / "bahdanau",
        tune_data / "tuned" / "bahdanau.yaml",
    )

    def trials() -> list[optuna.trial.FrozenTrial]:
        try:
            # the journal read afresh
            return optuna.load_study(study_name=name, storage=storage(cfg)).get_trials()
        except KeyError:  # the stage has not created its study yet
            return []

    def outcome() -> dict:
        return {t.number: (t.state, t.value, t.params, t.intermediate_values) for t in trials()}

    run_to_the_end(
        tune_data, "tune", args, MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path / 'straight.db'}"
    )
    straight = outcome()
    assert len(straight) == 3 and {state for state, *_ in straight.values()} <= set(FINISHED), (
        straight
    )
    for leftover in (workdir, tuned_file, *journal_files(tune_data)):
        shutil.rmtree(leftover) if leftover.is_dir() else leftover.unlink()

    client = mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])

    def a_trial_finished_and_one_past_its_checkpoint() -> bool:
        now = trials()
        running = [t.number for t in now if t.state == State.RUNNING]
        if not (any(t.state in FINISHED for t in now) and running):
            return False
        partial = trial_dirs(workdir, running[0])[1]
        # inside its second epoch
        return (partial / "last.ckpt").is_file() and logged_step(client, partial) >= 17

    log = tmp_path / "tune.log"
    kill_when(
        launch(tune_data, "tune", args, log),
        a_trial_finished_and_one_past_its_checkpoint,
        log,
        "a finished trial and one past its first checkpoint",
    )
    before = trials()
    running = [t.number for t in before if t.state == State.RUNNING]
    finished = {
        t.number: (t.state, t.value, t.params, t.intermediate_values)
        for t in before
        if t.state in FINISHED
    }
    assert len(running) == 1 and finished, [(t.number, t.state) for t in before]
    assert not tuned_file.exists()
    partial = trial_dirs(workdir, running[0])[1]
    killed_run = read_json(partial / "run.json")["run_id"]
    assert read_checkpoint(partial / "last.ckpt")["global_step"] == 15, (
        "killed after its first epoch's checkpoint"
    )

    tune.main(args)
    said = capsys.readouterr().out
    assert f"trials {running} were left running by a killed worker; resumed first" in said
    assert f"resuming bahdanau seed 0 from {partial / 'last.ckpt'}" in said
    after = outcome()
    assert {n: after[n] for n in finished} == finished, (
        "the finished trials are kept as they were, not run again"
    )
    assert after == straight, (
        "the study ends as an uninterrupted one: the same trials, values and rungs"
    )
    mlflow.set_tracking_uri(os.environ["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(
        experiment_names=["translate"], output_format="list", filter_string="tags.stage = 'tune'"
    )
    per_trial = Counter(r.data.tags["trial"] for r in runs)
    assert sorted(per_trial) == [str(n) for n in sorted(after)] and max(per_trial.values()) == 1, (
        per_trial
    )
    # the killed trial's own run, finished by the resumed trial
    resumed = mlflow.get_run(killed_run)
    assert resumed.data.tags["trial"] == str(running[0]) and resumed.info.status in (
        "FINISHED",
        "KILLED",
    )
    best = yaml.safe_load(tuned_file.read_text())["study"]["best_trial"]
    assert [p.name for p in workdir.iterdir()] == [f"trial{best}"]


def journal_files(project: Path) -> list[Path]:
    return sorted((project / "tuned").glob("*.journal*"))


def logged_step(client: mlflow.MlflowClient, partial: Path, metric: str = "train/loss") -> int:
    """The last step of `metric` that the partial run's MLflow run holds (-1 before any)."""
    if not (partial / "run.json").is_file():
        return -1
    try:
        steps = client.get_metric_history(read_json(partial / "run.json")["run_id"], metric)
    # the stage holds the store's lock, or writes run.json
    except (mlflow.exceptions.MlflowException, ValueError):
        return -1
    return max((m.step for m in steps), default=-1)


@pytest.fixture
def classify_data(project, one_torch_thread):
    """60 labelled documents (and 120 unlabelled for pretraining)."""
    prepare.main(["task=classify", "data.n_train=60", "data.n_valid=15", "data.n_unlabelled=120"])
    return project


PRETRAIN = [
    "task=classify",
    "family=bert",
    *stage_overrides("bert"),
    "pretrain.vocab_size=300",
    "pretrain.max_tokens=64",
    "pretrain.batch_size=16",
    "pretrain.warmup_steps=2",
    "pretrain.max_updates=36",
    # 12 updates an epoch: saves inside epochs
    "pretrain.validate_every=9",
    "trainer.log_every_n_steps=1",
]


# three processes of the stage
def test_sigkilled_pretraining_resumes_inside_an_epoch_to_the_uninterrupted_encoder(
    classify_data, tmp_path
):
    """pretrain@bert killed with SIGKILL after a checkpoint taken inside an epoch (every 9 updates,
    12 an epoch): run again, it resumes at the next batch of that epoch
    (train.batching.ResumableLoader) and writes the uninterrupted run's models/pretrained/bert, byte
    for byte (what differs, the MLflow run and seconds, goes to bert.run.json)."""
    run_to_the_end(classify_data, "pretrain", PRETRAIN)
    out = pretrained_dir(stage_config(PRETRAIN))
    straight, files = read_json(out / "pretrain.json"), snapshot(out)
    assert sorted(Path(f).name for f in files) == [
        "config.json",
        "encoder.safetensors",
        "pretrain.json",
        "tokenizer.json",
    ]
    shutil.rmtree(out)
    partial, client = partial_dir(out, out), mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])

    # the save after update 9 or 18, two updates on, same epoch
    def past_a_checkpoint_inside_an_epoch() -> bool:
        step = logged_step(client, partial)
        return (partial / "last.ckpt").is_file() and step % 9 >= 2 and step % 12 > step % 9

    log = tmp_path / "pretrain.log"
    kill_when(
        launch(classify_data, "pretrain", PRETRAIN, log),
        past_a_checkpoint_inside_an_epoch,
        log,
        "an update past a checkpoint inside an epoch",
    )
    killed = read_checkpoint(partial / "last.ckpt")
    assert killed["global_step"] % 12 != 0, "the checkpoint was taken inside an epoch"
    assert not out.exists()

    assert f"resuming bert seed 0 from {partial / 'last.ckpt'}" in run_to_the_end(
        classify_data, "pretrain", PRETRAIN
    )
    resumed = read_json(out / "pretrain.json")
    same = ("steps", "epochs", "best_val", "last_val", "val_curve", "stopped_by")
    assert {k: resumed[k] for k in same} == {k: straight[k] for k in same}
    assert snapshot(out) == files, (
        "the same bytes: DVC skips the stages that read the encoder (tune_finetuned)"
    )
    assert not partial.exists()


# pretraining, then three processes of the fine-tuning stage
def test_sigkilled_fine_tuning_keeps_finished_runs_and_resumes_a_label_share_run(
    classify_data, tmp_path
):
    """finetune@bert with a run on all the labels and one on half of them (validated every 2
    epochs), killed with SIGKILL after the first had finished and the second had saved a checkpoint
    at a validation: run again (after DVC would have cleared the stage's output), the finished run
    is kept as it was (not trained again, its MLflow run the same), the second resumes from its
    last.ckpt, and both end as in an uninterrupted stage."""
    pretrain.main([a for a in PRETRAIN if not a.startswith("trainer.")])
    # 15 and 8 updates an epoch
    args = [
        "task=classify",
        "family=bert",
        *stage_overrides("bert"),
        "train.label_fractions=[1.0,0.5]",
        "train.max_epochs=3",
        "train.min_epochs=0",
        "train.batch_size=4",
        "train.processes=1",
        "train.max_minutes=5",
        "trainer.log_every_n_steps=1",
    ]
    cfg = stage_config(args)
    runs = {run.variant: run for run in get_task("classify").runs(cfg)}
    full, half = runs[None], runs["0.5"]
    run_to_the_end(classify_data, "train", args)
    straight = {v: read_json(r.out / "train.json") for v, r in runs.items()}
    assert straight["0.5"]["epochs"] == 6
    shutil.rmtree(seed_dir(cfg, 0).parent)
    client = mlflow.MlflowClient(os.environ["MLFLOW_TRACKING_URI"])
    first, second = run_partial(cfg, full), run_partial(cfg, half)

    def first_finished_and_second_past_a_checkpoint() -> bool:
        return (
            (first / "train.json").is_file()
            and (second / "last.ckpt").is_file()
            # saved after epoch 2 (16 updates), in epoch 3
            and logged_step(client, second) >= 18
        )

    log = tmp_path / "finetune.log"
    kill_when(
        launch(classify_data, "train", args, log),
        first_finished_and_second_past_a_checkpoint,
        log,
        "the first run finished and the second past its checkpoint",
    )
    assert read_checkpoint(second / "last.ckpt")["global_step"] == 16
    assert not seed_dir(cfg, 0).parent.exists(), "nothing published before every run is done"
    kept = snapshot(first)
    first_run = read_json(first / "run.json")["run_id"]

    said = run_to_the_end(classify_data, "train", args)
    assert "bert seed 0: finished before the stop, kept" in said
    assert f"resuming bert seed 0 from {second / 'last.ckpt'}" in said
    assert {str(f).replace(str(first), str(full.out)): b for f, b in kept.items()} == snapshot(
        full.out
    )
    assert read_json(full.out / "run.json")["run_id"] == first_run
    same = ("steps", "epochs", "best_val", "last_val", "val_curve", "stopped_by")
    for variant, run in runs.items():
        resumed = read_json(run.out / "train.json")
        assert {k: resumed[k] for k in same} == {k: straight[variant][k] for k in same}, variant
    assert not first.exists() and not second.exists()


# --- damaged and hostile checkpoints
# -------------------------------------------------------------------------------


class Payload:
    """Unpickles to open(marker, "w"): any code a hostile checkpoint could run; the marker file
    tells it ran."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def flip_a_weight(path: Path) -> None:
    """One byte flipped inside the largest tensor: torch.load alone reads it without complaint."""
    with zipfile.ZipFile(path) as archive:
        member = max(archive.infolist(), key=lambda i: i.file_size)
    data = bytearray(path.read_bytes())
    name_len, extra_len = struct.unpack(
        "<HH", data[member.header_offset + 26 : member.header_offset + 30]
    )
    data[member.header_offset + 30 + name_len + extra_len + member.compress_size // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    torch.load(path, map_location="cpu", weights_only=True)


def hostile(path: Path) -> None:
    torch.save(
        {"state_dict": {}, "hyper_parameters": {"cfg": Payload(path.with_name("pwned"))}}, path
    )


DAMAGES = {
    "truncated": truncate,
    "empty": empty,
    "a flipped byte": flip_a_weight,
    "hostile": hostile,
}


def test_a_hostile_checkpoint_is_refused_without_running_its_code(tmp_path):
    """weights_only=True: the pickled call never runs; unpickled the old way (weights_only=False),
    it would."""
    path = tmp_path / "best.ckpt"
    hostile(path)
    with pytest.raises(
        CheckpointError, match=re.escape(str(path)) + ": refused, it pickles the global io.open"
    ):
        load_model(path)
    assert not (tmp_path / "pwned").exists()
    # the payload is live: what
    torch.load(path, weights_only=False)["hyper_parameters"]["cfg"].close()
    assert (tmp_path / "pwned").exists()  # weights_only=True prevents


def test_every_checkpoint_load_in_the_code_is_weights_only():
    """Every torch.load call in src/ passes weights_only=True, and nothing else unpickles: no
    pickle.load(s), no numpy allow_pickle=True (the resume's load, Lightning's, is torch's default
    weights_only=True: see test_resume_never_unpickles_a_hostile_last_ckpt)."""
    calls = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "weights_only=False" not in text and "allow_pickle=True" not in text, path
        assert not re.search(r"\bpickle\.loads?\(", text), path
        for match in re.finditer(r"torch\.load\(", text):
            depth, end = 1, match.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(text[end], 0)
                end += 1
            calls.append((path.relative_to(SRC), text[match.end() : end - 1]))
    assert calls, "the scan found no torch.load call at all"
    assert [c for c in calls if "weights_only=True" not in c[1]] == []


@pytest.fixture
def evaluated(translate_data):
    """A one-epoch bahdanau, evaluated once: its best.ckpt and the evaluate stage's outputs."""
    train.main([*TRAIN, "train.max_epochs=1"])
    evaluate.main(TRAIN)
    cfg = stage_config(TRAIN)
    outputs = (
        translate_data / "plots" / "translate" / "bahdanau",
        translate_data / "metrics" / "translate",
        translate_data / "predictions" / "translate",
        translate_data / "results" / "translate" / "bahdanau",
    )
    assert (outputs[0] / "attention_0.png").is_file() and (outputs[1] / "bahdanau.json").is_file()
    assert (outputs[3] / "details.json").is_file()
    return seed_dir(cfg, 0) / "best.ckpt", outputs


def test_a_damaged_best_ckpt_stops_evaluate_and_export_naming_the_file(evaluated):
    """Truncated, empty, a flipped byte, hostile: evaluate and export stop with a CheckpointError
    that names best.ckpt; the earlier evaluation's outputs stay as they were, no ONNX folder
    appears, no pickled code runs."""
    best, outputs = evaluated
    good, before = best.read_bytes(), snapshot(*outputs)
    for damage, spoil in DAMAGES.items():
        best.write_bytes(good)
        spoil(best)
        for stage in (evaluate, export):
            with pytest.raises(CheckpointError, match=re.escape(str(best))):
                stage.main(TRAIN)
        assert snapshot(*outputs) == before, damage
        assert (
            not onnx_dir(stage_config(TRAIN)).exists() and not (best.parent / "pwned").exists()
        ), damage
        for folder in (outputs[0], outputs[3]):
            left = [p.name for p in folder.parent.iterdir()]
            assert left == ["bahdanau"], f"{damage}: a temporary folder is left"


def test_evaluate_and_export_failing_midway_leave_their_outputs_as_they_were(
    evaluated, monkeypatch
):
    """Failures after evaluate has drawn its plots (its MLflow logging; a pretrained family's
    missing pretrain.json) and while export writes its graphs: the previous outputs stay, byte for
    byte, and nothing half-written appears."""
    _, outputs = evaluated
    before = snapshot(*outputs)

    def log_runs(*args):
        raise ConnectionError("simulated: the tracking server went away")

    # a pretrained family whose models/pretrained/<family>/pretrain.json is missing
    def pretrained_config(argv):
        cfg = stage_config(argv)
        cfg.pretrained = True
        return cfg

    assert not (pretrained_dir(stage_config(TRAIN)) / "pretrain.json").exists()
    for name, replacement, error in (
        ("log_runs", log_runs, ConnectionError),
        ("stage_config", pretrained_config, FileNotFoundError),
    ):
        with monkeypatch.context() as patch:
            patch.setattr(evaluate, name, replacement)
            with pytest.raises(error):
                # other settings: other outputs, were they written
                evaluate.main([*TRAIN, "evaluate.heatmaps=2"])
        assert snapshot(*outputs) == before, name
        for folder in (outputs[0], outputs[3]):  # plots/ and results/
            left = [p.name for p in folder.parent.iterdir()]
            assert left == ["bahdanau"], f"{name}: a temporary folder is left"

    def half_export(model, out_dir, *args, **kwargs):
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        (out_dir / "encoder.onnx").write_bytes(b"half an encoder")
        raise ExportError("simulated failure midway")

    # under the task's export hook
    monkeypatch.setattr(translate_export, "export_and_check", half_export)
    with pytest.raises(SystemExit, match="simulated failure midway"):
        export.main(TRAIN)
    folder = onnx_dir(stage_config(TRAIN))
    assert not folder.exists() and not list(folder.parent.glob(".onnx*")), (
        "no ONNX folder, whole or partial"
    )


class Crash(pl.Callback):
    """Fails as the second epoch starts, after the first epoch's last.ckpt was written."""

    def on_train_epoch_start(self, trainer, module):
        if trainer.current_epoch == 1:
            raise RuntimeError("simulated crash")


RESUMED = [*TRAIN, "train.max_epochs=2"]


@pytest.fixture
def crashed_run(translate_data, monkeypatch):
    """The train stage's partial run of RESUMED, crashed after its first epoch: what the stage
    resumes."""
    train_one = training.train_one
    with monkeypatch.context() as patch:
        patch.setattr(
            training,
            "train_one",
            lambda *args, **kwargs: train_one(*args, **kwargs, callbacks=(Crash(),)),
        )
        with pytest.raises(RuntimeError, match="simulated crash"):
            train.main(RESUMED)
    out = seed_dir(stage_config(RESUMED), 0)
    return partial_dir(out, out.parent) / "last.ckpt"


@contextlib.contextmanager
def resuming(capsys):
    """The train stage must at least have tried to resume (not started over) whatever it raised."""
    try:
        yield
    finally:
        assert "resuming bahdanau seed 0" in capsys.readouterr().out, (
            "the stage did not even try to resume"
        )


def test_resume_never_unpickles_a_hostile_last_ckpt(crashed_run, capsys):
    """Lightning loads last.ckpt for the resume with torch's default, weights_only=True: the payload
    never runs."""
    hostile(crashed_run)
    with pytest.raises((pickle.UnpicklingError, CheckpointError)), resuming(capsys):
        train.main(RESUMED)
    assert not (crashed_run.parent / "pwned").exists()


def test_resuming_from_a_damaged_last_ckpt_names_the_file(crashed_run, capsys):
    """A truncated last.ckpt (a copy cut short) or one with a flipped byte (which would silently
    resume from damaged weights) stops the train stage with a CheckpointError naming that file."""
    good = crashed_run.read_bytes()
    for damage in ("truncated", "a flipped byte"):
        crashed_run.write_bytes(good)
        DAMAGES[damage](crashed_run)
        with pytest.raises(CheckpointError, match=re.escape(str(crashed_run))), resuming(capsys):
            train.main(RESUMED)


# --- outputs written atomically
# ------------------------------------------------------------------------------------


def fail(*args, **kwargs):
    raise OSError("simulated: disk full")


@pytest.mark.parametrize("stage", ["prepare", "tokenize"])
def test_a_data_stage_failing_midway_leaves_its_previous_output(project, stage, monkeypatch):
    """prepare and tokenize fail while writing their last file (stats.json), with other settings
    than last time: the folder holds the previous run's files, byte for byte, and no temporary
    folder is left beside it."""
    prepare.main(["data.n_train=50", "data.n_valid=10"])
    tokenizer.main(["data.n_train=50", "tokenize.vocab_size=200"])
    out = (
        project
        / "data"
        / stage.replace("tokenize", "tokenized").replace("prepare", "prepared")
        / "translate"
    )
    before = snapshot(out)
    module = {"prepare": prepare, "tokenize": tokenizer}[stage]
    monkeypatch.setattr(module, "write_json", fail)
    with pytest.raises(OSError, match="disk full"):
        module.main(["data.n_train=60", "data.n_valid=10", "tokenize.vocab_size=300"])
    assert snapshot(out) == before
    assert [p.name for p in out.parent.iterdir()] == ["translate"]


BERT = [
    "task=classify",
    "family=bert",
    *stage_overrides("bert"),
    "pretrain.vocab_size=300",
    "pretrain.max_tokens=64",
    "pretrain.batch_size=16",
    "pretrain.max_epochs=1",
    "pretrain.warmup_steps=2",
]


def test_pretraining_failing_while_saving_the_encoder_leaves_the_previous_one(
    project, one_torch_thread, monkeypatch
):
    """pretrain@bert (masked LM) fails while writing encoder.safetensors: models/pretrained/bert
    keeps the previous encoder, byte for byte, no checkpoint or half-written file lands there, and
    nothing is left beside it."""
    prepare.main(["task=classify", "data.n_train=90", "data.n_valid=15"])
    first = pretrain.main(BERT)
    out = pretrained_dir(stage_config(BERT))
    names = {p.name for p in out.iterdir()}
    assert {
        "config.json",
        "encoder.safetensors",
        "pretrain.json",
        "tokenizer.json",
    } <= names and first["source"] == "mlm"
    assert not [n for n in names if n.endswith(".ckpt")]
    assert sorted(p.name for p in out.parent.iterdir()) == ["bert", "bert.run.json"]
    before = snapshot(out, out.parent / "bert.run.json")

    def half_written(tensors, filename, *args, **kwargs):
        Path(filename).write_bytes(b"half an encoder")
        raise OSError("simulated: disk full")

    monkeypatch.setattr(pretrain, "save_file", half_written)
    with pytest.raises(OSError, match="disk full"):
        pretrain.main([*BERT, "pretrain.mask_rate=0.2"])
    assert snapshot(out, out.parent / "bert.run.json") == before
    # the finished pretraining run waits beside the output (never in it), for the next try to take
    # as it is
    assert sorted(p.name for p in out.parent.iterdir()) == [
        ".partial-bert",
        "bert",
        "bert.run.json",
    ]
    assert (out.parent / ".partial-bert" / "train.json").is_file()
