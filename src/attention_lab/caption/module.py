"""Caption task: a Captioner family (conf/model/<family>.yaml) trained with teacher forcing, plus Xu
et al. 2015's doubly stochastic regulariser for the families that attend (eq. 14): λ Σ_i (1 − Σ_t
α_ti)², λ = train.penalty."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from omegaconf import DictConfig, OmegaConf

from attention_lab.core.paths import prepared_dir, tokenizer_path
from attention_lab.infer.tokenization import EOS, PAD
from attention_lab.train.module import TaskModule


def doubly_stochastic_penalty(attn: torch.Tensor, tgt_out: torch.Tensor) -> torch.Tensor:
    """Σ_i (1 − Σ_t α_ti)² per image, over the real steps t (eos included): attn (B, T, L), tgt_out
    (B, T) -> (B,)."""
    # (B, L): attention each cell got over the caption
    total = (attn * (tgt_out != PAD).unsqueeze(-1)).sum(1)
    return ((1.0 - total) ** 2).sum(-1)


class CaptioningModule(TaskModule):
    """Cross-entropy on the next caption word (+ λ × the regulariser); val/loss (cross-entropy) and
    greedy val/accuracy (exact captions) per epoch."""

    def loss(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """-> (loss to minimise, cross-entropy, penalty batch mean)."""
        logits, attn = self.model(batch["images"], batch["tgt_in"])  # (B, T, V), (B, T, L)
        ce = F.cross_entropy(
            logits.flatten(0, 1),
            batch["tgt_out"].flatten(),
            ignore_index=PAD,
            label_smoothing=self.cfg.train.label_smoothing,
        )
        penalty = (
            doubly_stochastic_penalty(attn, batch["tgt_out"]).mean()
            if self.model.has_attention
            else ce.new_zeros(())
        )
        return ce + self.cfg.train.penalty * penalty, ce, penalty

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss, _, penalty = self.loss(batch)
        self.check_finite(loss)
        self.tokens_seen += int((batch["tgt_out"] != PAD).sum())
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["images"]), sync_dist=True)
        self.log("train/penalty", penalty, batch_size=len(batch["images"]), sync_dist=True)
        return loss

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        from attention_lab.caption.search import caption_batch

        _, ce, _ = self.loss(batch)
        hyps = caption_batch(self.model, batch["images"], max_len=batch["tgt_out"].shape[1] + 2)
        gold = [[t for t in row if t not in (PAD, EOS)] for row in batch["tgt_out"].tolist()]
        exact = torch.tensor(
            [float(h.tokens == g) for h, g in zip(hyps, gold)], device=self.device
        ).mean()
        self.log("val/loss", ce, prog_bar=True, batch_size=len(batch["images"]), sync_dist=True)
        self.log(
            "val/accuracy", exact, prog_bar=True, batch_size=len(batch["images"]), sync_dist=True
        )


def build(cfg: DictConfig, seed: int) -> tuple[pl.LightningModule, pl.LightningDataModule]:
    """Digit canvases and a Captioner family (the canvas size comes from cfg.data into the model's
    config)."""
    from attention_lab.caption.data.datamodule import CanvasDataModule

    dm = CanvasDataModule(prepared_dir(cfg), tokenizer_path(cfg), cfg.train.batch_size, seed)
    dm.setup()
    return CaptioningModule(
        OmegaConf.to_container(cfg, resolve=True), vocab_size=dm.tok.get_vocab_size()
    ), dm
