"""pretraining.py: the text pretraining reads (train + unlabelled, never valid), PairDataModule's
pair batches and PretrainingModule's losses on a tiny BERT. A whole pretrain stage (updates, MLflow
curves): tests/stages/test_pretrain.py."""

from __future__ import annotations

import math
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
import yaml

from attention_lab.classify.pretraining import (
    PairDataModule,
    PretrainingModule,
    perplexity,
    pretraining_text,
)
from attention_lab.core.files import write_jsonl
from attention_lab.infer.tokenization import train_wordpiece
from tests.tiny_models import DOCS, PAIRS, ROOT, TINY

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# 2 sentences each
UNLABELLED = [
    [PAIRS[i][0].split() + ["."], PAIRS[(i + 1) % 4][0].split() + ["."]] for i in range(4)
]


def write_prepared(folder: Path, unlabelled: bool = True) -> Path:
    """train.jsonl (DOCS), valid.jsonl (DOCS reversed) and, optionally, unlabelled.jsonl."""
    folder.mkdir(parents=True, exist_ok=True)
    splits = {
        "train": DOCS,
        "valid": DOCS[::-1],
        **({"unlabelled": UNLABELLED} if unlabelled else {}),
    }
    for split, docs in splits.items():
        rows = [
            {
                "id": f"{split}-{i}",
                "sentences": d,
                **({} if split == "unlabelled" else {"label": 0}),
            }
            for i, d in enumerate(docs)
        ]
        write_jsonl(folder / f"{split}.jsonl", rows)
    return folder


def test_pretraining_text_is_train_plus_unlabelled_never_valid(tmp_path):
    """train: the training split, then the unlabelled documents; valid: the valid split only; no
    unlabelled file: the training split alone."""
    prepared = write_prepared(tmp_path / "with")
    assert [r["sentences"] for r in pretraining_text(prepared, "train")] == DOCS + UNLABELLED
    assert [r["sentences"] for r in pretraining_text(prepared, "valid")] == DOCS[::-1]
    assert [
        r["sentences"]
        for r in pretraining_text(write_prepared(tmp_path / "without", False), "train")
    ] == DOCS


def data(prepared: Path, objective: str = "sop", batch_size: int = 8) -> PairDataModule:
    texts = [" ".join(w for s in d for w in s) for d in DOCS + UNLABELLED]
    tok = train_wordpiece(texts, vocab_size=120, min_frequency=1)
    dm = PairDataModule(
        prepared,
        tok,
        batch_size,
        seed=0,
        objective=objective,
        max_tokens=24,
        max_sentences=5,
        max_words=8,
    )
    dm.setup()
    return dm


def test_pair_batches_hold_one_pair_per_document(tmp_path):
    """One [CLS] A [SEP] B [SEP] row per document (7 train, 3 valid) of at most max_tokens, the same
    validation batches every time."""
    dm = data(write_prepared(tmp_path), batch_size=2)
    s = dm.special_ids
    train = [b for b in dm.train_dataloader()]
    assert sum(len(b["ids"]) for b in train) == len(DOCS) + len(UNLABELLED)
    for b in train:
        assert (b["ids"][:, 0] == s["cls"]).all() and ((b["ids"] == s["sep"]).sum(1) == 2).all()
        assert b["ids"].shape[1] <= 24 and set(b["pair_label"].tolist()) <= {0, 1}
    valid, again = list(dm.val_dataloader()), list(dm.val_dataloader())
    assert sum(len(b["ids"]) for b in valid) == len(DOCS)
    assert all(torch.equal(a["ids"], b["ids"]) for a, b in zip(valid, again, strict=True))


def module(dm: PairDataModule, objective: str, mask_rate: float = 0.3) -> PretrainingModule:
    model = {**yaml.safe_load((ROOT / "conf" / "model" / "bert.yaml").read_text()), **TINY["bert"]}
    cfg = {
        "model": model,
        "train": {
            "mask_rate": mask_rate,
            "objective": objective,
            "lr": 1e-3,
            "weight_decay": 0.0,
            "warmup_steps": 1,
            "schedule": "cosine",
        },
    }
    torch.manual_seed(0)
    return PretrainingModule(cfg, vocab_size=dm.tok.get_vocab_size(), special_ids=dm.special_ids)


