"""report.py and the report stages: the ranking with mean ± sd, intervals and significance marks (1 and 3 seeds), bands
over seeds, the Pareto view, the index page, and the MLflow comparison run."""

import re

import mlflow
import pytest

from attention_lab.core import plots, tracking
from attention_lab.core.config import load_config
from attention_lab.core.files import read_json, write_json
from attention_lab.core.paths import predictions_path, seed_dir
from attention_lab.core.report import bucket_series, pareto_front, ranked, ranking_table, render_index
from attention_lab.stages import report as report_stage
from attention_lab.stages.evaluate import summarize


def family(bleu: float, chrf: float, seconds: float, sd: float | None = None) -> dict:
    m = {"test/bleu": bleu, "test/chrf": chrf, "train/params": 1234.0, "train/train_seconds": seconds,
         "train/train_tokens_per_s": 5000.0}
    if sd is not None:
        m.update({"test/bleu_sd": sd, "test/bleu_ci95_low": bleu - 2 * sd, "test/bleu_ci95_high": bleu + 2 * sd,
                  "test/chrf_sd": sd, "test/chrf_ci95_low": chrf - 2 * sd, "test/chrf_ci95_high": chrf + 2 * sd})
    return m


def rows(table: str) -> dict[str, list[str]]:
    """{family: cells} of a Markdown table."""
    out = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        out[cells[1].strip("`")] = cells
    return out


def test_ranking_with_one_seed_shows_no_sd_nor_interval():
    results = {"seq2seq": family(2.0, 10.0, 50.0), "bahdanau": family(80.0, 90.0, 90.0)}
    table = ranking_table("translate", results, {"bahdanau": {"p_baseline": {"test/bleu": 0.001, "test/chrf": 0.2}}})
    assert table.splitlines()[0] == ("| rank | family | BLEU (mean ± sd) | BLEU 95% interval | chrF (mean ± sd) | "
                                     "chrF 95% interval | params | train time (s) | train tok/s |")
    by = rows(table)
    assert by["bahdanau"][:6] == ["1", "`bahdanau`", "80.0 ± —†", "—", "90.0 ± —", "—"]
    assert by["seq2seq"][:3] == ["2", "`seq2seq`", "2.0 ± —"]


def test_ranking_with_three_seeds_shows_sd_interval_and_marks():
    results = {"bow": {**family(0, 0, 10.0), "test/accuracy": 0.5, "test/accuracy_sd": 0.01,
                       "test/accuracy_ci95_low": 0.475, "test/accuracy_ci95_high": 0.525, "test/macro_f1": 0.4},
               "han": {**family(0, 0, 100.0), "test/accuracy": 0.9, "test/accuracy_sd": 0.02,
                       "test/accuracy_ci95_low": 0.85, "test/accuracy_ci95_high": 0.95, "test/macro_f1": 0.89},
               "bigru": {**family(0, 0, 80.0), "test/accuracy": 0.7, "test/macro_f1": 0.69}}
    tests = {"han": {"p_baseline": {"test/accuracy": 0.0001}},
             "bigru": {"p_baseline": {"test/accuracy": 0.01}, "p_best": {"test/accuracy": 0.03}},
             "bow": {"p_best": {"test/accuracy": 0.0001}}}
    by = rows(ranking_table("classify", results, tests))
    assert [by[f][0] for f in ("han", "bigru", "bow")] == ["1", "2", "3"]
    assert by["han"][2:4] == ["0.900 ± 0.020†", "[0.850, 0.950]"]
    assert by["bigru"][2] == "0.700 ± —†‡" and by["bow"][2] == "0.500 ± 0.010‡"
    assert by["han"][4:6] == ["0.890 ± —", "—"]  # macro-F1: no paired test, so no mark
    assert by["han"][-3:] == ["1,234", "100", "5,000"]


def test_ranked_puts_missing_scores_last():
    assert ranked({"a": {"s": 1.0}, "b": {"s": float("nan")}, "c": {}, "d": {"s": 3.0}}, "s") == ["d", "a", "b", "c"]


def test_bucket_series_take_the_sd_over_seeds():
    buckets = [[1, 10], [41, 1000]]
    one = {"test/bleu_len_1_10": 10.0, "test/bleu_len_41_plus": 5.0, "per_seed": {"0": {"test/bleu_len_1_10": 10.0,
                                                                                         "test/bleu_len_41_plus": 5.0}}}
    three = {"test/bleu_len_1_10": 20.0, "per_seed": {s: {"test/bleu_len_1_10": v} for s, v in
                                                       (("0", 19.0), ("1", 20.0), ("2", 21.0))}}
    series = bucket_series({"one": one, "three": three}, buckets)
    assert series == {"one": {"1-10": (10.0, None), "41+": (5.0, None)}, "three": {"1-10": (20.0, pytest.approx(1.0))}}


def test_pareto_front_keeps_the_undominated_families_by_cost():
    points = {"cheap_bad": (10.0, 0.5), "mid": (50.0, 0.8), "slow_worse": (90.0, 0.7), "slow_best": (100.0, 0.9),
              "tie": (50.0, 0.8)}
    assert pareto_front(points) == ["cheap_bad", "mid", "tie", "slow_best"]


def test_pictures_with_and_without_bands(tmp_path):
    plots.by_length({"a": {"1-10": (10.0, None), "11-20": (8.0, None)},
                     "b": {"1-10": (12.0, 1.0), "11-20": (9.0, 2.0)}}, tmp_path / "len.png")
    plots.pareto({"a": (10.0, 0.5, None), "b": (200.0, 0.9, 0.02)}, ["a", "b"], tmp_path / "pareto.png",
                 ylabel="accuracy")
    assert (tmp_path / "len.png").stat().st_size > 1000 and (tmp_path / "pareto.png").stat().st_size > 1000


