"""config_rules.py: what the load_config tests (tests/stages/test_bad_inputs.py,
tests/core/test_config.py) leave out: the BERT length limits, cross-key checks waiting for
well-typed values, several problems in one error, list items, the split-file pairs of the test
split, coco_captions' splits and Range's wording."""

from __future__ import annotations

import re

import pytest
from omegaconf import OmegaConf

from attention_lab.core.config_rules import (
    ConfigError,
    Range,
    check_config,
    check_missing,
    column_problems,
    split_file_problems,
)

WHERE = "config of classify/bert (test)"


def cfg(task: str = "classify", **sections):
    return OmegaConf.create({"task": {"name": task}, **sections})


def test_a_pair_longer_than_berts_positions_is_refused():
    """pretrain.max_tokens past model.max_positions (the pair would not fit the learned positions);
    equal is fine."""
    bert = {"hidden": 16, "heads": 2, "max_positions": 32}
    check_config(cfg(model=bert, pretrain={"max_tokens": 32}), WHERE)
    with pytest.raises(
        ConfigError,
        match=r"^config of classify/bert \(test\): pretrain.max_tokens = 64: expected at "
        r"most model.max_positions = 32$",
    ):
        check_config(cfg(model=bert, pretrain={"max_tokens": 64}), WHERE)


def test_a_bert_document_needs_a_token_limit_within_its_positions():
    """train.max_tokens null (no cut) with BERT: the range it needs, max_positions - 2; at that
    limit it passes."""
    bert = {"hidden": 16, "heads": 2, "max_positions": 32}
    check_config(cfg(model=bert, train={"max_tokens": 30}), WHERE)
    with pytest.raises(
        ConfigError,
        match=r"train.max_tokens = None: expected an integer in \[1, 30\] "
        r"\(model.max_positions - 2: \[CLS\] and \[SEP\] take two\)",
    ):
        check_config(cfg(model=bert, train={"max_tokens": None}), WHERE)


def test_cross_key_checks_wait_for_well_typed_values():
    """A heads of the wrong type is named by its own rule, never a TypeError from the divisibility
    check."""
    with pytest.raises(ConfigError) as err:
        check_config(cfg("translate", model={"d_model": 128, "heads": "four"}), WHERE)
    assert str(err.value) == f"{WHERE}: model.heads = 'four': expected an integer in [1, 65536]"


def test_every_problem_is_named_in_one_error():
    """Two bad keys and a bad list item: one ConfigError naming all three, joined by `; `, in the
    config's order."""
    bad = cfg(model={"dropout": 1.0, "channels": [8, 0]}, train={"lr": 0})
    with pytest.raises(ConfigError) as err:
        check_config(bad, WHERE)
    assert str(err.value) == (
        f"{WHERE}: model.dropout = 1.0: expected a number in [0, 1); model.channels = 0: expected"
        " an integer in [1, 65536]; train.lr = 0: expected a number in (0, inf)"
    )


def test_a_missing_list_item_is_named_by_its_list():
    """A `???` inside a list (train.label_fractions) names the list's key and the params.yaml key to
    set."""
    with pytest.raises(
        ConfigError,
        match=r"no value for train.label_fractions: conf/ declares it \?\?\? .*set "
        r"params.yaml `classify.train.label_fractions`$",
    ):
        check_missing(cfg(train={"label_fractions": [1.0, "???"]}), WHERE)


@pytest.mark.parametrize(("given", "missing"), [("src", "tgt"), ("tgt", "src")])
def test_half_a_pair_of_test_files_names_both_keys(given, missing):
    """The test split's source without its target (or the reverse): the file given, the key missing,
    the fallback."""
    d = {"test_src_path": None, "test_tgt_path": None, f"test_{given}_path": "m/test.x"}
    assert split_file_problems(d) == [
        (
            f"data.test_{given}_path = 'm/test.x' but data.test_{missing}_path is null: "
            "give both files of the test split, or neither (then it is carved from the "
            "train files by data.test_fraction)"
        )
    ]
    assert split_file_problems({**d, f"test_{missing}_path": "m/test.y"}) == []
    assert split_file_problems({"test_src_path": None, "test_tgt_path": None}) == []


