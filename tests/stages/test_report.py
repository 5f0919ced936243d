"""The report stage on fake evaluate outputs (1 and 3 seeds): the ranking with its tests, the MLflow
comparison run, and a clear error for a bad predictions file."""

import re

import mlflow
import pytest
from omegaconf import OmegaConf
from sacrebleu.metrics import BLEU

from attention_lab.core import tracking
from attention_lab.core.config import load_config
from attention_lab.core.files import read_json, write_json, write_text
from attention_lab.core.paths import predictions_path, seed_dir
from attention_lab.core.task import get_task
from attention_lab.results import records
from attention_lab.stages import report as report_stage
from attention_lab.stages.evaluate import summarize
from tests.results.test_report import rows

CAPTIONS = [
    "one two",
    "three four five",
    "six seven",
    "eight nine zero one",
    "two three",
    "four five six",
    "seven eight",
    "nine zero one two three",
    "four four",
    "five six seven",
]


def fake_evaluation(project, seeds: list[int]) -> dict[str, list[str]]:
    """metrics/, results/, predictions/ and checkpoints/seed<k>/{train,run}.json of show_tell
    (mostly wrong) and show_attend_tell (mostly right) as the evaluate stage writes them, with one
    MLflow run per seed."""
    params = project / "params.yaml"
    text = (
        params.read_text()
        .replace("seeds: [0]", f"seeds: {seeds}", 1)
        .replace("tasks: [translate, classify, caption]", "tasks: [caption]", 1)
    )
    params.write_text(text)
    run_ids = {}
    for f, right in (("show_tell", 1), ("show_attend_tell", 8)):
        cfg = load_config(root=project, family=f, task="caption")
        mlflow.set_tracking_uri(tracking.tracking_uri(cfg))
        per_seed, outputs, hits = {}, {}, {}
        for s in seeds:
            k = right + (s % 2)  # right on the first k canvases: the seeds differ a little
            outputs[str(s)] = CAPTIONS[:k] + ["zero"] * (len(CAPTIONS) - k)
            # as the predictions score
            bleu = BLEU().corpus_score(outputs[str(s)], [CAPTIONS]).score
            per_seed[str(s)] = {
                "test/bleu": bleu,
                "test/accuracy": k / len(CAPTIONS),
                "test/accuracy_len_2_2": k / 12,
                "test/decode_images_per_s": 500.0,
            }
            # localisation: 2 of 3 digits of canvas i hit where i < k, else 1
            if f == "show_attend_tell":
                hits[str(s)] = [[2 if i < k else 1, 3] for i in range(len(CAPTIONS))]
                per_seed[str(s)]["test/localisation"] = sum(h for h, _ in hits[str(s)]) / 30
            with mlflow.start_run(
                experiment_id=tracking.experiment_id(cfg),
                run_name=f"{f}-seed{s}",
                # as tracking.run_tags names them
                tags={"family": f, "seed": str(s)},
            ) as run:
                mlflow.log_metrics(per_seed[str(s)])
            run_ids.setdefault(f, []).append(run.info.run_id)
            write_json(seed_dir(cfg, s) / "run.json", {"run_id": run.info.run_id})
            write_json(
                seed_dir(cfg, s) / "train.json",
                {
                    "params": 1000 * right,
                    "train_seconds": 10.0 * right,
                    "train_tokens_per_s": 100.0,
                    "epochs": 1,
                    "steps": 40,
                    "stopped_by": "early stopping",
                },
            )
            # as train_one does
            write_text(seed_dir(cfg, s) / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
        counted = (
            {"item_stats": {"test/localisation": {"score": "share", "seeds": hits}}} if hits else {}
        )
        write_json(
            predictions_path(cfg),
            {
                "ids": [f"test-{i}" for i in range(10)],
                "references": CAPTIONS,
                "seeds": outputs,
                **counted,
            },
        )
        task = get_task("caption")
        record = {"family": f, **summarize(cfg, task, per_seed, task.runs(cfg))}
        metrics, details = records.split(record, task.variants)  # as the evaluate stage writes them
        write_json(records.metrics_path(cfg), metrics)
        write_json(records.results_dir(cfg) / records.DETAILS, details)
    return run_ids


@pytest.mark.parametrize("seeds", [[0], [0, 1, 2]])
def test_report_stage_ranks_tests_and_logs_the_comparison(project, seeds):
    run_ids = fake_evaluation(project, seeds)
    report_stage.main(["task=caption"])
    report_stage.main(["index"])
    page = (project / "reports" / "caption.md").read_text()
    summary = read_json(project / "metrics" / "caption_summary.json")
    table = page.split("## Ranking")[1].split("\n\n")[1]
    # the runs' own config.yaml, not the task's defaults
    trained = page.split("## Configuration that trained")[1]
    row = next(line for line in trained.splitlines() if line.startswith("| `show_tell` |"))
    assert row.startswith("| `show_tell` | 40 | 1 | early stopping |")
    assert all(
        s in row
        for s in (
            "train.lr=0.001",
            "train.batch_size=32",
            "model.emb_dim=",
            "train.penalty=0.0",
            "train.schedule=plateau",
            "train.patience=",
            "train.min_epochs=",
        )
    )
    # not "cosine"
    assert "then its `train.schedule` (`plateau`: from validation" in page.split("## Ranking")[0]
    by = rows(table)
    assert list(by) == ["show_attend_tell", "show_tell"]
    assert (
        summary["show_attend_tell"]["rank"] == 1
        and summary["show_tell"]["significance"]["baseline"] == "show_tell"
    )
    p = summary["show_attend_tell"]["significance"]["p_baseline"]
    # McNemar and bootstrap
    assert p["test/accuracy"] < 0.05 and set(p) == {"test/accuracy", "test/bleu"}
    assert by["show_attend_tell"][2].endswith("†") and by["show_tell"][2].endswith("‡")
    if len(seeds) == 1:
        assert by["show_attend_tell"][2:4] == ["0.800 ± —†", "—"]
        assert "test/accuracy_sd" not in summary["show_attend_tell"]
    else:
        mean, sd = re.match(r"([\d.]+) ± ([\d.]+)", by["show_attend_tell"][2]).groups()
        assert (
            float(mean) == round(summary["show_attend_tell"]["test/accuracy"], 3) and float(sd) > 0
        )
        assert re.fullmatch(r"\[[\d.]+, [\d.]+\]", by["show_attend_tell"][3])
        assert "Seed k of one family is paired with seed k of the other" in page
    assert (project / "reports" / "caption" / "pareto.png").stat().st_size > 1000
    assert "## All figures" in page and "| `show_tell` |" in page  # the task's own table stays
    index = (project / "reports" / "index.md").read_text()
    assert "[caption.md](caption.md)" in index and "`show_attend_tell`: exact accuracy 0.8" in index

    comparison = mlflow.search_runs(
        experiment_names=["caption"], filter_string="tags.kind = 'comparison'", output_format="list"
    )
    assert len(comparison) == 1 and comparison[0].info.run_name == "comparison"
    logged = comparison[0].data.metrics
    for f in ("show_tell", "show_attend_tell"):
        assert logged[f"{f}/test_accuracy_mean"] == pytest.approx(summary[f]["test/accuracy"])
        assert logged[f"{f}/rank"] == summary[f]["rank"]
        assert (f"{f}/test_accuracy_sd" in logged) == (len(seeds) > 1)
        for run_id in run_ids[f]:
            parent = mlflow.get_run(run_id).data.tags["mlflow.parentRunId"]
            assert parent == comparison[0].info.run_id
    assert logged["show_tell/p_best_test_accuracy"] == pytest.approx(p["test/accuracy"])


def test_report_stage_names_a_bad_predictions_file(project):
    fake_evaluation(project, [0])
    path = project / "predictions" / "caption" / "show_tell.json"
    write_json(path, {"seeds": {"0": ["zero"]}, "references": CAPTIONS})
    with pytest.raises(
        ValueError, match=r"show_tell\.json: seed 0 has 1 outputs for 10 references"
    ):
        report_stage.main(["task=caption"])
    write_json(path, {"seeds": {"0": CAPTIONS}, "references": CAPTIONS[::-1]})
    with pytest.raises(
        ValueError,
        match=r"show_attend_tell\.json: its test examples differ from those of .*show_tell\.json",
    ):
        report_stage.main(["task=caption"])
