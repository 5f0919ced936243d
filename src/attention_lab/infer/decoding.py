"""Greedy and beam search in NumPy over a decoder-step function, shared by torch models and
onnxruntime sessions. A step function maps (prev (B,) int64, state tuple, memory tuple) to
(log_probs (B, V) float32, new state tuple, attention (B, S)), every array batch-first.
`Hypothesis.tokens` holds neither bos nor eos and `Hypothesis.attention` has one row per token,
(len(tokens), S); len(tokens) <= max_len[b]. The `banned` ids get log-probability -inf before the
search chooses, in greedy and beam alike (docs/design.md, "Why the modules are as they are")."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Arrays = tuple[np.ndarray, ...]
StepFn = Callable[[np.ndarray, Arrays, Arrays], tuple[np.ndarray, Arrays, np.ndarray]]


@dataclass
class Hypothesis:
    """One decoded sentence: tokens (no bos/eos), search score, attention (len(tokens), S)."""

    tokens: list[int]
    score: float  # greedy: sum of log-probs; beam: sum of log-probs / lp(steps)
    attention: np.ndarray  # (len(tokens), S) float32
    logprob: float = 0.0  # sum of log-probs of the decoded steps (eos included when emitted)


def length_penalty(steps: int | np.ndarray, alpha: float) -> np.ndarray | float:
    """GNMT length penalty lp(y) = ((5 + |y|) / 6) ** alpha (Wu et al. 2016, eq. 14)."""
    return ((5.0 + steps) / 6.0) ** alpha


def _take(arrays: Arrays, index: np.ndarray) -> Arrays:
    return tuple(np.take(a, index, axis=0) for a in arrays)


def _as_max_len(max_len, batch: int) -> np.ndarray:
    max_len = np.broadcast_to(np.asarray(max_len, dtype=np.int64), (batch,))
    if (max_len < 1).any():
        raise ValueError(f"max_len must be >= 1 for every sentence, got {max_len.tolist()}")
    return max_len


def _as_banned(banned, eos: int) -> list[int]:
    banned = sorted({int(b) for b in banned})
    if eos in banned:
        raise ValueError(
            f"banned ids {banned} include eos ({eos}): no hypothesis could ever finish"
        )
    return banned


def _ban(log_probs: np.ndarray, banned: list[int]) -> np.ndarray:
    """log_probs (n, V) with the banned columns at -inf (a copy: the step's array is left as it
    came)."""
    if not banned:
        return log_probs
    out = np.array(log_probs, copy=True)
    out[:, banned] = -np.inf
    return out


def greedy(
    step: StepFn,
    state: Arrays,
    memory: Arrays,
    max_len: np.ndarray,
    bos: int = 1,
    eos: int = 2,
    banned: tuple[int, ...] = (),
) -> list[Hypothesis]:
    """Pick the most probable token that is not banned at every step, for the whole batch at
    once."""
    batch = len(memory[0])
    max_len = _as_max_len(max_len, batch)
    banned = _as_banned(banned, eos)
    rows = np.arange(batch)  # original index of each active row
    prev = np.full(batch, bos, dtype=np.int64)
    tokens: list[list[int]] = [[] for _ in range(batch)]
    attns: list[list[np.ndarray]] = [[] for _ in range(batch)]
    logprob = np.zeros(batch, dtype=np.float64)
    out: list[Hypothesis | None] = [None] * batch
    t = 0
    while len(rows):
        t += 1
        log_probs, state, attn = step(prev, state, memory)  # (n, V), ..., (n, S)
        log_probs = _ban(log_probs, banned)
        tok = log_probs.argmax(axis=1)  # (n,)
        logprob[rows] += log_probs[np.arange(len(rows)), tok]
        done = (tok == eos) | (t >= max_len[rows])
        for i, r in enumerate(rows):
            if tok[i] != eos:
                tokens[r].append(int(tok[i]))
                attns[r].append(attn[i])
            if done[i]:
                out[r] = Hypothesis(
                    tokens[r], float(logprob[r]), _stack(attns[r], attn.shape[1]), float(logprob[r])
                )
        if done.any():
            keep = np.flatnonzero(~done)
            rows, tok = rows[keep], tok[keep]
            state, memory = _take(state, keep), _take(memory, keep)
        prev = tok.astype(np.int64)
    return out  # type: ignore[return-value]


def _stack(rows: list[np.ndarray], src_len: int) -> np.ndarray:
    return np.stack(rows).astype(np.float32) if rows else np.zeros((0, src_len), dtype=np.float32)


def beam_search(
    step: StepFn,
    state: Arrays,
    memory: Arrays,
    max_len: np.ndarray,
    beam: int = 4,
    len_penalty: float = 1.0,
    bos: int = 1,
    eos: int = 2,
    banned: tuple[int, ...] = (),
) -> list[Hypothesis]:
    """Beam search with the GNMT length penalty; a sentence stops when `beam` hypotheses have
    emitted eos.

    Each step takes the 2*beam best extensions of the live beams (never a banned id): those ending
    in eos within the best `beam` are finished, the best `beam` others stay live (so beam=1
    reproduces greedy exactly). At max_len the live beams are finished as they are. The best
    finished hypothesis by score = logprob / lp(steps) is returned.
    """
    if beam < 1:
        raise ValueError(f"beam must be >= 1, got {beam}")
    batch = len(memory[0])
    max_len = _as_max_len(max_len, batch)
    banned = _as_banned(banned, eos)
    k = beam
    src_len = None
    rows = np.arange(batch)
    # (B*k,) every beam starts from its sentence's row
    flat = np.repeat(np.arange(batch), k)
    state, memory = _take(state, flat), _take(memory, flat)
    prev = np.full(batch * k, bos, dtype=np.int64)
    # (n, k) cumulative log-prob; only beam 0 is live at first
    cum = np.full((batch, k), -np.inf)
    cum[:, 0] = 0.0
    hist = np.zeros((batch * k, 0), dtype=np.int64)  # (n*k, t) tokens so far
    hist_attn: np.ndarray | None = None  # (n*k, t, S)
    finished: list[list[tuple[float, float, list[int], np.ndarray]]] = [[] for _ in range(batch)]
    t = 0
    while len(rows):
        t += 1
        n = len(rows)
        log_probs, state, attn = step(prev, state, memory)  # (n*k, V), ..., (n*k, S)
        log_probs = _ban(log_probs, banned)
        vocab, src_len = log_probs.shape[1], attn.shape[1]
        if hist_attn is None:
            hist_attn = np.zeros((batch * k, 0, src_len), dtype=np.float32)
        scores = (cum[:, :, None] + log_probs.reshape(n, k, vocab).astype(np.float64)).reshape(
            n, k * vocab
        )
        cand = _top(scores, min(2 * k, k * vocab))  # (n, 2k) candidate indices, best first
        cand_score = np.take_along_axis(scores, cand, axis=1)
        cand_beam, cand_tok = cand // vocab, cand % vocab
        is_eos = cand_tok == eos
        done = np.zeros(n, dtype=bool)
        # eos among the best k candidates: finish it (the eos step's attention row is dropped)
        for i, j in zip(*np.nonzero(is_eos[:, :k])):
            if np.isfinite(cand_score[i, j]):
                src = i * k + cand_beam[i, j]
                raw = float(cand_score[i, j])
                finished[rows[i]].append(
                    (raw / length_penalty(t, len_penalty), raw, hist[src].tolist(), hist_attn[src])
                )
        # the best k candidates that do not end in eos stay live
        order = np.argsort(is_eos, axis=1, kind="stable")[:, :k]  # (n, k)
        live_beam = np.take_along_axis(cand_beam, order, axis=1)
        live_tok = np.take_along_axis(cand_tok, order, axis=1)
        cum = np.take_along_axis(cand_score, order, axis=1)
        src = (np.arange(n)[:, None] * k + live_beam).reshape(-1)  # (n*k,) flat source beam
        state = _take(state, src)
        hist = np.concatenate([hist[src], live_tok.reshape(-1, 1)], axis=1)
        hist_attn = np.concatenate(
            [hist_attn[src], attn[src][:, None, :].astype(np.float32)], axis=1
        )
        for i, r in enumerate(rows):
            if len(finished[r]) >= k:
                done[i] = True
            elif t >= max_len[r]:
                for b in range(k):
                    if np.isfinite(cum[i, b]):
                        raw = float(cum[i, b])
                        finished[r].append(
                            (
                                raw / length_penalty(t, len_penalty),
                                raw,
                                hist[i * k + b].tolist(),
                                hist_attn[i * k + b],
                            )
                        )
                done[i] = True
        prev = live_tok.reshape(-1).astype(np.int64)
        if done.any():
            keep_rows = np.flatnonzero(~done)
            keep = (keep_rows[:, None] * k + np.arange(k)).reshape(-1)
            rows, cum = rows[keep_rows], cum[keep_rows]
            state, memory = _take(state, keep), _take(memory, keep)
            hist, hist_attn, prev = hist[keep], hist_attn[keep], prev[keep]
    return [_best(f, src_len or 0) for f in finished]


def _top(scores: np.ndarray, m: int) -> np.ndarray:
    """Indices of the m largest scores per row, best first, ties broken by the lower index (like
    argmax)."""
    if m >= scores.shape[1]:
        part = np.broadcast_to(np.arange(scores.shape[1]), scores.shape)
    else:
        part = np.argpartition(-scores, m - 1, axis=1)[:, :m]
    part_scores = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -part_scores), axis=1)
    return np.take_along_axis(part, order, axis=1)


def _best(finished: list[tuple[float, float, list[int], np.ndarray]], src_len: int) -> Hypothesis:
    if not finished:
        return Hypothesis(
            [], float("-inf"), np.zeros((0, src_len), dtype=np.float32), float("-inf")
        )
    # max keeps the first of equal scores
    score, raw, tokens, attn = max(finished, key=lambda f: f[0])
    return Hypothesis(tokens, score, np.asarray(attn, dtype=np.float32), raw)


def pad_batch(src_ids: list[list[int]], pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Right-pad token id lists into src (B, S) int64 and src_mask (B, S) bool (True = real
    token)."""
    if not src_ids or any(len(s) == 0 for s in src_ids):
        raise ValueError("pad_batch needs a non-empty batch of non-empty sentences")
    lengths = np.array([len(s) for s in src_ids])
    src = np.full((len(src_ids), lengths.max()), pad_id, dtype=np.int64)
    for i, s in enumerate(src_ids):
        src[i, : len(s)] = s
    return src, np.arange(src.shape[1])[None, :] < lengths[:, None]


def max_decode_len(src_mask: np.ndarray, max_len_ratio: float) -> np.ndarray:
    """Per-sentence step budget ceil(ratio * source tokens) + 10, shape (B,)."""
    return np.ceil(max_len_ratio * src_mask.sum(axis=1)).astype(np.int64) + 10


def search(
    step: StepFn,
    state: Arrays,
    memory: Arrays,
    max_len: np.ndarray,
    beam: int,
    len_penalty: float,
    bos: int = 1,
    eos: int = 2,
    banned: tuple[int, ...] = (),
) -> list[Hypothesis]:
    """Greedy when beam == 1, else beam search; neither ever emits an id of `banned`."""
    if beam == 1:
        return greedy(step, state, memory, max_len, bos=bos, eos=eos, banned=banned)
    return beam_search(
        step,
        state,
        memory,
        max_len,
        beam=beam,
        len_penalty=len_penalty,
        bos=bos,
        eos=eos,
        banned=banned,
    )
