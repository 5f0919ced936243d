"""English→Korean translation: sentence pairs in, a Seq2Seq family (conf/model) trained with teacher
forcing, BLEU / chrF / AER out."""

from attention_lab.core.task import Task, lazy

TASK = Task(
    name="translate",
    headline={"test/bleu": "BLEU", "test/chrf": "chrF"},
    speed_column="train tok/s",
    ablation_columns=(
        ("BLEU", "test/bleu", 1),
        ("BLEU 1–10", "test/bleu_len_1_10", 1),
        ("BLEU 41+", "test/bleu_len_41_plus", 1),
        ("AER", "test/aer", 3),
    ),
    splits=lazy("attention_lab.translate.prepare:splits"),
    stats=lazy("attention_lab.translate.prepare:stats"),
    tokenizer=lazy("attention_lab.translate.prepare:tokenizer"),
    build=lazy("attention_lab.translate.module:build"),
    evaluate=lazy("attention_lab.translate.evaluate:evaluate_family"),
    export=lazy("attention_lab.translate.export:export"),
    page=lazy("attention_lab.translate.report:page"),
    table=lazy("attention_lab.translate.report:table"),
)
