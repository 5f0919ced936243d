"""Test-set evaluation of a trained document classifier: predictions, accuracy and macro-F1 (overall
and per length bucket), accuracy with each document's tokens shuffled (does the model use word
order?), rationale accuracy of its attention against the gold key sentences and words, and its
pictures."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from omegaconf import DictConfig

from attention_lab.classify.data.batches import collate_documents, model_inputs
from attention_lab.core.paths import prepared_dir, tokenizer_path
from attention_lab.core.task import Run
from attention_lab.infer.tokenization import load_tokenizer, pool_pieces
from attention_lab.results import metrics, plots
from attention_lab.results.metrics import spread_over_buckets
from attention_lab.train.checkpoints import load_model

SHUFFLE_SEED = 0  # test/accuracy_shuffled: the same permutations for every family and seed


def shuffle_tokens(rows: list[dict], seed: int = SHUFFLE_SEED) -> list[dict]:
    """Each row with its tokens permuted across the whole document (sentence lengths kept),
    deterministic in `seed`."""
    rng = np.random.default_rng(seed)
    shuffled = []
    for r in rows:
        tokens = np.array([i for s in r["ids"] for i in s], dtype=np.int64)[
            rng.permutation(sum(map(len, r["ids"])))
        ]
        ends = np.cumsum([len(s) for s in r["ids"]])  # (N,)
        shuffled.append({**r, "ids": [part.tolist() for part in np.split(tokens, ends[:-1])]})
    return shuffled


@dataclass
class DocumentAttention:
    """One document's attention, per sentence: sentence weights (N,), word weights (one (L_n,) array
    per sentence), and for multi-hop families the hops over the document's words (r, T)."""

    sentence: np.ndarray
    words: list[np.ndarray]
    hops: np.ndarray | None = None

    def document_words(self) -> list[np.ndarray]:
        """Word weights over the whole document: α_word · α_sentence for hierarchical attention,
        where each sentence's words sum to 1 (HAN); unchanged for attention over all words, whose
        sentences sum to α_sentence."""
        return [w * s / max(float(w.sum()), 1e-12) for w, s in zip(self.words, self.sentence)]


def split_attention(
    out: dict[str, torch.Tensor], b: int, word_of: list[list[int]]
) -> DocumentAttention | None:
    """Document b of a batch's outputs -> DocumentAttention in sentence and word coordinates (the
    weights of a word's WordPiece pieces summed; word_of: the word index of each token, per
    sentence). None without attention."""
    if "word" not in out:
        return None
    lengths = [len(w) for w in word_of]
    word = out["word"][b].numpy()
    if word.ndim == 2:  # hierarchical: (N, L)
        tokens = [word[n, :length] for n, length in enumerate(lengths)]
        sentence = out["sentence"][b, : len(lengths)].numpy()
    else:  # flat: (T,)
        flat = word[: sum(lengths)]
        tokens = metrics.flat_to_sentences(flat, lengths)
        sentence = metrics.sentence_weights_from_words(flat, lengths)
    words = [pool_pieces(t, w) for t, w in zip(tokens, word_of)]
    hops = out["hops"][b, :, : sum(lengths)].numpy() if "hops" in out else None
    return DocumentAttention(sentence, words, hops)


@torch.inference_mode()
def predict(
    model, rows: list[dict], batch_size: int
) -> tuple[np.ndarray, list[DocumentAttention | None], float]:
    """Class probabilities (D, C) in input order, each document's attention, and the wall-clock
    seconds."""
    probs, attentions = [], []
    t0 = time.perf_counter()
    for k in range(0, len(rows), batch_size):
        chunk = rows[k : k + batch_size]
        out = model(*model_inputs(model, collate_documents(chunk)))
        probs.append(out["logits"].softmax(-1).numpy())
        attentions += [split_attention(out, b, r["word_of"]) for b, r in enumerate(chunk)]
    return np.concatenate(probs), attentions, time.perf_counter() - t0


def item_counts(
    rows: list[dict], attentions: list[DocumentAttention | None]
) -> dict[str, list[list[float]]]:
    """The attention metrics item by item, as [a, b] pairs whose sums score them
    (results.evidence.COUNTED share: 100 · Σa / Σb): each gold document's rationale hit [hit, 1],
    each document's hop overlap [overlap, 1]; none without attention (or gold rationales, or
    hops)."""
    if not attentions or attentions[0] is None:
        return {}
    out = {}
    gold = [
        {"sentence_weights": a.sentence, "gold": r.get("rationale")}
        for a, r in zip(attentions, rows)
        if r.get("rationale")
    ]
    if hits := metrics.rationale_hits(gold):
        out["test/rationale_acc"] = [[float(h), 1.0] for h in hits]
    if attentions[0].hops is not None:
        out["test/hop_overlap"] = [[metrics.hop_overlap(a.hops), 1.0] for a in attentions]
    return out