def test_index_links_every_task_page():
    summary = {"seq2seq_lstm": {**family(1.0, 9.0, 10.0), "rank": 2,
                                "significance": {"baseline": "seq2seq_lstm", "p_baseline": {}}},
               "bahdanau": {**family(88.0, 92.0, 20.0, sd=0.5), "rank": 1,
                            "significance": {"baseline": "seq2seq_lstm", "p_baseline": {"test/bleu": 0.0004}}}}
    page = render_index({"translate": summary})
    assert "[translate.md](translate.md)" in page
    assert "| `translate` | [translate.md](translate.md) | 2 | `bahdanau`: BLEU 88.0 ± 0.5 | `seq2seq_lstm`: BLEU 1.0 ± — | < 0.001 |" in page


# --- the report stage on fake evaluate outputs ------------------------------------------------------------------


CAPTIONS = ["one two", "three four five", "six seven", "eight nine zero one", "two three", "four five six",
            "seven eight", "nine zero one two three", "four four", "five six seven"]


def fake_evaluation(project, seeds: list[int]) -> dict[str, list[str]]:
    """metrics/, predictions/ and checkpoints/seed<k>/{train,run}.json of show_tell (mostly wrong) and
    show_attend_tell (mostly right) as the evaluate stage writes them, with one MLflow run per seed."""
    params = project / "params.yaml"
    text = params.read_text().replace("seeds: [0]", f"seeds: {seeds}", 1).replace(
        "tasks: [translate, classify, caption]", "tasks: [caption]", 1)
    params.write_text(text)
    run_ids = {}
    for f, right in (("show_tell", 1), ("show_attend_tell", 8)):
        cfg = load_config(root=project, family=f, task="caption")
        mlflow.set_tracking_uri(tracking.tracking_uri(cfg))
        per_seed, outputs = {}, {}
        for s in seeds:
            k = right + (s % 2)  # right on the first k canvases: the seeds differ a little
            outputs[str(s)] = CAPTIONS[:k] + ["zero"] * (len(CAPTIONS) - k)
            per_seed[str(s)] = {"test/bleu": 10.0 * k, "test/accuracy": k / len(CAPTIONS),
                                "test/accuracy_len_2_2": k / 12, "test/decode_images_per_s": 500.0}
            with mlflow.start_run(experiment_id=tracking.experiment_id(cfg), run_name=f"{f}-seed{s}",
                                  tags={"family": f, "seed": str(s)}) as run:  # as tracking.run_tags names them
                mlflow.log_metrics(per_seed[str(s)])
            run_ids.setdefault(f, []).append(run.info.run_id)
            write_json(seed_dir(cfg, s) / "run.json", {"run_id": run.info.run_id})
            write_json(seed_dir(cfg, s) / "train.json", {"params": 1000 * right, "train_seconds": 10.0 * right,
                                                          "train_tokens_per_s": 100.0, "epochs": 1})
        write_json(predictions_path(cfg), {"ids": [f"test-{i}" for i in range(10)], "references": CAPTIONS,
                                           "seeds": outputs})
        write_json(project / "metrics" / "caption" / f"{f}.json", {"family": f, **summarize(cfg, per_seed, 1.0)})
    return run_ids


@pytest.mark.parametrize("seeds", [[0], [0, 1, 2]])
def test_report_stage_ranks_tests_and_logs_the_comparison(project, seeds):
    run_ids = fake_evaluation(project, seeds)
    report_stage.main(["task=caption"])
    report_stage.main(["index"])
    page = (project / "reports" / "caption.md").read_text()
    summary = read_json(project / "metrics" / "caption_summary.json")
    table = page.split("## Ranking")[1].split("\n\n")[1]
    by = rows(table)
    assert list(by) == ["show_attend_tell", "show_tell"]
    assert summary["show_attend_tell"]["rank"] == 1 and summary["show_tell"]["significance"]["baseline"] == "show_tell"
    p = summary["show_attend_tell"]["significance"]["p_baseline"]
    assert p["test/accuracy"] < 0.05 and set(p) == {"test/accuracy", "test/bleu"}  # McNemar and bootstrap
    assert by["show_attend_tell"][2].endswith("†") and by["show_tell"][2].endswith("‡")
    if len(seeds) == 1:
        assert by["show_attend_tell"][2:4] == ["0.800 ± —†", "—"]
        assert "test/accuracy_sd" not in summary["show_attend_tell"]
    else:
        mean, sd = re.match(r"([\d.]+) ± ([\d.]+)", by["show_attend_tell"][2]).groups()
        assert float(mean) == round(summary["show_attend_tell"]["test/accuracy"], 3) and float(sd) > 0
        assert re.fullmatch(r"\[[\d.]+, [\d.]+\]", by["show_attend_tell"][3])
        assert "Seed k of one family is paired with seed k of the other" in page
    assert (project / "reports" / "caption" / "pareto.png").stat().st_size > 1000
    assert "## All figures" in page and "| `show_tell` |" in page  # the task's own table stays
    index = (project / "reports" / "index.md").read_text()
    assert "[caption.md](caption.md)" in index and "`show_attend_tell`: exact accuracy 0.8" in index

    comparison = mlflow.search_runs(experiment_names=["caption"], filter_string="tags.kind = 'comparison'",
                                    output_format="list")
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
    with pytest.raises(ValueError, match=r"show_tell\.json: seed 0 has 1 outputs for 10 references"):
        report_stage.main(["task=caption"])
    write_json(path, {"seeds": {"0": CAPTIONS}, "references": CAPTIONS[::-1]})
    with pytest.raises(ValueError, match=r"show_attend_tell\.json: its test examples differ from those of .*show_tell\.json"):
        report_stage.main(["task=caption"])
