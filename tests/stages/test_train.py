"""Training stage: seeded determinism, non-finite loss, MLflow run contents, scheduled sampling,
classify and caption runs, runs side by side (train_one itself, its resume and summary:
tests/train/test_training.py)."""

import math
import shutil

import mlflow
import pytest
import torch

from attention_lab.core.files import read_json
from attention_lab.core.paths import seed_dir
from attention_lab.stages import prepare, tokenizer, train
from attention_lab.stages.common import stage_config
from tests.tiny_models import stage_overrides

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out

SMALL = [
    *stage_overrides("bahdanau"),
    "data.n_train=200",
    "data.n_valid=30",
    "train.val_bleu_sentences=10",
    "train.batch_size=32",
    "train.max_minutes=5",
]


@pytest.fixture
def prepared(project):
    prepare.main(["data.n_train=200", "data.n_valid=30"])
    tokenizer.main(["data.n_train=200", "tokenize.vocab_size=200"])
    return project


def run(epochs: int, *extra: str, family: str = "bahdanau", small: tuple = tuple(SMALL)) -> dict:
    train.main([f"family={family}", *small, f"train.max_epochs={epochs}", *extra])
    cfg = stage_config([f"family={family}"])
    return read_json(seed_dir(cfg, 0) / "train.json")


def test_same_seed_same_metrics_and_mlflow_run(prepared):
    first = run(1)
    second = run(1)
    assert first["best_val"] == second["best_val"]
    assert first["steps"] == second["steps"] > 0
    cfg = stage_config(["family=bahdanau"])
    run_id = read_json(seed_dir(cfg, 0) / "run.json")["run_id"]
    mlflow.set_tracking_uri(f"sqlite:///{prepared / 'mlflow.db'}")
    logged = mlflow.get_run(run_id)
    assert logged.data.tags["family"] == "bahdanau" and logged.data.tags["seed"] == "0"
    assert logged.data.params["model.attn_dim"] == "16" and "train.lr" in logged.data.params
    assert "val/loss" in logged.data.metrics and "train_seconds" in logged.data.metrics


def test_non_finite_loss_stops_with_clear_error(prepared):
    with pytest.raises(FloatingPointError, match="non-finite training loss"):
        run(1, "train.lr=1e30", "train.clip=0", "train.warmup_steps=1")
    cfg = stage_config(["family=bahdanau"])
    assert not (seed_dir(cfg, 0) / "best.ckpt").exists()


def test_scheduled_sampling_trains_a_luong_model_and_logs_the_ratio_per_epoch(prepared):
    small = (
        *stage_overrides("luong_local_p"),
        "data.n_train=200",
        "data.n_valid=30",
        "train.val_bleu_sentences=10",
        "train.batch_size=32",
        "train.max_minutes=5",
    )
    summary = run(
        2,
        "train.teacher_forcing.schedule=linear",
        "train.teacher_forcing.slope=0.25",
        family="luong_local_p",
        small=small,
    )
    assert summary["epochs"] == 2 and math.isfinite(summary["best_val"])
    cfg = stage_config(["family=luong_local_p"])
    run_id = read_json(seed_dir(cfg, 0) / "run.json")["run_id"]
    mlflow.set_tracking_uri(f"sqlite:///{prepared / 'mlflow.db'}")
    history = mlflow.MlflowClient().get_metric_history(run_id, "train/teacher_forcing")
    assert [round(m.value, 6) for m in sorted(history, key=lambda m: m.step)] == [1.0, 0.75]


def test_scheduled_sampling_per_update_decays_within_the_epoch(prepared):
    """Bengio et al.'s schedule counts mini-batches: the epoch's logged ε is the mean over its
    updates."""
    small = (
        *stage_overrides("luong_local_p"),
        "data.n_train=200",
        "data.n_valid=30",
        "train.val_bleu_sentences=10",
        "train.batch_size=32",
        "train.max_minutes=5",
    )
    summary = run(
        1,
        "train.teacher_forcing.schedule=inverse_sigmoid",
        "train.teacher_forcing.per=update",
        "train.teacher_forcing.k=2",
        family="luong_local_p",
        small=small,
    )
    cfg = stage_config(["family=luong_local_p"])
    run_id = read_json(seed_dir(cfg, 0) / "run.json")["run_id"]
    mlflow.set_tracking_uri(f"sqlite:///{prepared / 'mlflow.db'}")
    (logged,) = mlflow.MlflowClient().get_metric_history(run_id, "train/teacher_forcing")
    updates = summary["steps"]  # one epoch's updates
    assert updates > 1
    assert logged.value == pytest.approx(
        sum(2 / (2 + math.exp(i / 2)) for i in range(updates)) / updates
    )


