"""training.py: train_one's exact resume (and not resuming a crashed run of other settings), its
reshuffled epochs and what its summary says stopped training. Run through the train stage where a
whole run is needed (tests/stages/ test_train.py's `run`); the tune stage's best trial taken as a
run: tests/stages/test_tune.py."""

import shutil

import lightning.pytorch as pl
import pytest
import torch

from attention_lab.core.files import read_json
from attention_lab.core.machine import cpu_model
from attention_lab.core.paths import partial_dir, seed_dir
from attention_lab.core.task import get_task
from attention_lab.stages import prepare, tokenizer
from attention_lab.stages.common import stage_config
from attention_lab.train import training
from tests.stages.test_train import SMALL, run

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out


@pytest.fixture
def prepared(project):
    prepare.main(["data.n_train=200", "data.n_valid=30"])
    tokenizer.main(["data.n_train=200", "tokenize.vocab_size=200"])
    return project


class Crash(pl.Callback):
    """Kills training as the second epoch starts, after the first epoch's checkpoint was written."""

    def on_train_epoch_start(self, trainer, module):
        if trainer.current_epoch == 1:
            raise RuntimeError("simulated crash")


def test_resume_from_last_checkpoint_matches_uninterrupted(prepared):
    straight = run(2)
    cfg = stage_config(["family=bahdanau", *SMALL, "train.max_epochs=2"])
    out = seed_dir(cfg, 0)
    shutil.rmtree(out)
    with pytest.raises(RuntimeError, match="simulated crash"):
        training.train_one(
            cfg.copy(),
            get_task(cfg.task.name),
            0,
            out,
            partial_dir(out, out.parent),
            callbacks=(Crash(),),
        )
    partial = partial_dir(out, out.parent)
    assert (partial / "last.ckpt").is_file() and not out.exists()  # nothing half-written in place
    # as if the first epoch had trained on another CPU: the summary names both, in order
    last = torch.load(partial / "last.ckpt", weights_only=False)
    assert last["machines"] == [cpu_model()]
    torch.save({**last, "machines": ["another CPU"]}, partial / "last.ckpt")
    resumed = run(2)
    assert resumed["best_val"] == straight["best_val"]
    assert resumed["steps"] == straight["steps"]
    assert straight["machines"] == [cpu_model()]
    assert resumed["machines"] == ["another CPU", cpu_model()]
    assert not partial.exists()


def test_a_crashed_run_of_other_settings_is_not_resumed(prepared, capsys):
    cfg = stage_config(["family=bahdanau", *SMALL, "train.max_epochs=2", "train.lr=0.01"])
    out = seed_dir(cfg, 0)
    with pytest.raises(RuntimeError, match="simulated crash"):
        training.train_one(
            cfg.copy(),
            get_task(cfg.task.name),
            0,
            out,
            partial_dir(out, out.parent),
            callbacks=(Crash(),),
        )
    crashed_run = read_json(partial_dir(out, out.parent) / "run.json")["run_id"]
    straight = run(2)  # the default lr: a fresh run, not the crashed one's second epoch
    assert "not resuming" in capsys.readouterr().out
    assert read_json(out / "run.json")["run_id"] != crashed_run and straight["epochs"] == 2


class FirstBatches(pl.Callback):
    """Records each training epoch's first batch."""

    def __init__(self):
        self.first = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        if batch_idx == 0:
            self.first.append(batch["src"].clone())


def test_every_epoch_reshuffles_the_batches(prepared):
    cfg = stage_config(["family=bahdanau", *SMALL, "train.max_epochs=2"])
    out = seed_dir(cfg, 0)
    seen = FirstBatches()
    training.train_one(
        cfg.copy(), get_task(cfg.task.name), 0, out, partial_dir(out, out.parent), callbacks=(seen,)
    )
    assert len(seen.first) == 2 and not torch.equal(seen.first[0], seen.first[1])


def test_the_summary_says_what_stopped_training(prepared):
    """train.json's stopped_by: the epoch cap when every epoch ran; early stopping when val/loss
    stopped improving for train.patience validations (a zero learning rate after warm-up never
    improves on the first validation)."""
    assert run(2)["stopped_by"] == "epoch cap"
    stopped = run(
        6, "train.patience=1", "train.lr=1e-9", "train.warmup_steps=1", "train.min_epochs=0"
    )
    assert stopped["stopped_by"] == "early stopping" and stopped["epochs"] < 6


