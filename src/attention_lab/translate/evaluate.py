"""Test-set evaluation of a trained translation model: decode, score, align, time."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig

from attention_lab.core.paths import prepared_dir, tokenized_dir
from attention_lab.core.task import Run
from attention_lab.infer.tokenization import (
    NEVER_EMITTED,
    decode,
    load_tokenizer,
    never_emitted,
    word_ids,
)
from attention_lab.results import metrics, plots
from attention_lab.results.metrics import spread_over_buckets
from attention_lab.train.checkpoints import load_model
from attention_lab.translate.data.batches import collate
from attention_lab.translate.search import translate_batch


def decode_corpus(
    model,
    src_ids: list[list[int]],
    beam: int,
    len_penalty: float,
    max_len_ratio: float,
    batch_size: int,
    banned: tuple[int, ...] = NEVER_EMITTED,
) -> tuple[list, float]:
    """Hypotheses in input order (batches of similar length), never an id of `banned`, and the
    wall-clock seconds it took."""
    order = sorted(range(len(src_ids)), key=lambda i: len(src_ids[i]))
    hyps = [None] * len(src_ids)
    t0 = time.perf_counter()
    for k in range(0, len(order), batch_size):
        idx = order[k : k + batch_size]
        for i, h in zip(
            idx,
            translate_batch(
                model, [src_ids[i] for i in idx], beam, len_penalty, max_len_ratio, banned=banned
            ),
        ):
            hyps[i] = h
    return hyps, time.perf_counter() - t0


@torch.inference_mode()
def forced_word_attention(
    model, tok, rows: list[dict], batch_size: int = 64
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Teacher-forced attention on the reference, summed to source words and averaged to target
    words, twice: each target token's the row that predicts it, and the row it is fed to (Luong et
    al. 2015, §5.4: the alignment of y_{t−1}, the word the decoder reads at step t)."""
    predicting, fed = [], []
    for k in range(0, len(rows), batch_size):
        chunk = rows[k : k + batch_size]
        batch = collate(chunk)
        # (B, T, S), T = longest reference + 1
        _, attn = model(batch["src"], batch["src_mask"], batch["tgt_in"])
        for b, r in enumerate(chunk):
            n, src, tgt = len(r["tgt_ids"]), word_ids(tok, r["src"]), word_ids(tok, r["tgt"])
            # (n + 1, S): row t reads token t−1 (bos first)
            a = attn[b, : n + 1, : len(r["src_ids"])].numpy()
            predicting.append(metrics.word_attention(a[:n], src, tgt))
            fed.append(metrics.word_attention(a[1:], src, tgt))
    return predicting, fed


def aer_counts(predicted: list[set], gold: list[set]) -> list[list[int]]:
    """metrics.aer's sufficient statistics sentence by sentence, [|A∩S|, |A| + |S|], for the
    ledger's resamples."""
    return [[len(a & s), len(a) + len(s)] for a, s in zip(predicted, gold)]


def evaluate(
    model, tok, rows: list[dict], cfg
) -> tuple[dict, list[str], list[np.ndarray] | None, dict[str, list]]:
    """test/* metrics of one model on prepared rows (with src_ids/tgt_ids), its detokenized
    hypotheses in row order, its word attentions and, for the alignment metrics, their counts item
    by item (aer_counts)."""
    e = cfg.evaluate
    hyps, seconds = decode_corpus(
        model,
        [r["src_ids"] for r in rows],
        e.beam,
        e.len_penalty,
        e.max_len_ratio,
        e.batch_size,
        never_emitted(tok),
    )
    texts = decode(tok, [h.tokens for h in hyps])
    refs, srcs = [r["tgt"] for r in rows], [r["src"] for r in rows]
    scores = metrics.corpus_scores(texts, refs)
    scores.update(metrics.bucket_bleu(texts, refs, srcs, cfg.task.buckets))
    n_tokens = sum(len(h.tokens) + 1 for h in hyps)
    scores.update(
        decode_seconds=seconds,
        decode_tokens_per_s=n_tokens / seconds,
        decode_sentences_per_s=len(rows) / seconds,
    )
    attentions, counts = None, {}
    if model.has_attention and all("align" in r for r in rows):
        attentions, fed = forced_word_attention(model, tok, rows)
        gold = [{tuple(p) for p in r["align"]} for r in rows]
        # aer_fed: Luong et al.'s rows
        for name, rows_of in (("aer", attentions), ("aer_fed", fed)):
            alignments = [metrics.hard_alignment(a) for a in rows_of]
            scores[name] = metrics.aer(alignments, gold)
            counts[f"test/{name}"] = aer_counts(alignments, gold)
    return {f"test/{k}": v for k, v in scores.items()}, texts, attentions, counts


def evaluate_family(
    cfg: DictConfig, pictures: Path, runs: list[Run]
) -> tuple[dict[str, dict], dict]:
    """Per-seed test/* scores and hypotheses of a translation family's runs (Task.runs: one per
    seed); attention heatmaps (gold alignment overlaid) of the first seed."""
    from attention_lab.translate.data.batches import load_split

    tok = load_tokenizer(tokenized_dir(cfg) / "tokenizer.json")
    rows = load_split(prepared_dir(cfg), "test", tok)
    per_seed, outputs = (
        {},
        {"ids": [r["id"] for r in rows], "references": [r["tgt"] for r in rows], "seeds": {}},
    )
    for run in runs:
        seed = run.seed
        model, _ = load_model(run.out / "best.ckpt")
        per_seed[str(seed)], outputs["seeds"][str(seed)], attentions, counts = evaluate(
            model, tok, rows, cfg
        )
        # the ledger's test-item resamples (results/evidence.py)
        for metric, items in counts.items():
            entry = outputs.setdefault("item_stats", {}).setdefault(
                metric, {"score": "aer", "seeds": {}}
            )
            entry["seeds"][str(seed)] = items
        if seed != cfg.seeds[0] or attentions is None:
            continue
        lengths = [len(r["src"].split()) for r in rows]
        for k, i in enumerate(
            spread_over_buckets(lengths, cfg.task.buckets, cfg.evaluate.heatmaps)
        ):
            plots.attention_heatmap(
                attentions[i],
                rows[i]["src"].split(),
                rows[i]["tgt"].split(),
                pictures / f"attention_{k}.png",
                gold={tuple(p) for p in rows[i]["align"]},
                title=f"{cfg.family}: test sentence {rows[i]['id']}",
            )
    return per_seed, outputs