def test_classify_same_seed_same_metrics_and_penalty_logged(project):
    """A classify family through the same stage: seeded determinism and the self-attentive penalty
    in MLflow."""
    prepare.main(["task=classify", "data.n_train=90", "data.n_valid=15"])
    tokenizer.main(["task=classify"])
    small = [
        "task=classify",
        "family=self_attentive",
        *stage_overrides("self_attentive"),
        "train.max_epochs=1",
        "train.batch_size=16",
        "trainer.log_every_n_steps=1",
    ]
    cfg = stage_config(small)
    first, second = (
        train.main(small) or read_json(seed_dir(cfg, 0) / "train.json") for _ in range(2)
    )
    assert first["best_val"] == second["best_val"] and first["steps"] == second["steps"] == 6
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlflow.db'}")
    logged = mlflow.get_run(read_json(seed_dir(cfg, 0) / "run.json")["run_id"])
    assert logged.data.tags["task"] == "classify" and "train/penalty" in logged.data.metrics
    assert "val/accuracy" in logged.data.metrics


def test_caption_same_seed_same_metrics_and_penalty_logged(project):
    """A caption family through the same stage: seeded determinism, the doubly stochastic term and
    val/accuracy."""
    prepare.main(["task=caption", "data.n_train=64", "data.n_valid=16"])
    tokenizer.main(["task=caption"])
    small = [
        "task=caption",
        "family=show_attend_tell",
        *stage_overrides("show_attend_tell"),
        "train.max_epochs=1",
        "train.batch_size=16",
        "train.penalty=1.0",
        "trainer.log_every_n_steps=1",
    ]
    cfg = stage_config(small)
    first, second = (
        train.main(small) or read_json(seed_dir(cfg, 0) / "train.json") for _ in range(2)
    )
    assert first["best_val"] == second["best_val"] and first["steps"] == second["steps"] == 4
    mlflow.set_tracking_uri(f"sqlite:///{project / 'mlflow.db'}")
    logged = mlflow.get_run(read_json(seed_dir(cfg, 0) / "run.json")["run_id"])
    assert logged.data.tags["task"] == "caption" and logged.data.metrics["train/penalty"] > 0
    assert "val/accuracy" in logged.data.metrics


def test_unreachable_tracking_server_fails_before_training_and_writes_nothing(
    prepared, monkeypatch
):
    """MLflow would retry for minutes: the stage says which server and what to do, at once, and
    leaves no output."""
    import socket
    import time

    from attention_lab.core.tracking import TrackingError

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    start = time.monotonic()
    with pytest.raises(
        TrackingError, match=f"http://127.0.0.1:{port} is unreachable .*unset MLFLOW_TRACKING_URI"
    ):
        train.main(["family=bahdanau", *SMALL, "train.max_epochs=1"])
    assert time.monotonic() - start < 30
    assert not (prepared / "models").exists()


def test_a_run_into_a_log_prints_one_line_per_epoch(prepared, capsys):
    """stdout is not a terminal under pytest, as in a log file or CI: one line per validated epoch,
    no progress bar."""
    run(2)
    lines = [
        line
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("train bahdanau seed 0: epoch")
    ]
    assert [line.split(": epoch ")[1].split()[0] for line in lines] == ["1/2", "2/2"]
    assert "val/loss" in lines[0] and lines[-1].endswith("at most 0 s left")


