"""The classify task's prepare and tokenize hooks: labelled documents from `cfg.data.source`, their
summary, and the tokenizer trained on the training split."""

from __future__ import annotations

import random
from collections import Counter

from omegaconf import DictConfig, OmegaConf
from tokenizers import Tokenizer

from attention_lab.classify.data.labeled import (
    check_labels,
    read_label_folders,
    read_labeled,
    read_unlabelled,
    stratified_split,
)
from attention_lab.core.config import ConfigError
from attention_lab.core.paths import user_path
from attention_lab.core.readers import SPLITS, DataError, carved_fractions, read_splits
from attention_lab.infer.tokenization import encode_words, train_word_tokenizer


def splits(cfg: DictConfig) -> dict[str, list[dict]]:
    """Documents {"label", "sentences", "rationale"} for `cfg.data.source`; valid/test labels must
    occur in train. Also "unlabelled": documents {"sentences"} that only pretraining reads (none
    unless the config asks for them)."""
    from attention_lab.classify.data.documents import generated_documents

    d = cfg.data
    # the generator writes 3 to 30 sentences: clip the buckets to that range
    if d.source == "generated":
        buckets = [(max(lo, 3), min(hi, 30)) for lo, hi in cfg.task.buckets]
        return generated_documents(
            d.seed, d.n_train, d.n_valid, d.n_test_per_bucket, buckets, d.n_unlabelled
        )
    if d.source == "labeled_files":
        splits = split_field_splits(cfg) if d.split_field else file_splits(cfg)
    elif d.source == "label_folders":
        splits = folder_splits(cfg)
    else:
        raise ConfigError(
            f"data.source={d.source!r}: expected generated, labeled_files or label_folders"
        )
    check_labels(splits)
    return {**splits, "unlabelled": unlabelled(cfg)}


def unlabelled(cfg: DictConfig) -> list[dict]:
    """The documents of `data.unlabelled_path` (a folder of .txt files, or a file in data.format),
    or none."""
    d = cfg.data
    if not d.get("unlabelled_path"):
        return []
    try:
        return read_unlabelled(
            user_path(cfg, d.unlabelled_path),
            d.get("format", "jsonl"),
            d.get("text_field", "text"),
            d.encoding,
            columns(cfg),
            d.get("escapes", False),
        )
    except DataError as err:
        raise DataError(f"unlabelled documents (data.unlabelled_path): {err}") from err


def read_file(cfg: DictConfig, path: str, split_field: str | None = None) -> list[dict]:
    """The documents of one JSONL or CSV file, read with the data section's fields."""
    d = cfg.data
    return read_labeled(
        user_path(cfg, path),
        d.format,
        d.text_field,
        d.label_field,
        d.encoding,
        d.title_field,
        split_field=split_field,
        columns=columns(cfg),
        escapes=d.escapes,
    )


def columns(cfg: DictConfig) -> list[str] | None:
    """data.columns as a list (the column names of a CSV file without a header row), or None."""
    names = cfg.data.get("columns")
    return None if names is None else [str(name) for name in names]


def split_field_splits(cfg: DictConfig) -> dict[str, list[dict]]:
    """One file whose `split_field` names each document's split."""
    d = cfg.data
    rows = read_file(cfg, d.path, d.split_field)[: d.max_documents]
    splits = {
        name: [{k: v for k, v in r.items() if k != "split"} for r in rows if r["split"] == name]
        for name in SPLITS
    }
    for name, part in splits.items():
        if not part:
            raise DataError(f"{user_path(cfg, d.path)}: no document has {d.split_field} = {name!r}")
    return splits


def file_splits(cfg: DictConfig) -> dict[str, list[dict]]:
    """One file split at random (stratified), or a file per split (valid_path, test_path); a split
    without a file is carved from train."""
    given = read_splits(cfg.data, ("path",), lambda paths: read_file(cfg, paths[0]))
    return carve(cfg, given.pop("train")[: cfg.data.max_documents], given, "the train file")


def folder_splits(cfg: DictConfig) -> dict[str, list[dict]]:
    """<path>/{train,test}/<label>/*.txt (valid/ optional: else carved from train), each split
    shuffled by seed."""
    d, base = cfg.data, user_path(cfg, cfg.data.path)
    if d.labels is not None and not OmegaConf.is_list(d.labels):
        raise ConfigError(
            f"data.labels = {d.labels!r}: expected a list of label folder names (e.g. [neg, pos]) "
            "or null"
        )
    labels = [str(label) for label in d.labels] if d.labels is not None else None
    train = read_label_folders(base, "train", labels, d.encoding)
    labels = labels or sorted({r["label"] for r in train})
    given = {
        split: read_label_folders(base, split, labels, d.encoding, strict=d.labels is None)
        for split in SPLITS[1:]
        if split == "test" or (base / split).is_dir()
    }
    given = {split: shuffled(rows, d.seed) for split, rows in given.items()}
    return carve(cfg, shuffled(train, d.seed), given, f"{base / 'train'}")


def carve(
    cfg: DictConfig, train: list[dict], given: dict[str, list[dict]], source: str
) -> dict[str, list[dict]]:
    """{train, valid, test}: the splits given, the others carved from train by their fraction
    (stratified, seeded)."""
    fractions = carved_fractions(cfg.data, given, "classify", source, "of each label")
    return {
        **dict(zip(SPLITS, stratified_split(train, *fractions, cfg.data.seed), strict=True)),
        **given,
    }


def shuffled(rows: list[dict], seed: int) -> list[dict]:
    """The rows in an order that depends only on `seed` (folders are read label by label)."""
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    return rows


def stats(rows: list[dict], buckets: list[list[int]]) -> dict:
    """Documents, mean and longest length in sentences, mean words, documents per label and per
    length bucket."""
    lengths = [len(r["sentences"]) for r in rows]
    words = [sum(len(s) for s in r["sentences"]) for r in rows]
    return {
        "documents": len(rows),
        "sentences_mean": round(sum(lengths) / max(len(rows), 1), 2),
        "sentences_max": max(lengths, default=0),
        "words_mean": round(sum(words) / max(len(rows), 1), 1),
        "labels": dict(sorted(Counter(r["label"] for r in rows if "label" in r).items())),
        "buckets": {f"{lo}-{hi}": sum(lo <= n <= hi for n in lengths) for lo, hi in buckets},
    }


def tokenizer(cfg: DictConfig, train: list[dict]) -> tuple[Tokenizer, dict]:
    """A word-level vocabulary over the training documents; the share of training words it
    covers."""
    tok = train_word_tokenizer(
        (r["sentences"] for r in train), cfg.tokenize.vocab_size, cfg.tokenize.min_frequency
    )
    ids = [i for r in train for sentence in encode_words(tok, r["sentences"]) for i in sentence]
    return tok, {
        "words": len(ids),
        "unk_rate": round(sum(i == tok.token_to_id("<unk>") for i in ids) / len(ids), 4),
    }
