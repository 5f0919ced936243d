"""Classification task: any DocumentClassifier family (conf/model/<family>.yaml) trained with
cross-entropy.

Families that return a "penalty" (Lin et al. 2017's ‖AAᵀ − I‖²_F, eq. 8) add train.penalty × its
batch mean to the loss, the coefficient ramped from 0 over the first train.penalty_warmup updates
(this lab's recipe change, not the paper's).
"""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf
from torchmetrics.classification import MulticlassAccuracy

from attention_lab.classify.data.batches import model_inputs
from attention_lab.core.paths import prepared_dir, pretrained_dir, tokenizer_path
from attention_lab.train.module import TaskModule


class ClassificationModule(TaskModule):
    """Cross-entropy (+ the attention penalty where a family has one); val/loss and val/accuracy per
    epoch."""

    def __init__(self, cfg: dict, vocab_size: int, num_classes: int):
        super().__init__(cfg, vocab_size, num_classes=num_classes)
        self.val_accuracy = MulticlassAccuracy(num_classes, average="micro")

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        out = self.model(*model_inputs(self.model, batch))
        loss = F.cross_entropy(
            out["logits"], batch["label"], label_smoothing=self.cfg.train.label_smoothing
        )
        if "penalty" in out and self.cfg.train.penalty:
            loss = loss + self.penalty_coefficient() * out["penalty"].mean()
        return loss, out

    def penalty_coefficient(self) -> float:
        """train.penalty × min(1, update / train.penalty_warmup): Lin et al. 2017 eq. 8's penalty at
        full weight from the first update drives the hops onto single tokens within ~200 updates,
        before the classifier learns (a seed whose hops settle on the wrong tokens never recovers);
        the linear warm-up from 0 is this lab's recipe change. 0 updates (the default): the paper's
        constant coefficient."""
        t = self.cfg.train
        warmup = t.get("penalty_warmup", 0) or 0
        return t.penalty * (min(1.0, self.global_step / warmup) if warmup else 1.0)

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss, out = self.loss(batch)
        self.check_finite(loss)
        self.tokens_seen += int(batch["token_mask"].sum())
        self.log(
            "train/loss", loss, prog_bar=True, batch_size=batch["label"].shape[0], sync_dist=True
        )
        if "penalty" in out:
            self.log(
                "train/penalty",
                out["penalty"].mean(),
                batch_size=batch["label"].shape[0],
                sync_dist=True,
            )
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, out = self.loss(batch)
        self.val_accuracy.update(out["logits"].argmax(-1), batch["label"])
        self.log(
            "val/loss", loss, prog_bar=True, batch_size=batch["label"].shape[0], sync_dist=True
        )
        self.log(
            "val/accuracy", self.val_accuracy, prog_bar=True, batch_size=batch["label"].shape[0]
        )


def build(cfg: DictConfig, seed: int) -> tuple[pl.LightningModule, pl.LightningDataModule]:
    """Labelled documents (a stratified train.label_fraction of the training set, the same for every
    family) and a DocumentClassifier family, from its pretrained encoder if it has one; the training
    labels become cfg.task.labels."""
    from safetensors.torch import load_file

    from attention_lab.classify.data.datamodule import DocumentDataModule

    t = cfg.train
    dm = DocumentDataModule(
        prepared_dir(cfg),
        tokenizer_path(cfg),
        t.batch_size,
        seed,
        t.max_sentences,
        t.max_words,
        t.max_tokens,
        t.label_fraction,
        cfg.data.seed,
    )
    dm.setup()
    cfg.task.labels = dm.labels
    module = ClassificationModule(
        OmegaConf.to_container(cfg, resolve=True),
        vocab_size=dm.tok.get_vocab_size(),
        num_classes=len(dm.labels),
    )
    if cfg.pretrained:
        module.model.bert.load_state_dict(load_file(pretrained_dir(cfg) / "encoder.safetensors"))
    return module, dm
