"""Document classification with rationales: labelled documents in, a DocumentClassifier family
(BERT's pretraining in classify/pretraining.py) trained on all or part of the labels, accuracy /
macro-F1 / rationale agreement out."""

from attention_lab.core.task import Task, lazy

TASK = Task(
    name="classify",
    headline={"test/accuracy": "accuracy", "test/macro_f1": "macro-F1"},
    speed_column="train words/s",
    ablation_columns=(
        ("accuracy", "test/accuracy", 3),
        ("rationale acc", "test/rationale_acc", 3),
        ("hop overlap", "test/hop_overlap", 3),
        # evaluate.py: order used?
        ("accuracy, tokens shuffled", "test/accuracy_shuffled", 3),
    ),
    ablation_names={"model.positions": "absolute vs distance-aware positions"},
    splits=lazy("attention_lab.classify.prepare:splits"),
    stats=lazy("attention_lab.classify.prepare:stats"),
    tokenizer=lazy("attention_lab.classify.prepare:tokenizer"),
    build=lazy("attention_lab.classify.module:build"),
    evaluate=lazy("attention_lab.classify.evaluate:evaluate_family"),
    export=lazy("attention_lab.classify.export:export"),
    page=lazy("attention_lab.classify.report:page"),
    table=lazy("attention_lab.classify.report:table"),
    runs=lazy("attention_lab.classify.label_runs:runs"),
    full_run=lazy("attention_lab.classify.label_runs:full_run"),
    run_marks=lazy("attention_lab.classify.label_runs:run_marks"),
    train_summary=lazy("attention_lab.classify.label_runs:train_summary"),
    variants="label_fractions",
)
