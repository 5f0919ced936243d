"""What a ledger's runs cost, from made-up records: runs and training time per seed and label share,
a pretraining, the tuning estimate counted for a family's own study alone, and the CPUs."""

import pytest

from attention_lab.results import compute

RECORDS = {
    "gru": {  # 3 seeds of 600 s, 100 steps; its study spent 1,000 updates
        "seeds": ["0", "1", "2"],
        "train/train_seconds": 600.0,
        "train/steps": 100.0,
        "tuning": {"study": {"updates": 1000, "trials": 4}},
        "machines": {"0": ["Intel Xeon"], "1": ["Intel Xeon", "AMD EPYC"], "2": ["AMD EPYC"]},
    },
    "gru_ablation": {  # its family's tuned values: the study is gru's
        "seeds": ["0", "1"],
        "train/train_seconds": 300.0,
        "train/steps": 100.0,
        "tuning": {"study": {"updates": 1000, "trials": 4}},
    },
    "bert": {  # two seeds at all labels and at a tenth of them, after one pretraining
        "seeds": ["0", "1"],
        "train/train_seconds": 100.0,
        "label_fractions": {"0.1": {"train/train_seconds": 20.0}},
        "pretrain": {"train_seconds": 3600.0},
    },
}


def test_runs_hours_and_cpus_add_up_over_the_records_found():
    got = compute.spent(["gru", "gru_ablation", "bert", "absent"], RECORDS.get, tuned=["gru"])
    assert got["runs"] == 3 + 2 + (2 * 2 + 1)
    seconds = 3 * 600 + 2 * 300 + 2 * (100 + 20) + 3600
    assert got["train_hours"] == pytest.approx(seconds / 3600)
    assert got["tune_hours"] == pytest.approx(1000 * 6.0 / 3600)  # 6 s an update, gru's alone
    assert got["cpus"] == {"Intel Xeon", "AMD EPYC"}


def test_a_replication_counts_no_study_and_the_table_says_what_was_not_recorded():
    rows = {
        ("translate", "exploratory"): compute.spent(["gru_ablation"], RECORDS.get),
        ("translate", "confirmatory"): compute.spent(["gru"], RECORDS.get),
    }
    assert rows[("translate", "exploratory")]["tune_hours"] == 0.0
    text = compute.compute_text(rows)
    assert "| translate | exploratory | 2 | 0.2 | — | not recorded |" in text
    assert "| translate | confirmatory | 3 | 0.5 | — | AMD EPYC; Intel Xeon |" in text