def evaluate(
    model, rows: list[dict], cfg
) -> tuple[dict, np.ndarray, list[DocumentAttention | None]]:
    """test/* metrics of one model on prepared rows (with ids and y), its probabilities and
    attentions."""
    num_classes = len(cfg.task.labels)
    probs, attentions, seconds = predict(model, rows, cfg.evaluate.batch_size)
    y_true, y_pred = [r["y"] for r in rows], probs.argmax(-1).tolist()
    lengths = [len(r["ids"]) for r in rows]
    scores = metrics.classification_scores(y_true, y_pred, num_classes)
    for bucket, s in metrics.per_bucket_scores(
        lengths, y_true, y_pred, cfg.task.buckets, num_classes
    ).items():
        scores.update({f"{name}_len_{bucket}": value for name, value in s.items()})
    scores.update(predict_seconds=seconds, predict_documents_per_s=len(rows) / seconds)
    # order gone, words kept
    shuffled, _, _ = predict(model, shuffle_tokens(rows), cfg.evaluate.batch_size)
    scores["accuracy_shuffled"] = float(np.mean(shuffled.argmax(-1) == np.array(y_true)))
    if attentions and attentions[0] is not None:
        gold = [
            {
                "sentence_weights": a.sentence,
                "word_weights": a.document_words(),
                "gold": r.get("rationale"),
            }
            for a, r in zip(attentions, rows)
            if r.get("rationale")
        ]
        if gold:
            rationale = metrics.rationale_scores(gold, k=cfg.evaluate.top_k_words)
            scores.update({k: v for k, v in rationale.items() if v is not None})
        if attentions[0].hops is not None:
            scores["hop_overlap"] = float(
                np.mean([metrics.hop_overlap(a.hops) for a in attentions])
            )
    return {f"test/{k}": v for k, v in scores.items()}, probs, attentions


def evaluate_family(
    cfg: DictConfig, pictures: Path, runs: list[Run]
) -> tuple[dict[str, dict], dict]:
    """Per-seed test/* scores and predicted label ids of a classify family's runs (one per seed, all
    on one share of the labels: classify/label_runs.py);
    document pictures (PNG + HTML) and hop heatmaps of the first seed (pictures=None: none)."""
    from attention_lab.classify.data.batches import load_documents
    from attention_lab.classify.highlights import write_document_html

    tok = load_tokenizer(tokenizer_path(cfg))
    per_seed, outputs = {}, {"seeds": {}}
    for run in runs:
        seed = run.seed
        model, trained = load_model(run.out / "best.ckpt")
        labels = list(trained.task.labels)
        cfg.task.labels = labels
        t = trained.train
        rows = load_documents(
            prepared_dir(cfg),
            "test",
            tok,
            labels,
            t.max_sentences,
            t.max_words,
            t.get("max_tokens"),
        )
        per_seed[str(seed)], probs, attentions = evaluate(model, rows, cfg)
        outputs.update(
            ids=[r["id"] for r in rows], references=[r["y"] for r in rows], labels=labels
        )
        outputs["seeds"][str(seed)] = probs.argmax(-1).tolist()
        # the ledger's test-item resamples
        for metric, counts in item_counts(rows, attentions).items():
            entry = outputs.setdefault("item_stats", {}).setdefault(
                metric, {"score": "share", "seeds": {}}
            )
            entry["seeds"][str(seed)] = counts
        if pictures is None or seed != cfg.seeds[0] or attentions[0] is None:
            continue
        for k, i in enumerate(
            spread_over_buckets(
                [len(r["ids"]) for r in rows], cfg.task.buckets, cfg.evaluate.pictures
            )
        ):
            r, a = rows[i], attentions[i]
            # as truncated for the model
            sentences = [s[: len(w)] for s, w in zip(r["sentences"], a.words)]
            title = (
                f"{cfg.family}: test document {r['id']} (gold {r['label']}, predicted"
                f" {labels[probs[i].argmax()]})"
            )
            plots.document_attention(
                sentences,
                a.sentence,
                a.words,
                pictures / f"document_{k}.png",
                title=title,
                gold=r.get("rationale"),
            )
            write_document_html(
                pictures / f"document_{k}.html",
                sentences,
                a.sentence,
                a.words,
                title,
                labels[probs[i].argmax()],
                dict(zip(labels, probs[i].tolist())),
                gold=r.get("rationale"),
            )
            if a.hops is not None:
                plots.hop_heatmap(
                    [w for s in sentences for w in s],
                    a.hops,
                    pictures / f"hops_{k}.png",
                    title=title,
                )
        if hasattr(model, "attention_maps"):
            i = spread_over_buckets([len(r["ids"]) for r in rows], cfg.task.buckets, 1)[0]
            head_grid(
                model,
                rows[i],
                tok,
                pictures / "heads.png",
                f"{cfg.family}: test document {rows[i]['id']}",
            )
    return per_seed, outputs


def head_grid(model, row: dict, tok, path: Path, title: str) -> None:
    """Every layer and head of a BERT-style family on one document ([CLS] doc [SEP]), as one grid of
    heatmaps."""
    import torch

    ids = torch.tensor([[i for s in row["ids"] for i in s]])
    with torch.inference_mode():
        maps = model.attention_maps(ids, ids != 0)  # per layer (1, h, T + 2, T + 2)
    tokens = ["[CLS]", *[tok.id_to_token(int(i)) for i in ids[0]], "[SEP]"]
    plots.head_grid([m[0].numpy() for m in maps], tokens, path, title=title)
