"""Test scores of a captioner: BLEU-1..4 (sacrebleu, default 13a tokenisation, against every
reference caption of an image) and exact caption accuracy (equal to a reference), overall and per
digit-count bucket, and attention localisation: how often the argmax grid cell, while the model
emits a gold digit word (teacher forced), has its centre inside that digit's gold box, beside the
same score of a left-to-right sweep that never sees the image (its control). Photos (data
image_captions, coco_captions) have no buckets or boxes."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig
from sacrebleu.metrics import BLEU

from attention_lab.caption.data.batches import as_float, collate_canvases
from attention_lab.caption.search import caption_batch, decode_limit
from attention_lab.core.paths import prepared_dir, tokenizer_path, user_path
from attention_lab.core.task import Run
from attention_lab.infer.decoding import Hypothesis
from attention_lab.infer.tokenization import encode, load_tokenizer, never_emitted, tokens_of
from attention_lab.results.metrics import bucket_key, spread_over_buckets
from attention_lab.train.checkpoints import load_model


def cell_centres(grid: tuple[int, int], stride: int) -> np.ndarray:
    """Pixel centre (x, y) of each grid cell, row-major: (L, 2)."""
    rows, cols = np.divmod(np.arange(grid[0] * grid[1]), grid[1])
    return np.stack([(cols + 0.5) * stride, (rows + 0.5) * stride], -1)


def localisation_hits(attn: np.ndarray, boxes: list[list[int]], centres: np.ndarray) -> list[bool]:
    """attn (T, L) over the gold caption's steps; for each digit t: is argmax cell's centre inside
    boxes[t]?"""
    hits = []
    for t, (x0, y0, x1, y1) in enumerate(boxes):
        x, y = centres[int(attn[t].argmax())]
        hits.append(bool(x0 <= x < x1 and y0 <= y < y1))
    return hits


def sweep_hits(
    rows: list[dict], grid: tuple[int, int], stride: int, data: DictConfig
) -> list[list[bool]]:
    """Localisation hits, row by row, of a left-to-right sweep that knows the caption's length and
    the generator's average layout but never sees the image (the control of Xu et al. 2015's "fix
    its gaze"): digit t attends the cell holding its mean centre, max_offset/2 + t·(mean size + mean
    gap) + mean size/2 from the left, in the canvas's middle row."""
    size, gap = sum(data.digit_size) / 2, data.max_gap / 2
    centres = cell_centres(grid, stride)
    hits = []
    for r in rows:
        attn = np.zeros((len(r["boxes"]), len(centres)))  # (T, L): one-hot on the swept cell
        for t in range(len(r["boxes"])):
            x = min(data.max_offset / 2 + t * (size + gap) + size / 2, data.width - 1)
            col, row = int(x // stride), min(int(data.height / 2 // stride), grid[0] - 1)
            attn[t, row * grid[1] + min(col, grid[1] - 1)] = 1.0
        hits.append(localisation_hits(attn, r["boxes"], centres))
    return hits


def hit_counts(hits: list[list[bool]]) -> list[list[int]]:
    """Localisation's sufficient statistics item by item: [digits hit, digits] per canvas (N, 2)."""
    return [[sum(h), len(h)] for h in hits]


def localisation(hits: list[list[bool]]) -> float:
    """The share of digits whose attended cell lies in their box, over every canvas."""
    return float(np.mean([h for per_row in hits for h in per_row]))


def evaluate(
    model: torch.nn.Module, tok, rows: list[dict], images: np.ndarray, cfg: DictConfig, max_len: int
) -> tuple[dict, list[Hypothesis], list[str], list[list[bool]]]:
    """test/* scores, the hypotheses (for the overlays), their caption strings and the localisation
    hits canvas by canvas (none without attention or boxes), in row order, of one trained captioner
    on the test canvases, decoding at most max_len steps (decode_limit)."""
    e, buckets = cfg.evaluate, [tuple(b) for b in cfg.task.buckets]
    hyps, hits, seconds = [], [], 0.0
    centres = cell_centres(model.grid, model.cnn.stride)
    for i in range(0, len(rows), e.batch_size):
        part, ims = rows[i : i + e.batch_size], images[i : i + e.batch_size]
        t0 = time.perf_counter()
        hyps += caption_batch(
            model, as_float(ims), max_len, e.beam, e.len_penalty, banned=never_emitted(tok)
        )
        seconds += time.perf_counter() - t0
        if model.has_attention and "boxes" in rows[0]:
            batch = collate_canvases(list(zip(part, ims)))
            with torch.inference_mode():
                # (B, T, L), teacher forced on the gold caption
                _, attn = model(batch["images"], batch["tgt_in"])
            hits += [localisation_hits(a, r["boxes"], centres) for a, r in zip(attn.numpy(), part)]
    # as serving's Caption.text: every word
    texts = [" ".join(tokens_of(tok, h.tokens)) for h in hyps]
    scores = _scores(texts, rows, hits) | (
        bucket_scores(texts, rows, hits, buckets) if "n_digits" in rows[0] else {}
    )
    scores["test/decode_images_per_s"] = len(rows) / max(seconds, 1e-9)
    return scores, hyps, texts, hits


def vocab_coverage(tok, references: list[list[str]]) -> dict[str, float]:
    """How much of the test references the tokenizer's vocabulary covers (a captioner can only emit
    its words): test/vocab_coverage, the share of reference word tokens that are in the vocabulary
    (not <unk>), and test/references_in_vocab, the share of reference captions with no
    out-of-vocabulary word. 1.0 on the digits."""
    unk = tok.token_to_id("<unk>")
    ids = encode(tok, [c for refs in references for c in refs])
    words = sum(len(c) for c in ids)
    return {
        "test/vocab_coverage": sum(i != unk for c in ids for i in c) / max(words, 1),
        "test/references_in_vocab": sum(unk not in c for c in ids) / max(len(ids), 1),
    }


def bleu_scores(texts: list[str], references: list[list[str]]) -> dict[str, float]:
    """Corpus BLEU-1..4 (Papineni et al. 2002; sacrebleu, 13a tokenisation) of each text against all
    its references: test/bleu_1 .. test/bleu_4, and test/bleu = BLEU-4."""
    # sacrebleu skips None references
    streams = [
        [refs[k] if k < len(refs) else None for refs in references]
        for k in range(max(len(refs) for refs in references))
    ]
    out = {
        f"test/bleu_{n}": BLEU(max_ngram_order=n).corpus_score(texts, streams).score
        for n in range(1, 5)
    }
    return {**out, "test/bleu": out["test/bleu_4"]}


def bucket_scores(
    texts: list[str], rows: list[dict], hits: list[list[bool]], buckets: list[tuple[int, int]]
) -> dict[str, float]:
    """The scores of each digit-count bucket (a caption of n digits is n words), as
    `<name>_len_<lo>_<hi>`; BLEU-n only where every caption has n words or more (shorter ones have
    no n-grams: BLEU-4 of 3 words is 0, not a score)."""
    out = {}
    for lo, hi in buckets:
        keep = [k for k, r in enumerate(rows) if lo <= r["n_digits"] <= hi]
        if keep:
            for name, value in _scores(
                [texts[k] for k in keep],
                [rows[k] for k in keep],
                [hits[k] for k in keep] if hits else [],
            ).items():
                n = (
                    4
                    if name == "test/bleu"
                    else int(name[-1])
                    if name.startswith("test/bleu_")
                    else 0
                )
                if n <= lo:
                    out[f"{name}_len_{bucket_key((lo, hi))}"] = value
    return out


def _scores(texts: list[str], rows: list[dict], hits: list[list[bool]]) -> dict[str, float]:
    refs = [r.get("captions", [r["caption"]]) for r in rows]
    out = {
        **bleu_scores(texts, refs),
        "test/accuracy": float(np.mean([t in r for t, r in zip(texts, refs)])),
    }
    if hits:
        out["test/localisation"] = localisation(hits)
    return out


def evaluate_family(
    cfg: DictConfig, pictures: Path, runs: list[Run]
) -> tuple[dict[str, dict], dict]:
    """Per-seed test/* scores and captions of a captioner's runs (Task.runs: one per seed); per-word
    attention overlays (gold boxes in green) of the first seed on cfg.evaluate.overlays test
    canvases spread over the digit-count buckets."""
    from attention_lab.caption.data.batches import load_canvases
    from attention_lab.caption.serve import overlay

    tok = load_tokenizer(tokenizer_path(cfg))
    rows, images = load_canvases(prepared_dir(cfg), "test", tok)
    per_seed, outputs = (
        {},
        {"ids": [r["id"] for r in rows], "references": [r["caption"] for r in rows], "seeds": {}},
    )
    # photos: every reference caption, as the scores read them (the ledger's resamples)
    if "captions" in rows[0]:
        outputs["all_references"] = [r["captions"] for r in rows]
    # the same for every seed
    coverage = vocab_coverage(tok, [r.get("captions", [r["caption"]]) for r in rows])
    limit = decode_limit(cfg)
    for run in runs:
        seed = run.seed
        model, _ = load_model(run.out / "best.ckpt")
        scores, hyps, outputs["seeds"][str(seed)], hits = evaluate(
            model, tok, rows, images, cfg, limit
        )
        per_seed[str(seed)] = {**scores, **coverage}
        if hits:  # the same sweep for every seed: the control beside each
            swept = sweep_hits(rows, model.grid, model.cnn.stride, cfg.data)
            per_seed[str(seed)]["test/localisation_sweep"] = localisation(swept)
            for metric, found in (("test/localisation", hits), ("test/localisation_sweep", swept)):
                entry = outputs.setdefault("item_stats", {}).setdefault(
                    metric, {"score": "share", "seeds": {}}
                )
                entry["seeds"][str(seed)] = hit_counts(found)  # the ledger's test-item resamples
        if cut := sum(len(h.tokens) >= limit for h in hyps):  # stopped by the cap, not by eos
            print(
                f"{cfg.family} seed {seed}: {cut} of {len(hyps)} test captions reached the decoding"
                f" cap of {limit} steps (conf/task/caption.yaml evaluate.max_len_ratio)"
            )
        if (
            seed != cfg.seeds[0]
            or not model.has_attention
            or images.dtype != np.uint8
            and "image" not in rows[0]
        ):
            # canvases read as a CNN's annotations (a corpus's data.encoder) keep no pixels to draw
            # on
            continue
        shown = (
            spread_over_buckets(
                [r["n_digits"] for r in rows], cfg.task.buckets, cfg.evaluate.overlays
            )
            if "n_digits" in rows[0]
            else range(min(cfg.evaluate.overlays, len(rows)))
        )
        for k, i in enumerate(shown):
            words = tokens_of(tok, hyps[i].tokens)
            attn = hyps[i].attention.reshape(len(words), *model.grid)
            # a photo: its pixels (as the encoder read them) under the attention, a panel a word
            if "image" in rows[i]:
                from attention_lab.caption.data.photos import photo_folder, read_photo

                d = cfg.data
                folder = photo_folder(d, user_path(cfg, d.path))
                rgb = read_photo(folder / rows[i]["image"], d.height, d.max_pixels)
                overlay(rgb / 255.0, words, attn, scale=1).save(pictures / f"overlay_{k}.png")
            else:
                overlay(images[i] / 255.0, words, attn, boxes=rows[i]["boxes"]).save(
                    pictures / f"overlay_{k}.png"
                )
    return per_seed, outputs
