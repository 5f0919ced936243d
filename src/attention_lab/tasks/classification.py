"""Classification task: any DocumentClassifier family (conf/model/<family>.yaml) trained with cross-entropy.

Families that return a "penalty" (Lin et al. 2017's ‖AAᵀ − I‖²_F, eq. 8) add train.penalty × its batch mean to the loss.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torchmetrics.classification import MulticlassAccuracy

from attention_lab.data.document_batches import model_inputs
from attention_lab.tasks.base import TaskModule


class ClassificationModule(TaskModule):
    """Cross-entropy (+ the attention penalty where a family has one); val/loss and val/accuracy per epoch."""

    def __init__(self, cfg: dict, vocab_size: int, num_classes: int):
        super().__init__(cfg, vocab_size, num_classes=num_classes)
        self.val_accuracy = MulticlassAccuracy(num_classes, average="micro")

    def loss(self, batch: dict) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        out = self.model(*model_inputs(self.model, batch))
        loss = F.cross_entropy(out["logits"], batch["label"], label_smoothing=self.cfg.train.label_smoothing)
        if "penalty" in out and self.cfg.train.penalty:
            loss = loss + self.cfg.train.penalty * out["penalty"].mean()
        return loss, out

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss, out = self.loss(batch)
        self.check_finite(loss)
        self.tokens_seen += int(batch["token_mask"].sum())
        self.log("train/loss", loss, prog_bar=True, batch_size=batch["label"].shape[0], sync_dist=True)
        if "penalty" in out:
            self.log("train/penalty", out["penalty"].mean(), batch_size=batch["label"].shape[0], sync_dist=True)
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, out = self.loss(batch)
        self.val_accuracy.update(out["logits"].argmax(-1), batch["label"])
        self.log("val/loss", loss, prog_bar=True, batch_size=batch["label"].shape[0], sync_dist=True)
        self.log("val/accuracy", self.val_accuracy, prog_bar=True, batch_size=batch["label"].shape[0])
