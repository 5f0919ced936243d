"""results.protocol: the gaps it names in a run's results (short studies, capped runs, missing seeds
or files)."""

from attention_lab.results import protocol


def test_protocol_gaps_name_short_studies_capped_runs_and_missing_seeds():
    params = {
        "tasks": ["classify"],
        "seeds": [0, 1, 2],
        "classify": {"families": ["bow", "han"], "pretrained": ["bert_minilm"]},
    }
    kept = {"seeds": [0, 1, 2], "train/stopped_by": ["early stopping"]}
    # 0: untuned, allowed
    studies = {"bow": {"trials": 8}, "han": {"trials": 4}, "bert_minilm": {"trials": 0}}
    metrics = {"classify/bow": kept, "classify/han": kept, "classify/bert_minilm": kept}
    assert protocol.protocol_gaps(params, studies, metrics) == [
        (
            "tuned/han.yaml: 4 trials, the protocol asks for >= 8 (raise params.yaml"
            " `classify.tune.updates`)"
        )
    ]
    metrics["classify/bow"] = {"seeds": [0], "train/stopped_by": ["early stopping", "time limit"]}
    del metrics["classify/bert_minilm"], studies["han"]
    assert protocol.protocol_gaps(params, studies, metrics) == [
        "results/classify/bow/details.json: seeds [0], params.yaml says [0, 1, 2]",
        (
            "results/classify/bow/details.json: final runs stopped by ['early stopping', 'time "
            "limit'], expected ['early stopping'] (a run cut by a cap has not converged)"
        ),
        "tuned/han.yaml: missing, or without `study.trials`",
        "metrics/classify/bert_minilm.json: missing",
    ]
