"""ablations.py: the ablation table from `dvc exp show` rows (the real `dvc exp run` is in test_pipeline.py)."""

from attention_lab.results.ablations import ablation_rows, params_keys, render


def exp_row(typ: str, rev: str, feeding: bool, bleu: float, name: str | None = None, state=None) -> dict:
    return {"Experiment": name, "rev": rev, "typ": typ, "State": state,
            "translate.family_params.luong_general.model.input_feeding": feeding,
            "translate.family_params.bahdanau.train.teacher_forcing.schedule": "constant",
            "metrics/translate/luong_general.json:test/bleu": bleu,
            "metrics/translate/luong_general.json:test/bleu_len_1_10": bleu + 5,
            "metrics/translate/luong_general.json:test/bleu_len_41_plus": bleu - 5,
            "metrics/translate/luong_general.json:test/aer": 0.3,
            "metrics/translate/bahdanau.json:test/bleu": 90.0}


def test_rows_name_the_changed_switch_and_both_metrics():
    rows = ablation_rows([exp_row("baseline", "workspace", True, 1.0), exp_row("baseline", "main", True, 80.0),
                          exp_row("branch_base", "abc123", False, 70.0, name="no-feeding"),
                          exp_row("branch_base", "def456", False, 1.0, name="queued", state="Queued")],
                         "translate", ["bahdanau", "luong_general"])
    assert len(rows) == 1  # bahdanau unchanged; the queued experiment has no results yet
    row = rows[0]
    assert row["family"] == "luong_general" and row["experiment"] == "no-feeding"
    assert row["changes"] == ["model.input_feeding: True → False"]
    assert row["BLEU"] == (80.0, 70.0) and row["BLEU 1–10"] == (85.0, 75.0) and row["BLEU 41+"] == (75.0, 65.0)
    text = render({"translate": rows, "classify": []})
    assert "| `luong_general` | model.input_feeding: True → False | 80.0 → 70.0 | 85.0 → 75.0 | 75.0 → 65.0 | 0.300 → 0.300 |" in text


def test_no_experiments_says_how_to_run_them():
    text = render({"translate": ablation_rows([], "translate", ["bahdanau"])})
    assert "No finished experiments change `translate.family_params`" in text


def test_command_outside_a_git_repository_says_so(project, capsys):
    from attention_lab.cli import main

    assert main(["ablations"]) == 2
    err = capsys.readouterr().err
    assert "cannot list DVC experiments" in err and not (project / "reports" / "ablations.md").exists()


def test_a_metric_only_one_family_has_is_read_from_its_bare_key():
    def row(typ, rev, penalty, overlap, name=None):
        return {"Experiment": name, "rev": rev, "typ": typ, "State": None,
                "classify.family_params.self_attentive.train.penalty": penalty,
                "classify.family_params.han.train.penalty": 1.0,
                "metrics/classify/self_attentive.json:test/accuracy": 0.8, "metrics/classify/han.json:test/accuracy": 0.9,
                "test/hop_overlap": overlap}  # dvc prints a name without its file when one file alone has it

    rows = ablation_rows([row("baseline", "main", 1.0, 0.01), row("branch_base", "x", 0.0, 0.9, "no-penalty")],
                         "classify", ["han", "self_attentive"],
                         {"han": {"test/accuracy"}, "self_attentive": {"test/accuracy", "test/hop_overlap"}})
    assert len(rows) == 1 and rows[0]["hop overlap"] == (0.01, 0.9)
    text = render({"classify": rows})
    assert "| `self_attentive` | train.penalty: 1.0 → 0.0 | 0.800 → 0.800 |" in text and "0.010 → 0.900" in text


def test_a_key_the_baseline_lacks_takes_its_old_value_from_the_layers_below():
    """`-S ++<task>.family_params.<family>.<key>=...` adds a key the baseline's family_params lacks (exp show lists it
    as "None" there, dvc.api.exp_show's values being strings): the old value is the one the family trained with."""
    rows = ablation_rows([exp_row("baseline", "main", "None", 80.0), exp_row("branch_base", "abc", "False", 70.0, "no-feeding")],
                         "translate", ["luong_general"], below=lambda family, key: {"model.input_feeding": True}[key])
    assert rows[0]["changes"] == ["model.input_feeding: True → False"]


