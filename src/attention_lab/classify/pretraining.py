"""BERT pretraining (Devlin et al. 2018, §3.1): masked LM + a sentence-pair objective on the
training split's text and the prepared unlabelled documents (unlabelled.jsonl, when there is one);
validated on the valid split's text.

Loss = cross-entropy of the masked tokens + cross-entropy of the pair label (nsp or sop; none = MLM
only). Logged: train/val mlm_loss, mlm_accuracy (of the masked tokens), perplexity = exp(mlm_loss),
pair_accuracy.
"""

from __future__ import annotations

import math
from pathlib import Path

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from attention_lab.classify.data.batches import encode_text
from attention_lab.classify.masked_lm import IGNORE, collate_pairs, make_pairs, mask_tokens
from attention_lab.classify.models.bert import BertConfig, BertPretraining
from attention_lab.core.files import read_jsonl
from attention_lab.infer.tokenization import bert_special_ids
from attention_lab.train.batching import BucketBatchSampler, ResumableLoader, data_parallel
from attention_lab.train.module import TaskModule

# prepare's documents without labels (classify.prepare.unlabelled); may be absent
UNLABELLED = "unlabelled.jsonl"


def pretraining_text(prepared: Path, split: str) -> list[dict]:
    """The documents pretraining reads for `split`: train is the training split plus the unlabelled
    documents."""
    rows = read_jsonl(prepared / f"{split}.jsonl")
    if split == "train" and (prepared / UNLABELLED).is_file():
        rows += read_jsonl(prepared / UNLABELLED)
    return rows


class PretrainingModule(TaskModule):
    """BertPretraining sized by conf/model/<family>.yaml; cfg.train holds the pretrain knobs (lr,
    epochs, mask_rate …)."""

    def __init__(self, cfg: dict, vocab_size: int, special_ids: dict[str, int]):
        self.special_ids = special_ids
        super().__init__(cfg, vocab_size)

    def build_model(self, vocab_size: int, **model_kwargs) -> torch.nn.Module:
        sizes = {k: v for k, v in self.cfg.model.items() if k in BertConfig.__dataclass_fields__}
        return BertPretraining(
            BertConfig(**{**sizes, "vocab_size": vocab_size, "pad_id": self.special_ids["pad"]})
        )

    def step(
        self, batch: dict, stage: str, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        s, t = self.special_ids, self.cfg.train
        inputs, labels = mask_tokens(
            batch["ids"],
            batch["special"],
            s["mask"],
            self.model.bert.config.vocab_size,
            max(s.values()) + 1,
            t.mask_rate,
            generator,
        )
        # (B, S, V), (B, 2)
        mlm_logits, pair_logits = self.model(inputs, batch["mask"], batch["segments"])
        masked = labels != IGNORE  # (B, S)
        n = batch["ids"].shape[0]
        if masked.any():
            mlm_loss = F.cross_entropy(
                mlm_logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE
            )
            self.log_dict(
                {
                    f"{stage}/mlm_loss": mlm_loss,
                    f"{stage}/mlm_accuracy": (mlm_logits.argmax(-1) == labels)[masked]
                    .float()
                    .mean(),
                },
                batch_size=n,
                prog_bar=stage == "val",
                sync_dist=True,
            )
            # one step's; val/perplexity is the epoch's (on_validation_epoch_end)
            if stage == "train":
                self.log(
                    "train/perplexity", torch.exp(mlm_loss.detach()), batch_size=n, sync_dist=True
                )
        # nothing drawn to predict (a batch of very short texts): no MLM term, rather than a mean
        # over none (NaN)
        else:
            mlm_loss = mlm_logits.sum() * 0.0
        loss = mlm_loss
        if t.objective != "none":
            pair_loss = F.cross_entropy(pair_logits, batch["pair_label"])
            loss = loss + pair_loss
            self.log(
                f"{stage}/pair_accuracy",
                (pair_logits.argmax(-1) == batch["pair_label"]).float().mean(),
                batch_size=n,
                sync_dist=True,
            )
        self.log(f"{stage}/loss", loss, batch_size=n, prog_bar=True, sync_dist=True)
        return loss

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss = self.step(batch, "train")
        self.check_finite(loss)
        self.tokens_seen += int(batch["mask"].sum())
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        # the same masks every epoch
        self.step(batch, "val", torch.Generator().manual_seed(batch_idx))

    def on_validation_epoch_end(self) -> None:
        """val/perplexity = exp(the epoch's mean masked-LM loss), not the mean of the batches'
        exp."""
        if (loss := self.trainer.callback_metrics.get("val/mlm_loss")) is not None:
            self.log("val/perplexity", perplexity(float(loss)), prog_bar=True, sync_dist=True)


class PairDataModule(pl.LightningDataModule):
    """Sentence pairs of the pretraining text (pretraining_text, labels unused); new pairs every
    training epoch."""

    def __init__(
        self,
        prepared: str | Path,
        tok,
        batch_size: int,
        seed: int,
        objective: str,
        max_tokens: int,
        max_sentences: int,
        max_words: int,
    ):
        super().__init__()
        self.prepared, self.tok, self.batch_size, self.seed = Path(prepared), tok, batch_size, seed
        self.objective, self.max_tokens, self.limits = (
            objective,
            max_tokens,
            (max_sentences, max_words),
        )
        self.special_ids = bert_special_ids(tok)
        self.docs: dict[str, list[list[list[int]]]] = {}

    def setup(self, stage: str | None = None) -> None:
        for split in ("train", "valid"):
            if split not in self.docs:
                self.docs[split] = [
                    encode_text(self.tok, r["sentences"], *self.limits)[0]
                    for r in pretraining_text(self.prepared, split)
                ]

    def _loader(self, split: str, seed: int, shuffle: bool) -> DataLoader:
        pairs = make_pairs(self.docs[split], self.objective, self.max_tokens, seed)
        sampler = BucketBatchSampler(
            [len(p["a"]) + len(p["b"]) for p in pairs],
            self.batch_size,
            shuffle,
            seed,
            *data_parallel(self.trainer),
        )
        s = self.special_ids
        return ResumableLoader(
            pairs,
            batch_sampler=sampler,
            num_workers=0,
            collate_fn=lambda rows: collate_pairs(rows, s["cls"], s["sep"], s["pad"]),
        )

    # rebuilt every epoch (reload_dataloaders_every_n_epochs=1)
    def train_dataloader(self) -> DataLoader:
        epoch = self.trainer.current_epoch if self.trainer is not None else 0
        return self._loader("train", self.seed * 1000 + epoch, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("valid", self.seed, shuffle=False)


def perplexity(mlm_loss: float) -> float:
    """exp(masked-LM loss), capped at e^50 so a diverged run logs a number."""
    return math.exp(min(mlm_loss, 50.0))
