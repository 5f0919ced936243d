"""What every config knob allows (RULES) and the check that load_config runs on the merged
config."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass

from omegaconf import DictConfig, OmegaConf


class ConfigError(ValueError):
    """A config file or field is not what the pipeline expects."""


@dataclass(frozen=True)
class Range:
    """The numbers a config key allows: [low, high] (either end open or absent), integers only, or
    null too."""

    low: float | None = None
    high: float | None = None
    integer: bool = False
    open_low: bool = False
    open_high: bool = False
    nullable: bool = False

    def allows(self, value) -> bool:
        if value is None:
            return self.nullable
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or (self.integer and not isinstance(value, int))
        ):
            return False
        if not math.isfinite(value):
            return False
        low_ok = self.low is None or (value > self.low if self.open_low else value >= self.low)
        return low_ok and (
            self.high is None or (value < self.high if self.open_high else value <= self.high)
        )

    def __str__(self) -> str:
        low = (
            "-inf" if self.low is None else f"{self.low:g}" if self.low % 1 else str(int(self.low))
        )
        high = (
            "inf"
            if self.high is None
            else f"{self.high:g}"
            if self.high % 1
            else str(int(self.high))
        )
        left = "(" if self.open_low or self.low is None else "["
        right = ")" if self.open_high or self.high is None else "]"
        kind = "an integer" if self.integer else "a number"
        return f"{kind} in {left}{low}, {high}{right}" + (" or null" if self.nullable else "")


# The names of registries in higher layers (nn.attention, infer.tokenization import torch or
# tokenizers), which this layer does not import; tests/nn/test_attention.py and
# tests/infer/test_tokenization.py check that they agree. nn.attention.ATTENTIONS
ATTENTIONS = ("additive", "dot", "general", "concat", "concat_identity", "local_m", "local_p")
# nn.attention.GLOBAL_SCORES: local attention's content scores
GLOBAL_SCORES = ("dot", "general", "concat", "concat_identity")
NORMALIZATIONS = ("nfkc", "nfc", "none")  # infer.tokenization.NORMALIZATIONS


# widths, heads, layers, batch sizes: past 2^16 is a typo, not a model for 2 cores
SIZE = Range(1, 65536, integer=True)
COUNT = Range(0, None, integer=True)
POSITIVE = Range(1, None, integer=True)
SHARE = Range(0, 1, open_high=True)  # dropout, label smoothing, held-out shares: [0, 1)
FLAG = (False, True)  # a yes/no knob: YAML true or false, not 1 or 0
# What every numeric or named knob allows, checked by load_config after every layer is merged. A key
# takes the first pattern it matches (fnmatch, `*` spans dots); list values (train.label_fractions,
# model.channels) are checked item by item. Keys without a pattern are not checked.
RULES: dict[str, Range | tuple] = {
    "*dropout": SHARE,
    "model.attention": ATTENTIONS,
    "model.local_score": GLOBAL_SCORES,
    "model.window": Range(0, 65536, integer=True),
    "model.buckets": Range(1, 10_000_000, integer=True),
    "model.height": Range(1, 4096, integer=True),
    "model.width": Range(1, 4096, integer=True),
    # null: pixels through the task's own CNN
    "model.feature_dim": Range(1, 65536, integer=True, nullable=True),
    "model.feature_stride": Range(1, 4096, integer=True),
    "model.*_dim": SIZE,
    "model.*hidden*": SIZE,
    "model.d_model": SIZE,
    "model.d_ff": SIZE,
    "model.intermediate": SIZE,
    "model.heads": SIZE,
    "model.hops": SIZE,
    "model.*layers": SIZE,
    "model.channels": SIZE,
    "model.max_positions": SIZE,
    "*.lr": Range(0, None, open_low=True),
    "*.batch_size": SIZE,
    "*.max_epochs": Range(1, 100_000, integer=True),
    "*.max_minutes": Range(0, None, open_low=True),
    "*.warmup_steps": COUNT,
    "*.patience": COUNT,
    "train.min_delta": Range(0, None),
    "train.min_epochs": COUNT,
    "train.schedule": ("plateau", "cosine"),
    "train.decay": Range(0, 1, open_low=True),
    "train.weight_decay": Range(0, 1),
    "train.label_smoothing": SHARE,
    "train.clip": Range(0, None),  # 0: no clipping
    "train.processes": Range(1, 64, integer=True),
    "train.penalty": Range(0, None),
    "train.penalty_warmup": COUNT,  # updates
    "train.label_fraction*": Range(0, 1, open_low=True),
    "train.max_sentences": POSITIVE,
    "train.max_words": POSITIVE,
    "train.max_tokens": Range(1, None, integer=True, nullable=True),
    "train.val_bleu_sentences": COUNT,
    "train.max_source_words": Range(1, None, integer=True, nullable=True),
    "train.teacher_forcing.schedule": ("constant", "linear", "inverse_sigmoid"),
    "train.teacher_forcing.per": ("epoch", "update"),
    "train.teacher_forcing.*ratio": Range(0, 1),
    "train.teacher_forcing.slope": Range(0, None),
    "train.teacher_forcing.k": Range(0, None, open_low=True),
    "tune.trials": COUNT,
    "tune.updates": Range(1, None, integer=True, nullable=True),
    "tune.min_resource": Range(1, None, integer=True),
    "tune.reduction_factor": Range(2, None, integer=True),
    "tune.direction": ("minimize", "maximize"),
    "tune.max_params": Range(1, None, integer=True, nullable=True),
    "tune.startup_trials": COUNT,
    "*vocab_size": Range(1, 10_000_000, integer=True),
    "*min_frequency": COUNT,
    "pretrain.source": ("mlm", "minilm"),
    "pretrain.objective": ("sop", "nsp", "none"),
    "pretrain.mask_rate": Range(0, 1, open_low=True, open_high=True),
    "pretrain.max_tokens": Range(4, 65536, integer=True),  # [CLS] A [SEP] B [SEP]
    # null: pretrain.max_epochs
    "pretrain.max_updates": Range(1, None, integer=True, nullable=True),
    "pretrain.validate_every": Range(1, None, integer=True),
    "evaluate.beam": Range(1, 64, integer=True),
    "evaluate.len_penalty": Range(0, 5),
    "evaluate.max_len_ratio": Range(0, 100, open_low=True),
    "evaluate.max_len": Range(1, 10_000, integer=True),
    "evaluate.top_k_words": POSITIVE,
    "evaluate.heatmaps": COUNT,
    "evaluate.overlays": COUNT,
    "evaluate.pictures": COUNT,
    "data.n_train": Range(1, 10_000_000, integer=True),
    "data.n_valid": Range(1, 10_000_000, integer=True),
    "data.n_test_per_bucket": Range(1, 10_000_000, integer=True),
    "data.n_unlabelled": Range(0, 10_000_000, integer=True),
    "data.length_mix.*": Range(0, None),
    "data.valid_fraction": SHARE,
    "data.test_fraction": SHARE,
    "data.max_pairs": Range(1, None, integer=True, nullable=True),
    "data.max_documents": Range(1, None, integer=True, nullable=True),
    "data.max_images": Range(1, None, integer=True, nullable=True),
    "data.max_pixels": Range(1, None, integer=True),
    "data.feature_batch": Range(1, 4096, integer=True),
    "data.src_column": COUNT,
    "data.tgt_column": COUNT,
    "data.format": ("jsonl", "csv"),
    "data.escapes": FLAG,
    "data.height": Range(1, 4096, integer=True),
    "data.width": Range(1, 4096, integer=True),
    "data.image_size": Range(32, 4096, integer=True),
    "data.digit_size": Range(1, 4096, integer=True),
    "data.noise": Range(0, 1),
    "data.max_gap": COUNT,
    "data.max_offset": COUNT,
    "data.scan_fractions": Range(0, 1),
    "trainer.accelerator": ("auto", "cpu", "cuda", "gpu", "mps"),
    "trainer.log_every_n_steps": POSITIVE,
}
TASK_RULES: dict[str, dict[str, tuple]] = {
    "translate": {
        "tokenize.model": ("bpe", "unigram"),
        "tokenize.normalization": NORMALIZATIONS,
        "tokenize.lowercase": FLAG,
    }
}


def _leaves(node, key: str = ""):
    """(dotted key, value) of every scalar in a container of dicts and lists; list items keep their
    list's key."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, f"{key}.{k}" if key else str(k))
    elif isinstance(node, list):
        for v in node:
            yield from _leaves(v, key)
    else:
        yield key, node