def test_the_position_ablation_reads_as_absolute_vs_distance_aware_with_the_shuffled_accuracy():
    def row(typ, rev, positions, accuracy, shuffled, name=None):
        return {"Experiment": name, "rev": rev, "typ": typ,
                "classify.family_params.transformer_encoder.model.positions": positions,
                "metrics/classify/transformer_encoder.json:test/accuracy": accuracy,
                "metrics/classify/transformer_encoder.json:test/accuracy_shuffled": shuffled}

    rows = ablation_rows([row("baseline", "main", "alibi", 0.88, 0.49),
                          row("branch_base", "abc", "sinusoidal", 0.54, 0.54, "te-sinusoidal")],
                         "classify", ["transformer_encoder"])
    assert rows[0]["accuracy, tokens shuffled"] == (0.49, 0.54)
    text = render({"classify": rows})
    assert ("| `transformer_encoder` | absolute vs distance-aware positions (model.positions: alibi → sinusoidal) | "
            "0.880 → 0.540 |") in text
    assert "0.490 → 0.540 | `te-sinusoidal` |" in text


def test_a_key_only_another_experiment_added_is_not_a_change():
    """Two experiments each add a different `++` key: exp show lists both keys in every row ("None" where a row's
    params.yaml lacks one), and each experiment is one row, naming only its own switch."""
    def row(typ, rev, positions, penalty, accuracy, name=None):
        return {"Experiment": name, "rev": rev, "typ": typ, "State": None,
                "classify.family_params.transformer_encoder.model.positions": positions,
                "classify.family_params.self_attentive.train.penalty": penalty,
                "metrics/classify/transformer_encoder.json:test/accuracy": accuracy[0],
                "metrics/classify/self_attentive.json:test/accuracy": accuracy[1]}

    below = {("transformer_encoder", "model.positions"): "alibi", ("self_attentive", "train.penalty"): 1.0}
    rows = ablation_rows([row("baseline", "main", "None", "None", (0.92, 0.98)),
                          row("branch_base", "a", "sinusoidal", "None", (0.56, 0.98), "te-absolute"),
                          row("branch_base", "b", "None", "0.0", (0.92, 0.99), "no-penalty")],
                         "classify", ["self_attentive", "transformer_encoder"],
                         below=lambda family, key: below[family, key])
    assert [(r["experiment"], r["family"], r["changes"]) for r in rows] == [
        ("te-absolute", "transformer_encoder", ["model.positions: alibi → sinusoidal"]),
        ("no-penalty", "self_attentive", ["train.penalty: 1.0 → 0.0"])]


def test_a_switch_set_to_null_is_a_change_and_another_experiments_key_is_not():
    """`-S ++….model.init_range=null` (PyTorch's default initialisation): exp show gives None both for that null and for
    keys another experiment added; the experiment's own params.yaml (params_keys) tells them apart."""
    def row(typ, rev, init, feeding, bleu, name=None):
        return {"Experiment": name, "rev": rev, "typ": typ, "State": None,
                "translate.family_params.luong_dot.model.init_range": init,
                "translate.family_params.luong_general.model.input_feeding": feeding,
                "metrics/translate/luong_dot.json:test/bleu": bleu[0],
                "metrics/translate/luong_general.json:test/bleu": bleu[1]}

    below = {("luong_dot", "model.init_range"): 0.1, ("luong_general", "model.input_feeding"): True}
    set_keys = {"a": params_keys({"translate": {"family_params": {"luong_dot": {"model": {"init_range": None}},
                                                                  "luong_general": {}}}}),
                "b": params_keys({"translate": {"family_params": {"luong_dot": {},
                                                                  "luong_general": {"model": {"input_feeding": False}}}}})}
    assert set_keys["a"] == {"translate.family_params.luong_dot.model.init_range", "translate.family_params.luong_general"}
    rows = ablation_rows([row("baseline", "main", None, None, (70.0, 69.0)),
                          row("branch_commit", "a", None, None, (66.0, 69.0), "luong-torch-init"),
                          row("branch_commit", "b", None, False, (70.0, 63.0), "luong-no-feeding")],
                         "translate", ["luong_dot", "luong_general"], below=lambda f, k: below[f, k], keys_of=set_keys.get)
    assert [(r["experiment"], r["family"], r["changes"]) for r in rows] == [
        ("luong-torch-init", "luong_dot", ["model.init_range: 0.1 → None"]),
        ("luong-no-feeding", "luong_general", ["model.input_feeding: True → False"])]