CSV = {"format": "csv", "text_field": "text", "label_field": "label", "columns": ["label", "text"]}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (
            {"columns": "label,text"},
            "data.columns = 'label,text': expected a list of column names (e.g. [label, text])",
        ),
        (
            {"columns": []},
            "data.columns = []: expected a list of column names (e.g. [label, text])",
        ),
        (
            {"columns": ["label", 1]},
            "data.columns = ['label', 1]: expected a list of column names (e.g. [label, text])",
        ),
        (
            {"format": "jsonl"},
            (
                "data.columns = ['label', 'text'] but data.format = 'jsonl': columns name the"
                " fields of a CSV file without a header row (format: csv)"
            ),
        ),
        (
            {"columns": ["label", "text", "label"]},
            (
                "data.columns = ['label', 'text', 'label'] names 'label' more than once: expected"
                " one name per column"
            ),
        ),
        (
            {"columns": ["stars", "text"]},
            (
                "data.columns = ['stars', 'text'] lacks data.label_field = 'label': expected it"
                " among the column names"
            ),
        ),
        (
            {"text_field": "review"},
            (
                "data.columns = ['label', 'text'] lacks data.text_field = 'review': expected it"
                " among the column names"
            ),
        ),
    ],
)
def test_columns_of_a_csv_without_a_header_row(data, problem):
    """data.columns: a list of names, format csv only, each name once, the text and label fields."""
    assert column_problems({**CSV, "columns": None}) == column_problems(CSV) == []
    assert column_problems({**CSV, **data}) == [problem]
    with pytest.raises(ConfigError, match=f"^{re.escape(f'{WHERE}: {problem}')}$"):
        check_config(cfg(data={**CSV, **data}), WHERE)


def test_escapes_is_a_flag():
    """data.escapes: YAML true or false, not 1 or "yes"."""
    check_config(cfg(data={**CSV, "escapes": True}), WHERE)
    with pytest.raises(ConfigError, match=r"data.escapes = 1: expected one of false, true$"):
        check_config(cfg(data={**CSV, "escapes": 1}), WHERE)


def test_coco_splits_need_train_and_both_files_of_each_split_given():
    """coco_captions' data.splits: train, and valid/test if given, each {annotations, images}."""
    train = {"annotations": "a/train.json", "images": "images/train2017"}
    expected = "expected {annotations: <COCO's caption JSON>, images: <the folder of its photos>}"
    assert split_file_problems({"splits": {"train": train, "valid": None, "test": train}}) == []
    assert split_file_problems({"splits": {"train": None, "test": {"annotations": "t.json"}}}) == [
        f"data.splits.train = None: {expected} (train is required)",
        f"data.splits.test = {{'annotations': 't.json'}}: {expected} or null (carved from train)",
    ]
    assert split_file_problems({"splits": None}) == [
        f"data.splits = None: expected {{train: {expected[9:]}}} (valid, test optional)"
    ]
    bad = {"splits": {"train": train, "valid": {"annotations": 5, "images": "v"}}}
    with pytest.raises(ConfigError, match=r"splits.valid = \{'annotations': 5, 'images': 'v'\}"):
        check_config(cfg("caption", data=bad), WHERE)


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        (Range(0.5, 2.5), "a number in [0.5, 2.5]"),
        (Range(0, 1, open_low=True, open_high=True), "a number in (0, 1)"),
        (Range(None, 10, integer=True), "an integer in (-inf, 10]"),
        (Range(1, None, integer=True, nullable=True), "an integer in [1, inf) or null"),
    ],
)
def test_a_range_reads_as_its_interval(rule, words):
    """Range's wording in messages: brackets for closed ends, parentheses for open or absent ones,
    `or null`."""
    assert str(rule) == words


def test_a_range_allows_numbers_inside_only():
    """Ends as declared; no bools, strings, nan or inf; integers only when integer; null only when
    nullable."""
    share, count = Range(0, 1, open_high=True), Range(0, None, integer=True)
    assert (
        share.allows(0) and share.allows(0.99) and not share.allows(1) and not share.allows(-0.01)
    )
    assert not any(share.allows(v) for v in (True, "0.5", float("nan"), None))
    assert count.allows(10**9) and not count.allows(2.0) and not count.allows(float("inf"))
    assert Range(0, 1, nullable=True).allows(None)