def check_value(key: str, value, task: str | None = None) -> str | None:
    """Why `value` is not allowed for config key `key` (its rule in RULES), or None when it is (or
    has no rule)."""
    rule = TASK_RULES.get(task or "", {}).get(key) or next(
        (r for pattern, r in RULES.items() if fnmatch.fnmatchcase(key, pattern)), None
    )
    if rule is None:
        return None
    if isinstance(rule, tuple):
        if any(value == r and type(value) is type(r) for r in rule):
            return None
        return (
            f"{key} = {value!r}: expected one of"
            f" {', '.join(str(r).lower() if r in FLAG else r for r in rule)}"
        )
    return None if rule.allows(value) else f"{key} = {value!r}: expected {rule}"


def split_file_problems(d: dict) -> list[str]:
    """A split's source file without its target file (or the reverse), or split files beside a
    split_field."""
    problems = []
    for split in ("valid", "test"):
        pair = {
            f"data.{split}_{side}_path": d.get(f"{split}_{side}_path") for side in ("src", "tgt")
        }
        if f"{split}_src_path" in d and [v is None for v in pair.values()].count(True) == 1:
            given, missing = sorted(pair, key=lambda k: pair[k] is None)
            problems.append(
                f"{given} = {pair[given]!r} but {missing} is null: give both files of the {split}"
                " split, or neither (then it is carved from the train files by"
                f" data.{split}_fraction)"
            )
    if "splits" in d:  # caption's coco_captions: {train: {annotations, images}, valid, test}
        problems += coco_split_problems(d["splits"])
    if d.get("split_field") and (
        named := [f"data.{k}" for k in ("valid_path", "test_path") if d.get(k)]
    ):
        problems.append(
            f"data.split_field = {d['split_field']!r} and {' and '.join(named)} both say where the "
            "splits are: use one (split_field: null with per-split files)"
        )
    return problems


