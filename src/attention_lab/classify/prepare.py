"""The classify task's prepare and tokenize hooks: labelled documents from `cfg.data.source`, their summary, and the
tokenizer trained on the training split."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from omegaconf import DictConfig
from tokenizers import Tokenizer

from attention_lab.core.config import ConfigError
from attention_lab.core.readers import DataError
from attention_lab.core.tokenization import encode_words, train_word_tokenizer

SPLITS = ("train", "valid", "test")


def splits(cfg: DictConfig) -> dict[str, list[dict]]:
    """Documents {"label", "sentences", "rationale"} for `cfg.data.source`; valid/test labels must occur in train."""
    from attention_lab.classify.data.documents import generated_documents
    from attention_lab.classify.data.labeled import check_labels, read_labeled, stratified_split

    d, root = cfg.data, Path(cfg.root)
    if d.source == "generated":  # the generator writes 3 to 30 sentences: clip the buckets to that range
        buckets = [(max(lo, 3), min(hi, 30)) for lo, hi in cfg.task.buckets]
        return generated_documents(d.seed, d.n_train, d.n_valid, d.n_test_per_bucket, buckets)
    if d.source != "labeled_files":
        raise ConfigError(f"data.source={d.source!r}: expected generated or labeled_files")
    rows = read_labeled(root / d.path, d.format, d.text_field, d.label_field, d.encoding, d.title_field,
                        split_field=d.split_field)
    if d.max_documents is not None:
        rows = rows[: d.max_documents]
    if d.split_field:
        splits = {name: [{k: v for k, v in r.items() if k != "split"} for r in rows if r["split"] == name]
                  for name in SPLITS}
        for name, part in splits.items():
            if not part:
                raise DataError(f"{root / d.path}: no document has {d.split_field} = {name!r}")
    else:
        splits = dict(zip(SPLITS, stratified_split(rows, d.valid_fraction, d.test_fraction, d.seed), strict=True))
    check_labels(splits)
    return splits


def stats(rows: list[dict], buckets: list[list[int]]) -> dict:
    """Documents, mean and longest length in sentences, mean words, documents per label and per length bucket."""
    lengths = [len(r["sentences"]) for r in rows]
    words = [sum(len(s) for s in r["sentences"]) for r in rows]
    return {"documents": len(rows), "sentences_mean": round(sum(lengths) / max(len(rows), 1), 2),
            "sentences_max": max(lengths, default=0), "words_mean": round(sum(words) / max(len(rows), 1), 1),
            "labels": dict(sorted(Counter(r["label"] for r in rows).items())),
            "buckets": {f"{lo}-{hi}": sum(lo <= n <= hi for n in lengths) for lo, hi in buckets}}


def tokenizer(cfg: DictConfig, train: list[dict]) -> tuple[Tokenizer, dict]:
    """A word-level vocabulary over the training documents; the share of training words it covers."""
    tok = train_word_tokenizer((r["sentences"] for r in train), cfg.tokenize.vocab_size, cfg.tokenize.min_frequency)
    ids = [i for r in train for sentence in encode_words(tok, r["sentences"]) for i in sentence]
    return tok, {"words": len(ids), "unk_rate": round(sum(i == tok.token_to_id("<unk>") for i in ids) / len(ids), 4)}
