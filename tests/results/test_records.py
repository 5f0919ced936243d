"""results.records: a record split into DVC metrics and details, joined back, and its data plots."""

import csv
import json

import pytest

from attention_lab.core.files import write_json
from attention_lab.results import records

SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
RECORD = {
    "family": "f",
    "seeds": [0, 1],
    "per_seed": {
        "0": {"test/bleu": 10.0, "test/bleu_len_1_10": 20.0, "test/chrf": 30.0},
        "1": {"test/bleu": 12.0, "test/bleu_len_1_10": 22.0, "test/chrf": 31.0},
    },
    "test/bleu": 11.0,
    "test/bleu_len_1_10": 21.0,
    "test/bleu_signature": SIGNATURE,
    "test/aer": float("nan"),
    "train/params": 1000.0,
    "train/stopped_by": ["early stopping"],
    "trained_config": {"train.lr": 0.001},
    "val_metric": "val/loss",
    "val_curves": {
        "0": {"curve": [[1, 2.5], [2, 1.5]], "stopped_by": "early stopping"},
        "1": {"curve": [[1, 2.0]], "stopped_by": "early stopping"},
    },
    "label_fractions": {
        "0.1": {
            "per_seed": {"0": {"test/bleu": 3.0}},
            "seeds": [0],
            "test/bleu": 3.0,
            "train/stopped_by": ["early stopping"],
        }
    },
}


def test_the_metrics_are_the_test_and_train_numbers_and_the_split_joins_back():
    metrics, details = records.split(RECORD, "label_fractions")
    assert set(metrics) == {
        "test/bleu",
        "test/bleu_len_1_10",
        "test/aer",
        "train/params",
        "label_fractions",
    }
    assert metrics["label_fractions"] == {"0.1": {"test/bleu": 3.0}}
    assert details["label_fractions"]["0.1"]["per_seed"] == {"0": {"test/bleu": 3.0}}
    assert {"test/bleu_signature", "train/stopped_by", "per_seed", "val_curves"} <= set(details)
    joined = json.loads(json.dumps(records.join(metrics, details)))  # as written, then read back
    assert list(joined) == sorted(RECORD)
    assert json.dumps(joined) == json.dumps(dict(sorted(RECORD.items())))


def test_a_key_in_both_files_and_a_missing_or_bad_file_are_named(tmp_path):
    with pytest.raises(ValueError, match="`test/bleu` is both a metric and a detail"):
        records.join({"test/bleu": 1.0}, {"test/bleu": 2.0})
    metrics, details = tmp_path / "m.json", tmp_path / "d.json"
    write_json(metrics, {"test/bleu": 1.0})
    with pytest.raises(FileNotFoundError, match=r"d\.json: missing; the evaluate stage writes"):
        records.load(metrics, details)
    write_json(details, ["not", "an", "object"])
    with pytest.raises(TypeError, match=r"d\.json: expected a JSON object"):
        records.load(metrics, details)


def test_a_record_is_read_at_a_project_root_and_its_data_plots_are_numbers(tmp_path):
    metrics, details = records.split(RECORD, "label_fractions")
    folder = tmp_path / "results" / "translate" / "f"
    write_json(tmp_path / "metrics" / "translate" / "f.json", metrics)
    write_json(folder / records.DETAILS, details)
    assert records.exists_at(tmp_path, "translate", "f")
    assert not records.exists_at(tmp_path, "translate", "g")
    record = records.read_at(tmp_path, "translate", "f")
    assert record["trained_config"] == {"train.lr": 0.001} and record["test/bleu"] == 11.0
    written = records.data_plots(folder, record, [[1, 10], [41, 1000]], "bleu")
    assert written == ["curve_seed0.csv", "curve_seed1.csv", "by_length.csv"]
    with (folder / "curve_seed0.csv").open() as f:
        assert list(csv.reader(f)) == [
            ["epoch", "value", "metric"],
            ["1", "2.5", "val/loss"],
            ["2", "1.5", "val/loss"],
        ]
    with (folder / records.BY_LENGTH).open() as f:  # a bucket without scores (41+) has no row
        assert list(csv.reader(f)) == [
            ["length", "bucket", "bleu", "seed_0", "seed_1"],
            ["1", "1-10", "21.0", "20.0", "22.0"],
        ]
