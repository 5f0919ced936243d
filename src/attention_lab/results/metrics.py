"""Translation metrics (sacreBLEU BLEU/chrF, exact match, per-bucket BLEU, AER) and classification
metrics (accuracy, macro-F1, per-bucket scores, rationale hits, word precision@k, hop overlap)."""

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
    """sacreBLEU BLEU and chrF (default tokenizer 13a; Korean words are whitespace-separated) and
    exact match."""
    bleu, chrf = BLEU(), CHRF()
    return {
        "bleu": bleu.corpus_score(hyps, [refs]).score,
        "chrf": chrf.corpus_score(hyps, [refs]).score,
        "exact_match": 100.0 * float(np.mean([h == r for h, r in zip(hyps, refs)]))
        if refs
        else 0.0,
        "bleu_signature": str(bleu.get_signature()),
        "chrf_signature": str(chrf.get_signature()),
    }


def bucket_bleu(hyps: list[str], refs: list[str], srcs: list[str], buckets) -> dict[str, float]:
    """Corpus BLEU within each source-length bucket: {'bleu_len_1_10': ..., 'bleu_len_41_plus':
    ...}."""
    which = [bucket_of(len(s.split()), buckets) for s in srcs]
    out = {}
    for i, b in enumerate(buckets):
        idx = [k for k, w in enumerate(which) if w == i]
        if idx:
            out[f"bleu_len_{bucket_key(b)}"] = (
                BLEU().corpus_score([hyps[k] for k in idx], [[refs[k] for k in idx]]).score
            )
    return out


def word_attention(attn: np.ndarray, src_words: list[int], tgt_words: list[int]) -> np.ndarray:
    """Subword attention (T, S) -> word attention (T_words, S_words): sum over source pieces, mean
    over target pieces."""
    n_src, n_tgt = max(src_words) + 1, max(tgt_words) + 1
    cols = np.zeros((attn.shape[0], n_src))
    np.add.at(cols.T, np.asarray(src_words), attn[:, : len(src_words)].T)
    rows = np.zeros((n_tgt, n_src))
    np.add.at(rows, np.asarray(tgt_words), cols[: len(tgt_words)])
    counts = np.bincount(np.asarray(tgt_words), minlength=n_tgt)[:, None]
    return rows / np.maximum(counts, 1)


def hard_alignment(word_attn: np.ndarray) -> set[tuple[int, int]]:
    """Each target word aligned to its most-attended source word: {(src_word, tgt_word)}."""
    return {(int(word_attn[j].argmax()), j) for j in range(word_attn.shape[0])}


def aer(predicted: list[set], gold: list[set]) -> float:
    """Alignment error rate (Och & Ney 2003), sure = possible = gold: 1 - 2|A∩S| / (|A| + |S|),
    corpus-level."""
    hit = sum(len(a & s) for a, s in zip(predicted, gold))
    total = sum(len(a) + len(s) for a, s in zip(predicted, gold))
    return 1.0 - 2.0 * hit / total if total else float("nan")


# --- document classification
# -------------------------------------------------------------------------------


def classification_scores(
    y_true: list[int], y_pred: list[int], num_classes: int | None = None
) -> dict:
    """scikit-learn accuracy and macro-F1 as fractions; macro-F1 over labels 0..num_classes-1
    (unseen ones score 0), or, with num_classes None, over the labels that occur in y_true or y_pred
    (for subsets such as length buckets)."""
    # lazy: ~1 s to import, only classification needs it
    from sklearn.metrics import accuracy_score, f1_score

    labels = list(range(num_classes)) if num_classes else sorted(set(y_true) | set(y_pred))
    return {
        "accuracy": float(accuracy_score(y_true, y_pred)),
        "macro_f1": float(
            f1_score(y_true, y_pred, average="macro", labels=labels, zero_division=0)
        ),
    }


def per_bucket_scores(
    lengths: list[int], y_true: list[int], y_pred: list[int], buckets, num_classes: int
) -> dict[str, dict]:
    """classification_scores plus "n" per bucket of document length in sentences: {'1_10': {...}}; a
    bucket's macro-F1 averages over the labels present in it, so a bucket holding one class is not
    scored down for the rest."""
    which = [bucket_of(n, buckets) for n in lengths]
    out = {}
    for i, b in enumerate(buckets):
        idx = [k for k, w in enumerate(which) if w == i]
        if idx:
            scores = classification_scores([y_true[k] for k in idx], [y_pred[k] for k in idx])
            out[bucket_key(b)] = {"n": len(idx), **scores}
    return out


def flat_to_sentences(flat: np.ndarray, sentence_lengths: Sequence[int]) -> list[np.ndarray]:
    """Weights over all words in order (T,) -> one (L_i,) array per sentence; extra positions:
    padding."""
    flat = np.asarray(flat, dtype=float)
    total = int(sum(sentence_lengths))
    if flat.ndim != 1 or flat.shape[0] < total:
        raise ValueError(f"flat weights of shape {flat.shape} cannot cover {total} words")
    return np.split(flat[:total], np.cumsum(sentence_lengths)[:-1])


