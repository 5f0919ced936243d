"""BERT pretraining data (Devlin et al. 2018, §3.1 and appendix A.1): sentence-pair examples `[CLS]
A [SEP] B [SEP]` from unlabelled documents, A and B consecutive runs of a document's sentences,
labelled for next-sentence prediction (`nsp`) or sentence-order prediction (`sop`, Lan et al. 2019);
and dynamic masking, redrawn for every batch: `mask_rate` of the non-special tokens are chosen, 80%
of them become [MASK], 10% a random token, 10% stay (docs/design.md, "Why the modules are as they
are")."""

from __future__ import annotations

import random

import torch

IGNORE = -100
OBJECTIVES = ("nsp", "sop", "none")


def mask_tokens(
    ids: torch.Tensor,
    special: torch.Tensor,
    mask_id: int,
    vocab_size: int,
    first_token: int,
    rate: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Devlin 2018 §3.1 masked LM input: ids (B, S), special (B, S) True at [CLS]/[SEP]/[PAD] ->
    (inputs, labels).

    Random replacements are drawn from the ordinary tokens first_token..vocab_size-1. Every draw is
    on the CPU (its global generator, which checkpoints keep, or `generator`), then moved to ids'
    device: the same masks on a GPU.
    """
    chosen = (torch.rand(ids.shape, generator=generator).to(ids.device) < rate) & ~special  # (B, S)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    # < 0.8: [MASK]; 0.8-0.9: random; else kept
    action = torch.rand(ids.shape, generator=generator).to(ids.device)
    random_ids = torch.randint(first_token, vocab_size, ids.shape, generator=generator).to(
        ids.device
    )
    inputs = torch.where(chosen & (action < 0.8), torch.full_like(ids, mask_id), ids)
    inputs = torch.where(chosen & (action >= 0.8) & (action < 0.9), random_ids, inputs)
    return inputs, labels


def _take(sentences: list[list[int]], room: int, from_end: bool = False) -> list[int]:
    """The tokens of whole sentences, cut to `room` tokens (from the start, or keeping the end)."""
    flat = [t for s in sentences for t in s]
    return flat[-room:] if from_end else flat[:room]


def sentence_pair(
    doc: list[list[int]],
    other: list[list[int]],
    objective: str,
    max_tokens: int,
    rng: random.Random,
) -> tuple[list[int], list[int], int]:
    """(A, B, label) from a document of sentences of token ids (`other`: a different document, for
    nsp).

    Each side gets half the room (max_tokens - 3 for [CLS] [SEP] [SEP]); A keeps its end, B its
    start, so the two stay adjacent at the split. label 1 = B follows A in its document (nsp) / A
    and B in order (sop); 0 otherwise.
    """
    room = (max_tokens - 3) // 2
    doc = [s for s in doc if s]
    if len(doc) < 2:  # one sentence: split it in the middle
        flat = doc[0] if doc else []
        doc = [flat[: len(flat) // 2], flat[len(flat) // 2 :]]
    cut = rng.randint(1, len(doc) - 1)
    a, b, label = _take(doc[:cut], room, from_end=True), _take(doc[cut:], room), 1
    if objective == "nsp" and rng.random() < 0.5:
        other = [s for s in other if s]
        b, label = _take(other[rng.randint(0, len(other) - 1) :], room), 0
    elif objective == "sop" and rng.random() < 0.5:
        a, b, label = b, a, 0
    return a, b, label


def make_pairs(
    docs: list[list[list[int]]], objective: str, max_tokens: int, seed: int
) -> list[dict]:
    """One pair per document, drawn from `seed` (a new draw per epoch gives new splits, partners and
    orders)."""
    if objective not in OBJECTIVES:
        raise ValueError(
            f"pretrain.objective: expected one of {', '.join(OBJECTIVES)}, got {objective!r}"
        )
    rng = random.Random(seed)
    pairs = []
    for i, doc in enumerate(docs):
        other = docs[(i + rng.randint(1, len(docs) - 1)) % len(docs)] if len(docs) > 1 else doc
        a, b, label = sentence_pair(doc, other, objective, max_tokens, rng)
        pairs.append({"a": a, "b": b, "label": label})
    return pairs


def collate_pairs(
    pairs: list[dict], cls_id: int, sep_id: int, pad_id: int = 0
) -> dict[str, torch.Tensor]:
    """[CLS] A [SEP] B [SEP], right-padded: ids, segments, mask, special (B, S); pair_label (B,)."""
    seqs = [([cls_id, *p["a"], sep_id, *p["b"], sep_id], len(p["a"]) + 2) for p in pairs]
    S = max(len(s) for s, _ in seqs)
    ids = torch.full((len(pairs), S), pad_id, dtype=torch.long)
    segments = torch.zeros((len(pairs), S), dtype=torch.long)
    for i, (s, first) in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        segments[i, first : len(s)] = 1
    mask = ids != pad_id
    special = ~mask | (ids == cls_id) | (ids == sep_id)
    return {
        "ids": ids,
        "segments": segments,
        "mask": mask,
        "special": special,
        "pair_label": torch.tensor([p["label"] for p in pairs]),
    }