def column_problems(d: dict) -> list[str]:
    """What is wrong with data.columns, the column names of a CSV file without a header row."""
    columns = d.get("columns")
    if columns is None:
        return []
    names = isinstance(columns, list) and all(c and isinstance(c, str) for c in columns)
    if not (names and columns):
        return [f"data.columns = {columns!r}: expected a list of column names (e.g. [label, text])"]
    problems = []
    if d.get("format") != "csv":
        problems.append(
            f"data.columns = {columns} but data.format = {d.get('format')!r}: columns "
            "name the fields of a CSV file without a header row (format: csv)"
        )
    if twice := sorted({c for c in columns if columns.count(c) > 1}):
        problems.append(
            f"data.columns = {columns} names {', '.join(map(repr, twice))} more than "
            "once: expected one name per column"
        )
    for key in ("text_field", "label_field"):
        if d.get(key) not in columns:
            problems.append(
                f"data.columns = {columns} lacks data.{key} = {d.get(key)!r}: expected "
                "it among the column names"
            )
    return problems


def coco_split_problems(splits) -> list[str]:
    """data.splits of coco_captions: train, and valid/test if given, each {annotations, images}."""
    expected = "{annotations: <COCO's caption JSON>, images: <the folder of its photos>}"
    if not isinstance(splits, dict):
        return [f"data.splits = {splits!r}: expected {{train: {expected}}} (valid, test optional)"]
    problems = []
    for split, files in splits.items():
        if files is None and split != "train":
            continue
        if (
            not isinstance(files, dict)
            or set(files) != {"annotations", "images"}
            or not all(isinstance(v, str) and v for v in files.values())
        ):
            also = " (train is required)" if split == "train" else " or null (carved from train)"
            problems.append(f"data.splits.{split} = {files!r}: expected {expected}{also}")
    return problems


def check_missing(cfg: DictConfig, where: str) -> None:
    """A ConfigError naming every key still `???`: conf/ declares a key that way when its value
    lives in params.yaml (or, for a data source's paths, must come from there), so a params.yaml
    without it names the key to set."""
    # unresolved: a bad interpolation is check_config's to name
    values = OmegaConf.to_container(cfg, resolve=False)
    missing = sorted({key for key, value in _leaves(values) if value == "???"})
    if missing:
        task = OmegaConf.select(cfg, "task.name", default="<task>")
        them = "it" if len(missing) == 1 else "them"
        raise ConfigError(
            f"{where}: no value for {', '.join(missing)}: conf/ declares {them} ??? (the value"
            " lives in params.yaml): set params.yaml"
            f" {', '.join(f'`{task}.{key}`' for key in missing)}"
        )


def check_config(cfg: DictConfig, where: str) -> None:
    """Every knob in its range (RULES) and the cross-key constraints; a ConfigError naming key,
    value and range (or each key without a value, check_missing)."""
    check_missing(cfg, where)
    try:
        values = OmegaConf.to_container(cfg, resolve=True)
    # omegaconf's errors for an interpolation that does not resolve (${data.nope})
    except Exception as err:
        raise ConfigError(f"{where}: {str(err).splitlines()[0]}") from err
    problems = [
        p for key, value in _leaves(values) if (p := check_value(key, value, cfg.task.name))
    ]
    d, t, m, pre = (values.get(k) or {} for k in ("data", "train", "model", "pretrain"))
    if not problems:  # the cross-key constraints, once every value has its type
        if d.get("valid_fraction", 0) + d.get("test_fraction", 0) >= 1:
            problems.append(
                f"data.valid_fraction + data.test_fraction = {d['valid_fraction']} + "
                f"{d['test_fraction']}: expected a sum below 1 (the rest is training data)"
            )
        problems += split_file_problems(d) + column_problems(d)
        width = next((k for k in ("d_model", "hidden") if k in m), None)
        if width and "heads" in m and m[width] % m["heads"]:
            problems.append(
                f"model.{width} = {m[width]} is not divisible by model.heads = {m['heads']}"
            )
        if "max_positions" in m:  # BERT: [CLS] document [SEP] must fit its learned positions
            room = m["max_positions"] - 2
            if "max_tokens" in t and (t["max_tokens"] is None or t["max_tokens"] > room):
                problems.append(
                    f"train.max_tokens = {t['max_tokens']!r}: expected an integer in [1, {room}] "
                    "(model.max_positions - 2: [CLS] and [SEP] take two)"
                )
            if pre.get("max_tokens", 0) > m["max_positions"]:
                problems.append(
                    f"pretrain.max_tokens = {pre['max_tokens']}: expected at most"
                    f" model.max_positions = {m['max_positions']}"
                )
    if problems:
        raise ConfigError(f"{where}: " + "; ".join(problems))