def test_a_run_s_settings_go_on_a_copy_of_the_family_s_config_in_order():
    from omegaconf import OmegaConf

    from attention_lab.core.task import Run

    cfg = OmegaConf.create({"train": {"max_epochs": 4}})
    OmegaConf.set_struct(cfg, True)
    run = Run(
        0, "out", settings=(("train.share", 0.5), ("train.max_epochs", 8), ("train.share", 0.25))
    )
    run_cfg = training.run_settings(cfg, run)
    assert OmegaConf.to_container(run_cfg) == {"train": {"max_epochs": 8, "share": 0.25}}
    assert OmegaConf.to_container(cfg) == {"train": {"max_epochs": 4}}


class Climber(pl.LightningModule):
    """Logs a val/loss that rises at every validation while val/accuracy climbs for `climb`
    validations, then stays flat: a task judged on accuracy (classify) whose loss says stop."""

    def __init__(self, climb: int):
        super().__init__()
        self.w, self.climb = torch.nn.Parameter(torch.zeros(1)), climb

    def training_step(self, batch, batch_idx):
        return (self.w * batch[0]).sum()

    def validation_step(self, batch, batch_idx):
        v = self.current_epoch + 1  # validations so far
        self.log("val/loss", 1.0 + 0.1 * v)
        self.log("val/accuracy", 0.5 + 0.01 * min(v, self.climb))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_a_maximised_metric_stops_the_run_and_picks_its_checkpoint(tmp_path):
    """Stopping on val/accuracy (mode max): a rising val/loss does not stop a run whose accuracy
    still climbs; it stops `patience` validations after accuracy's last gain, best.ckpt is the best
    accuracy, and val_curve holds the monitored metric at every validation."""
    from lightning.pytorch.callbacks import ModelCheckpoint

    from attention_lab.train.module import EarlyStoppingAfter, improved, monitored

    monitor, mode = monitored({"tune": {"metric": "val/accuracy", "direction": "maximize"}})
    assert (monitor, mode) == ("val/accuracy", "max")
    assert monitored({"tune": {"metric": "val/loss", "direction": "minimize"}}) == (
        "val/loss",
        "min",
    )
    # the plateau schedule's comparison (TaskModule.update_schedule): better by more than min_delta,
    # either way
    assert improved(0.60, 0.59, 0.005, "max") and not improved(0.593, 0.59, 0.005, "max")
    assert improved(1.0, 1.02, 0.01, "min") and not improved(1.0, 1.005, 0.01, "min")
    data = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.ones(4, 1)), batch_size=2
    )
    ckpt = ModelCheckpoint(
        dirpath=tmp_path, filename="best", monitor=monitor, mode=mode, save_top_k=1
    )
    early = EarlyStoppingAfter(patience=2, min_delta=0.005, start=3, monitor=monitor, mode=mode)
    curve = training.ValCurve(monitor)
    trainer = pl.Trainer(
        max_epochs=20,
        callbacks=[ckpt, early, curve],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=tmp_path,
    )
    trainer.fit(Climber(climb=8), data, data)
    # gains until validation 8, two without: stopped after validation 10
    assert trainer.current_epoch == 10
    assert training.stopped_by(trainer, early) == "early stopping"
    assert float(ckpt.best_model_score) == pytest.approx(0.58) and ckpt.best_model_path.endswith(
        "best.ckpt"
    )
    # validation 8's checkpoint
    assert torch.load(ckpt.best_model_path, weights_only=False)["epoch"] == 7
    assert [e for e, _ in curve.curve] == list(range(1, 11)) and curve.curve[-1] == [10, 0.58]
    # the old monitor: val/loss, min
    loss_stop = EarlyStoppingAfter(patience=2, min_delta=0.005, start=3)
    trainer = pl.Trainer(
        max_epochs=20,
        callbacks=[loss_stop],
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        enable_checkpointing=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(Climber(climb=8), data, data)
    assert trainer.current_epoch < 8  # on val/loss the same run stops mid-climb