def sentence_word_weights(word_weights, sentence_lengths: Sequence[int]) -> list[np.ndarray]:
    """Flat (T,), padded (N, L) or ragged word weights -> one unpadded (L_i,) array per sentence."""
    if isinstance(word_weights, np.ndarray) and word_weights.ndim == 1:
        return flat_to_sentences(word_weights, sentence_lengths)
    if len(word_weights) < len(sentence_lengths):
        raise ValueError(
            f"{len(word_weights)} rows of word weights for {len(sentence_lengths)} sentences"
        )
    rows = [np.asarray(w, dtype=float)[:n] for w, n in zip(word_weights, sentence_lengths)]
    if any(len(r) < n for r, n in zip(rows, sentence_lengths)):
        raise ValueError("a row of word weights is shorter than its sentence")
    return rows


def sentence_weights_from_words(flat: np.ndarray, sentence_lengths: Sequence[int]) -> np.ndarray:
    """Sentence weights (N,) for families attending over flat words: the sum over each sentence's
    words."""
    return np.array([w.sum() for w in flat_to_sentences(flat, sentence_lengths)])


def sentence_rationale_hit(sentence_weights: np.ndarray, gold_sentences: Sequence[int]) -> bool:
    """Whether the most-attended sentence (first on ties) is a gold key sentence."""
    return int(np.argmax(sentence_weights)) in set(gold_sentences)


def word_precision_at_k(
    word_weights,
    gold_words: Sequence[Sequence[int]],
    k: int,
    sentence_lengths: Sequence[int] | None = None,
) -> float:
    """Share of the k most-attended words (k capped at the word count) that are gold [sentence,
    word] pairs.

    word_weights: padded (N, L), ragged, or flat (T,); sentence_lengths drops padding (needed for
    flat).
    """
    rows = (
        [np.asarray(w, dtype=float) for w in word_weights]
        if sentence_lengths is None
        else sentence_word_weights(word_weights, sentence_lengths)
    )
    pos = [(i, j) for i, w in enumerate(rows) for j in range(len(w))]
    k = min(k, len(pos))
    if k <= 0:
        return float("nan")
    top = np.argsort(-np.concatenate(rows), kind="stable")[:k]  # ties: earlier words first
    gold = {(int(i), int(j)) for i, j in gold_words}
    return sum(pos[t] in gold for t in top) / k


def rationale_hits(docs: list[dict]) -> list[float]:
    """Each document's rationale hit (1: its most attended sentence is a gold one), over the
    documents with gold sentences (rationale_scores' docs), in order: the ledger's test-item
    resamples."""
    return [
        sentence_rationale_hit(d["sentence_weights"], d["gold"]["sentences"])
        for d in docs
        if (d.get("gold") or {}).get("sentences")
    ]


def rationale_scores(docs: list[dict], k: int = 5) -> dict:
    """Mean rationale hit and word precision@k over documents with gold (None where none has any).

    Each doc: {"sentence_weights": (N,), "word_weights": (N, L) or ragged, "gold": {"sentences",
    "words"} or None, optional "sentence_lengths"}.
    """
    hits, precisions = rationale_hits(docs), []
    for d in docs:
        gold = d.get("gold") or {}
        if gold.get("words"):
            lengths = d.get("sentence_lengths")
            precisions.append(word_precision_at_k(d["word_weights"], gold["words"], k, lengths))
    return {
        "rationale_acc": float(np.mean(hits)) if hits else None,
        "word_p_at_k": float(np.mean(precisions)) if precisions else None,
    }


def hop_overlap(hops: np.ndarray) -> float:
    """Mean over hop pairs i < j of sum_t min(a_i(t), a_j(t)): 1 = identical, 0 = disjoint; nan for
    r < 2.

    The redundancy measure for Lin et al. (2017)'s ||AA^T - I||_F^2 penalty ablation: it should
    lower it.
    """
    hops = np.asarray(hops, dtype=float)  # (r, T), each row a distribution over words
    r = hops.shape[0]
    if r < 2:
        return float("nan")
    i, j = np.triu_indices(r, 1)
    return float(np.minimum(hops[i], hops[j]).sum(axis=1).mean())


def spread_over_buckets(lengths: list[int], buckets, n: int) -> list[int]:
    """Indices of n test examples spread over the length buckets (shortest bucket first)."""
    by_bucket = {}
    for i, length in enumerate(lengths):
        by_bucket.setdefault(bucket_of(length, buckets), i)
    picks = [by_bucket[b] for b in sorted(by_bucket)]
    return [picks[round(k * (len(picks) - 1) / max(n - 1, 1))] for k in range(n)] if picks else []
