"""ablations.py: each ablation against its family, with the ledger's interval and test (the stage
that writes the page, on fake outputs, is tests/stages/test_claims.py; the real pipeline's,
tests/e2e/test_pipeline.py)."""

from attention_lab.results.ablations import page, rows, setting

NO_FEEDING = {"of": "luong_general", "set": {"model": {"input_feeding": False}}}


def metrics_file(bleus: list[float], feeding: bool, epochs: float) -> dict:
    per_seed = {
        str(s): {"test/bleu": b, "test/bleu_len_1_10": b + 5, "test/bleu_len_41_plus": b - 5}
        for s, b in enumerate(bleus)
    }
    return {
        "test/bleu": sum(bleus) / len(bleus),
        "test/bleu_len_1_10": sum(bleus) / len(bleus) + 5,
        "test/bleu_len_41_plus": sum(bleus) / len(bleus) - 5,
        "per_seed": per_seed,
        "train/epochs": epochs,
        "trained_config": {
            "model.input_feeding": feeding,
            "train.teacher_forcing": "constant",
            "train.lr": 0.002,
        },
    }


FILES = {
    "luong_general": metrics_file([80.0, 81.0, 82.0], True, 20.0),
    "luong_general_no_feeding": metrics_file([70.0, 72.0, 71.0], False, 18.0),
}


def test_a_row_gives_both_means_the_interval_and_the_test():
    asked = []

    def items(term):
        asked.append((term["family"], term["metric"]))

    found = rows("translate", {"luong_general_no_feeding": NO_FEEDING}, FILES.get, items)
    (row,) = found
    assert row["changes"] == ["model.input_feeding: True → False"] and row["epochs"] == (20.0, 18.0)
    bleu = row["cells"]["BLEU"]
    assert (bleu["family"], bleu["ablation"]) == (81.0, 71.0) and bleu["row"]["effect"][
        "mean"
    ] == -10.0
    # seeds' differences -10, -9, -11
    assert bleu["row"]["effect"]["low"] < -10.0 < bleu["row"]["effect"]["high"] < 0
    assert ("luong_general_no_feeding", "test/bleu") in asked  # no items here: the seeds alone
    # the fake files have no AER
    assert row["cells"]["AER"]["row"]["verdict"] == "not measurable on this data"
    text = page({"translate": found})
    line = next(x for x in text.splitlines() if x.startswith("| `luong_general_no_feeding`"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[:3] == [
        "`luong_general_no_feeding`",
        "`luong_general`",
        "model.input_feeding: True → False",
    ]
    assert cells[3].startswith("81.0 → 71.0 (-10.0 [") and cells[-3:-1] == [
        "0.003",
        "seeds only: the predictions do not keep this metric item by item",
    ]
    assert cells[-1] == "20.0 → 18.0" and "| — |" in line  # AER: neither side has it


def test_an_ablation_not_run_says_so_and_a_task_without_ablations_too():
    found = rows(
        "translate",
        {"luong_general_no_feeding": NO_FEEDING},
        {"luong_general": FILES["luong_general"]}.get,
        lambda a, b: None,
    )
    assert "not run" in page({"translate": found})
    assert "No ablations of this run's families in params.yaml `caption.ablations`." in page(
        {"caption": []}
    )


def test_a_setting_is_read_from_the_trained_config_however_evaluate_flattened_it():
    trained = FILES["luong_general"]["trained_config"]
    assert setting(trained, "model.input_feeding") is True
    # evaluate keeps the schedule alone
    assert setting(trained, "train.teacher_forcing.schedule") == "constant"
    assert setting(trained, "train.label_fractions") == "—"
