"""Translation task: any Seq2Seq family (conf/model/<family>.yaml) trained with teacher forcing in
Lightning."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf

from attention_lab.core.paths import prepared_dir, tokenized_dir
from attention_lab.infer.tokenization import PAD
from attention_lab.train.module import TaskModule

SCHEDULES = ("constant", "linear", "inverse_sigmoid")
# what the schedule's i counts: epochs, or optimiser updates (Bengio et al.'s mini-batches)
PER = ("epoch", "update")


def teacher_forcing_ratio(tf, i: int) -> float:
    """ε_i, the chance of feeding the gold token at step i (an epoch or an update, tf.per; Bengio et
    al. 2015, §2.4): constant ε_i = ratio, linear ε_i = max(min_ratio, ratio − slope·i), inverse
    sigmoid ε_i = k / (k + exp(i / k))."""
    per = tf.get("per", "epoch")
    if per not in PER:
        raise ValueError(
            f"train.teacher_forcing.per: expected one of {', '.join(PER)}, got {per!r}"
        )
    if tf.schedule == "constant":
        return float(tf.ratio)
    if tf.schedule == "linear":
        return max(float(tf.min_ratio), float(tf.ratio) - float(tf.slope) * i)
    if tf.schedule == "inverse_sigmoid":
        # exp overflows past 709
        return float(tf.k) / (float(tf.k) + math.exp(min(i / float(tf.k), 700.0)))
    raise ValueError(
        f"train.teacher_forcing.schedule: expected one of {', '.join(SCHEDULES)}, got"
        f" {tf.schedule!r}"
    )


class TranslationModule(TaskModule):
    """Cross-entropy on the next target token; validation loss plus greedy val/bleu on a fixed
    subset."""

    def __init__(self, cfg: dict, vocab_size: int):
        super().__init__(cfg, vocab_size)
        # validates the schedule
        self.teacher_forcing = teacher_forcing_ratio(self.cfg.train.teacher_forcing, 0)
        # (src ids, reference) for val/bleu, set by the stage
        self.val_refs: list[tuple[list[int], str]] = []
        self.detokenize = None

    def loss(self, batch: dict, teacher_forcing: float = 1.0) -> tuple[torch.Tensor, int]:
        if teacher_forcing < 1.0:
            logits, _ = self.model.sampled_forward(
                batch["src"], batch["src_mask"], batch["tgt_in"], teacher_forcing
            )
        else:
            logits, _ = self.model(batch["src"], batch["src_mask"], batch["tgt_in"])  # (B, T, V)
        n_tokens = int((batch["tgt_out"] != PAD).sum())
        loss = F.cross_entropy(
            logits.flatten(0, 1),
            batch["tgt_out"].flatten(),
            ignore_index=PAD,
            label_smoothing=self.cfg.train.label_smoothing,
        )
        return loss, n_tokens

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        if self.cfg.train.teacher_forcing.get("per", "epoch") == "update":
            self.teacher_forcing = teacher_forcing_ratio(
                self.cfg.train.teacher_forcing, self.global_step
            )
        loss, n_tokens = self.loss(batch, self.teacher_forcing)
        self.check_finite(loss)
        self.tokens_seen += n_tokens
        self.log(
            "train/loss", loss, prog_bar=True, batch_size=batch["src"].shape[0], sync_dist=True
        )
        self.log(
            "train/teacher_forcing",
            self.teacher_forcing,
            on_step=False,
            on_epoch=True,
            batch_size=1,
            sync_dist=True,
        )
        return loss

    def on_train_epoch_start(self) -> None:
        super().on_train_epoch_start()
        if self.cfg.train.teacher_forcing.get("per", "epoch") == "epoch":
            self.teacher_forcing = teacher_forcing_ratio(
                self.cfg.train.teacher_forcing, self.current_epoch
            )

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        loss, _ = self.loss(batch)
        self.log("val/loss", loss, prog_bar=True, batch_size=batch["src"].shape[0], sync_dist=True)

    def on_validation_epoch_end(self) -> None:
        if not self.val_refs or self.detokenize is None or self.trainer.sanity_checking:
            return
        from sacrebleu.metrics import BLEU

        from attention_lab.translate.search import translate_batch

        src_ids = [s for s, _ in self.val_refs]
        hyps = translate_batch(
            self.model,
            src_ids,
            beam=1,
            len_penalty=0.0,
            max_len_ratio=self.cfg.evaluate.max_len_ratio,
        )
        texts = self.detokenize([h.tokens for h in hyps])
        # every process decodes the same sentences with the same weights: the same score, averaged
        # to itself
        self.log(
            "val/bleu",
            BLEU().corpus_score(texts, [[r for _, r in self.val_refs]]).score,
            prog_bar=True,
            sync_dist=True,
        )


def build(cfg: DictConfig, seed: int) -> tuple[pl.LightningModule, pl.LightningDataModule]:
    """Sentence pairs and a Seq2Seq family; greedy val/bleu on the first train.val_bleu_sentences
    valid pairs."""
    from attention_lab.infer.tokenization import decode
    from attention_lab.translate.data.datamodule import TranslationDataModule

    dm = TranslationDataModule(
        prepared_dir(cfg),
        tokenized_dir(cfg) / "tokenizer.json",
        cfg.train.batch_size,
        seed,
        cfg.train.get("max_source_words"),
    )
    dm.setup()
    module = TranslationModule(
        OmegaConf.to_container(cfg, resolve=True), vocab_size=dm.tok.get_vocab_size()
    )
    module.val_refs = [
        (r["src_ids"], r["tgt"]) for r in dm.splits["valid"][: cfg.train.val_bleu_sentences]
    ]
    module.detokenize = lambda ids: decode(dm.tok, ids)
    return module, dm
