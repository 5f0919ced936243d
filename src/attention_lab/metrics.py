"""Translation metrics: sacreBLEU corpus BLEU/chrF (with signatures), exact match, per-bucket BLEU, AER."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sacrebleu.metrics import BLEU, CHRF


def bucket_label(bucket: Sequence[int]) -> str:
    """[41, 1000] -> '41+', [11, 20] -> '11-20'."""
    lo, hi = bucket
    return f"{lo}+" if hi >= 1000 else f"{lo}-{hi}"


def bucket_key(bucket: Sequence[int]) -> str:
    """Metric-name form of a bucket: '41_plus', '11_20' (MLflow metric names allow no '+')."""
    return bucket_label(bucket).replace("+", "_plus").replace("-", "_")


def bucket_of(n_words: int, buckets: Sequence[Sequence[int]]) -> int:
    for i, (lo, hi) in enumerate(buckets):
        if lo <= n_words <= hi:
            return i
    raise ValueError(f"a source of {n_words} words falls in no bucket of {list(buckets)}")


def corpus_scores(hyps: list[str], refs: list[str]) -> dict:
    """sacreBLEU BLEU and chrF (default tokenizer 13a; Korean words are whitespace-separated) and exact match."""
    bleu, chrf = BLEU(), CHRF()
    return {
        "bleu": bleu.corpus_score(hyps, [refs]).score,
        "chrf": chrf.corpus_score(hyps, [refs]).score,
        "exact_match": 100.0 * float(np.mean([h == r for h, r in zip(hyps, refs)])) if refs else 0.0,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def bucket_bleu(hyps: list[str], refs: list[str], srcs: list[str], buckets) -> dict[str, float]:
    """Corpus BLEU within each source-length bucket: {'bleu_len_1_10': ..., 'bleu_len_41_plus': ...}."""
    which = [bucket_of(len(s.split()), buckets) for s in srcs]
    out = {}
    for i, b in enumerate(buckets):
        idx = [k for k, w in enumerate(which) if w == i]
        if idx:
            out[f"bleu_len_{bucket_key(b)}"] = BLEU().corpus_score([hyps[k] for k in idx], [[refs[k] for k in idx]]).score
    return out


def word_attention(attn: np.ndarray, src_words: list[int], tgt_words: list[int]) -> np.ndarray:
    """Subword attention (T, S) -> word attention (T_words, S_words): sum over source pieces, mean over target pieces."""
    n_src, n_tgt = max(src_words) + 1, max(tgt_words) + 1
    cols = np.zeros((attn.shape[0], n_src))
    np.add.at(cols.T, np.asarray(src_words), attn[:, :len(src_words)].T)
    rows = np.zeros((n_tgt, n_src))
    np.add.at(rows, np.asarray(tgt_words), cols[:len(tgt_words)])
    counts = np.bincount(np.asarray(tgt_words), minlength=n_tgt)[:, None]
    return rows / np.maximum(counts, 1)


def hard_alignment(word_attn: np.ndarray) -> set[tuple[int, int]]:
    """Each target word aligned to its most-attended source word: {(src_word, tgt_word)}."""
    return {(int(word_attn[j].argmax()), j) for j in range(word_attn.shape[0])}


def aer(predicted: list[set], gold: list[set]) -> float:
    """Alignment error rate (Och & Ney 2003), sure = possible = gold: 1 - 2|A∩S| / (|A| + |S|), corpus-level."""
    hit = sum(len(a & s) for a, s in zip(predicted, gold))
    total = sum(len(a) + len(s) for a, s in zip(predicted, gold))
    return 1.0 - 2.0 * hit / total if total else float("nan")
