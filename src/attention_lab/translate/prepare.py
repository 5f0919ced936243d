"""The translate task's prepare and tokenize hooks: sentence pairs from `cfg.data.source`, their
summary, and the tokenizer trained on the training split."""

from __future__ import annotations

from omegaconf import DictConfig
from tokenizers import Tokenizer

from attention_lab.core.config import ConfigError
from attention_lab.core.paths import user_path
from attention_lab.core.readers import SPLITS, carved_fractions, read_splits
from attention_lab.infer.tokenization import encode, train_tokenizer
from attention_lab.translate.data.readers import read_parallel_files, read_tsv, split_pairs

# train's; valid_<key>, test_<key> too
FILE_KEYS = {"tsv": ("path",), "parallel_files": ("src_path", "tgt_path")}


# data.order of a generated corpus (params.yaml `translate.corpora`): the default, or the target
# words moved into the source's order (generator.monotone)
ORDERS = ("korean", "monotone")


def splits(cfg: DictConfig) -> dict[str, list[dict]]:
    """Sentence pairs {"src", "tgt"(, "align")} for `cfg.data.source`."""
    from attention_lab.translate.data.generator import generated_splits, monotone

    d = cfg.data
    order = d.get("order", ORDERS[0])
    if order not in ORDERS or (order != ORDERS[0] and d.source != "generated"):
        raise ConfigError(
            f"data.order={order!r}: expected one of {', '.join(ORDERS)} (monotone: generated data "
            "only, which has the alignments to reorder by)"
        )
    if d.source == "generated":
        parts = generated_splits(
            d.seed,
            d.n_train,
            d.n_valid,
            d.n_test_per_bucket,
            dict(d.length_mix),
            [tuple(b) for b in cfg.task.buckets],
        )
        return (
            {k: [monotone(p) for p in v] for k, v in parts.items()}
            if order == "monotone"
            else parts
        )
    if d.source not in FILE_KEYS:
        raise ConfigError(f"data.source={d.source!r}: expected generated, tsv or parallel_files")
    given = read_splits(d, FILE_KEYS[d.source], lambda paths: read_pairs(cfg, paths))
    train = given.pop("train")[: d.max_pairs]
    fractions = carved_fractions(d, given, "translate", "the train files", "of the pairs")
    return {**dict(zip(SPLITS, split_pairs(train, *fractions, d.seed), strict=True)), **given}


def read_pairs(cfg: DictConfig, paths: list[str]) -> list[dict]:
    """The pairs of one split's file(s): a TSV file, or a source and a target file."""
    d = cfg.data
    if d.source == "tsv":
        return read_tsv(user_path(cfg, paths[0]), d.src_column, d.tgt_column, d.encoding)
    return read_parallel_files(user_path(cfg, paths[0]), user_path(cfg, paths[1]), d.encoding)


def stats(rows: list[dict], buckets: list[list[int]]) -> dict:
    """Pairs, mean source and target words, longest source, pairs per source-length bucket."""
    lengths = [len(r["src"].split()) for r in rows]
    return {
        "pairs": len(rows),
        "src_words_mean": round(sum(lengths) / max(len(rows), 1), 2),
        "tgt_words_mean": round(sum(len(r["tgt"].split()) for r in rows) / max(len(rows), 1), 2),
        "src_words_max": max(lengths, default=0),
        "buckets": {f"{lo}-{hi}": sum(lo <= n <= hi for n in lengths) for lo, hi in buckets},
    }


def tokenizer(cfg: DictConfig, train: list[dict]) -> tuple[Tokenizer, dict]:
    """A joint subword model over source and target sentences; token counts per side."""
    t = cfg.tokenize
    tok = train_tokenizer(
        [r["src"] for r in train] + [r["tgt"] for r in train],
        t.model,
        t.vocab_size,
        t.min_frequency,
        t.normalization,
        t.lowercase,
    )
    lengths = {
        side: [len(ids) for ids in encode(tok, [r[side] for r in train])] for side in ("src", "tgt")
    }
    return tok, {
        **{f"{side}_tokens_mean": sum(v) / len(v) for side, v in lengths.items()},
        **{f"{side}_tokens_max": max(v) for side, v in lengths.items()},
    }