def validate(m: PretrainingModule, dm: PairDataModule, root: Path) -> dict[str, float]:
    trainer = pl.Trainer(
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=root,
    )
    [metrics] = trainer.validate(m, datamodule=dm, verbose=False)
    return metrics


def test_validation_masks_the_same_tokens_every_time(tmp_path):
    """Validated twice, the same model scores the same: masks drawn from the batch index, not the
    global RNG."""
    dm = data(write_prepared(tmp_path))
    m = module(dm, "sop")
    first = validate(m, dm, tmp_path)
    torch.manual_seed(123)  # another global RNG state: the masks must not depend on it
    assert validate(m, dm, tmp_path) == first


@pytest.mark.parametrize("objective", ["sop", "nsp", "none"])
def test_loss_is_masked_lm_plus_the_pair_objective(tmp_path, objective):
    """val/loss = val/mlm_loss + the pair loss (sop, nsp; pair_accuracy logged), = val/mlm_loss
    alone for none; val/perplexity = exp(val/mlm_loss); mlm_accuracy a fraction."""
    dm = data(write_prepared(tmp_path), objective)
    got = validate(module(dm, objective), dm, tmp_path)
    assert math.isfinite(got["val/mlm_loss"]) and 0 <= got["val/mlm_accuracy"] <= 1
    assert got["val/perplexity"] == pytest.approx(math.exp(got["val/mlm_loss"]), rel=1e-5)
    if objective == "none":
        assert "val/pair_accuracy" not in got and got["val/loss"] == pytest.approx(
            got["val/mlm_loss"]
        )
    else:
        assert got["val/loss"] > got["val/mlm_loss"] and 0 <= got["val/pair_accuracy"] <= 1


def test_val_perplexity_is_exp_of_the_epoch_s_mean_loss(tmp_path):
    """Over several validation batches, val/perplexity = exp(mean val/mlm_loss), not the mean of
    each batch's exp (which is larger whenever the batches differ: Jensen)."""
    dm = data(write_prepared(tmp_path), batch_size=1)
    m = module(dm, "sop")
    got = validate(m, dm, tmp_path)
    assert len(list(dm.val_dataloader())) == 3
    assert got["val/perplexity"] == pytest.approx(math.exp(got["val/mlm_loss"]), rel=1e-5)


def test_a_batch_with_nothing_masked_trains_on_the_pair_objective_alone(tmp_path):
    """mask_rate 0 draws no token to predict: the loss is the pair objective's, finite, and no MLM
    figure is logged (a mean over no masked token would be NaN, and training would stop as
    diverged)."""
    dm = data(write_prepared(tmp_path), batch_size=2)
    m = module(dm, "sop", mask_rate=0.0)
    trainer = pl.Trainer(
        accelerator="cpu",
        max_epochs=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(m, datamodule=dm)
    got = trainer.callback_metrics
    assert math.isfinite(float(got["train/loss"])) and math.isfinite(float(got["val/loss"]))
    assert (
        "val/mlm_loss" not in got
        and "val/perplexity" not in got
        and 0 <= float(got["val/pair_accuracy"]) <= 1
    )


def test_an_epoch_of_training_counts_every_token_it_reads(tmp_path):
    """One epoch: a finite train/loss and tokens_seen = the non-pad tokens of every pair of the
    epoch's batches."""
    dm = data(write_prepared(tmp_path), batch_size=2)
    m = module(dm, "nsp")
    trainer = pl.Trainer(
        accelerator="cpu",
        max_epochs=1,
        limit_val_batches=0,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(m, datamodule=dm)
    assert math.isfinite(float(trainer.callback_metrics["train/loss"])) and trainer.global_step == 4
    assert m.tokens_seen == sum(int(b["mask"].sum()) for b in dm.train_dataloader()) > 0


def test_perplexity_is_exp_of_the_loss_capped_at_exp_50():
    """perplexity(l) = e^l, and e^50 for anything larger (a diverged run reads as a huge number, not
    inf)."""
    assert perplexity(0.0) == 1.0 and perplexity(math.log(7.0)) == pytest.approx(7.0)
    assert perplexity(1e6) == math.exp(50.0)
