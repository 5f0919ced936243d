"""Digit-canvas captioning: canvases in, a Captioner family (Show-Tell, Show-Attend-Tell) , exact
accuracy / BLEU-4 / localisation out."""

from attention_lab.core.task import Task, lazy

TASK = Task(
    name="caption",
    headline={"test/accuracy": "exact accuracy", "test/bleu": "BLEU-4"},
    speed_column="train words/s",
    ablation_columns=(
        ("exact accuracy", "test/accuracy", 3),
        ("BLEU-4", "test/bleu", 1),
        ("localisation", "test/localisation", 3),
    ),
    splits=lazy("attention_lab.caption.prepare:splits"),
    stats=lazy("attention_lab.caption.prepare:stats"),
    tokenizer=lazy("attention_lab.caption.prepare:tokenizer"),
    build=lazy("attention_lab.caption.module:build"),
    evaluate=lazy("attention_lab.caption.evaluate:evaluate_family"),
    export=lazy("attention_lab.caption.export:export"),
    page=lazy("attention_lab.caption.report:page"),
    table=lazy("attention_lab.caption.report:table"),
    images=True,
)