def test_runs_side_by_side_match_runs_one_after_another(prepared, one_torch_thread):
    """train.processes=2 trains two seeds at once, one thread each: the same figures as one process
    training them in turn on one thread (each run depends on its seed only), and a data-parallel
    trainer is refused."""
    import yaml

    params = prepared / "params.yaml"
    params.write_text(
        yaml.safe_dump({**yaml.safe_load(params.read_text()), "seeds": [0, 1]}, sort_keys=False)
    )
    cfg = stage_config(["family=bahdanau"])
    figures = {}
    for processes in (2, 1):
        shutil.rmtree(seed_dir(cfg, 0).parent, ignore_errors=True)
        train.main(
            ["family=bahdanau", *SMALL, "train.max_epochs=1", f"train.processes={processes}"]
        )
        figures[processes] = [
            {
                k: v
                for k, v in read_json(seed_dir(cfg, s) / "train.json").items()
                if "seconds" not in k and "per_s" not in k
            }
            for s in (0, 1)
        ]
    assert figures[2] == figures[1] and figures[1][0]["best_val"] != figures[1][1]["best_val"]
    with pytest.raises(train.ConfigError, match="train.processes = 2 .* data-parallel trainer"):
        train.main(["family=bahdanau", *SMALL, "train.processes=2", "trainer=ddp"])


def test_plateau_schedule_cuts_the_rate_then_early_stopping_ends_the_run(prepared):
    # min_delta so large that only the first counted validation is an improvement: the second halves
    # the rate for the third epoch, the third halves it again and (patience 2) early stopping ends
    # the run, long before the cap
    plateau = [
        "train.schedule=plateau",
        "train.decay=0.5",
        "train.min_delta=1e9",
        "train.patience=2",
        "train.warmup_steps=1",
    ]
    stopped = run(20, *plateau, "train.min_epochs=0")
    assert stopped["stopped_by"] == "early stopping" and stopped["epochs"] == 3
    cfg = stage_config(["family=bahdanau", *SMALL])
    last = torch.load(seed_dir(cfg, 0) / "last.ckpt", weights_only=False)
    assert last["lr_scale"] == 0.25 and math.isfinite(last["best_val"])
    assert last["lr_schedulers"][0]["_last_lr"][0] == pytest.approx(cfg.train.lr * 0.5)
    # min_epochs 4: validations 1-3 neither cut the rate nor count for early stopping; 4 is the
    # first counted
    later = run(20, *plateau, "train.min_epochs=4")
    assert later["epochs"] == 6, later


def test_max_source_words_keeps_short_training_pairs_only(prepared):
    from attention_lab.core.task import get_task

    cfg = stage_config(["family=bahdanau", *SMALL, "train.max_source_words=8"])
    _, dm = get_task("translate").build(cfg, 0)
    for split in ("train", "valid"):
        assert dm.splits[split] and all(len(r["src"].split()) <= 8 for r in dm.splits[split])
    _, full = get_task("translate").build(stage_config(["family=bahdanau", *SMALL]), 0)
    assert len(dm.splits["train"]) < len(full.splits["train"])


def test_the_replication_trains_and_evaluates_its_fresh_seeds_apart(prepared):
    """train and evaluate with replication=true: params.yaml `translate.replication.bahdanau` seeds
    from 1000, under models/, metrics/, results/, predictions/ and plots/ replication/, beside
    nothing of the family's own runs."""
    import yaml

    from attention_lab.core.machine import cpu_model
    from attention_lab.results import records
    from attention_lab.stages import evaluate

    params = yaml.safe_load((prepared / "params.yaml").read_text())
    params["translate"]["replication"] = {"bahdanau": 2}
    (prepared / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    train.main(["family=bahdanau", *SMALL, "train.max_epochs=1", "replication=true"])
    evaluate.main(["family=bahdanau", *SMALL, "replication=true"])
    runs = prepared / "models" / "replication" / "bahdanau" / "checkpoints"
    assert sorted(p.name for p in runs.iterdir()) == ["seed1000", "seed1001"]
    assert not (prepared / "models" / "bahdanau").exists()
    record = records.read_at(prepared, "translate", "bahdanau", replication=True)
    predictions = read_json(
        prepared / "predictions" / "replication" / "translate" / "bahdanau.json"
    )
    assert sorted(record["per_seed"]) == sorted(predictions["seeds"]) == ["1000", "1001"]
    # each seed's record names the CPU that trained it
    assert record["machines"] == {"1000": [cpu_model()], "1001": [cpu_model()]}
    assert (prepared / "plots" / "replication" / "translate" / "bahdanau").is_dir()
    curves = prepared / "results" / "replication" / "translate" / "bahdanau"
    assert {records.curve_file(s) for s in (1000, 1001)} <= {p.name for p in curves.iterdir()}
