"""report.py: the ranking with mean ± sd, intervals and significance marks (1 and 3 seeds), bands
over seeds, the Pareto view and the index page (the report stage itself:
tests/stages/test_report.py)."""

import pytest

from attention_lab.core.task import get_task
from attention_lab.results import charts
from attention_lab.results.report import (
    bucket_series,
    config_section,
    curves_section,
    pareto_front,
    ranked,
    ranking_table,
    render_index,
    tuning_section,
)


def family(bleu: float, chrf: float, seconds: float, sd: float | None = None) -> dict:
    m = {
        "test/bleu": bleu,
        "test/chrf": chrf,
        "train/params": 1234.0,
        "train/train_seconds": seconds,
        "train/train_tokens_per_s": 5000.0,
    }
    if sd is not None:
        m.update(
            {
                "test/bleu_sd": sd,
                "test/bleu_ci95_low": bleu - 2 * sd,
                "test/bleu_ci95_high": bleu + 2 * sd,
                "test/chrf_sd": sd,
                "test/chrf_ci95_low": chrf - 2 * sd,
                "test/chrf_ci95_high": chrf + 2 * sd,
            }
        )
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
    table = ranking_table(
        get_task("translate"),
        results,
        {"bahdanau": {"p_baseline": {"test/bleu": 0.001, "test/chrf": 0.2}}},
    )
    assert table.splitlines()[0] == (
        "| rank | family | BLEU (mean ± sd) | BLEU 95% interval | chrF (mean ± sd) | "
        "chrF 95% interval | params | train time (s) | train tok/s |"
    )
    by = rows(table)
    assert by["bahdanau"][:6] == ["1", "`bahdanau`", "80.0 ± —†", "—", "90.0 ± —", "—"]
    assert by["seq2seq"][:3] == ["2", "`seq2seq`", "2.0 ± —"]


def test_ranking_with_three_seeds_shows_sd_interval_and_marks():
    results = {
        "bow": {
            **family(0, 0, 10.0),
            "test/accuracy": 0.5,
            "test/accuracy_sd": 0.01,
            "test/accuracy_ci95_low": 0.475,
            "test/accuracy_ci95_high": 0.525,
            "test/macro_f1": 0.4,
        },
        "han": {
            **family(0, 0, 100.0),
            "test/accuracy": 0.9,
            "test/accuracy_sd": 0.02,
            "test/accuracy_ci95_low": 0.85,
            "test/accuracy_ci95_high": 0.95,
            "test/macro_f1": 0.89,
        },
        "bigru": {**family(0, 0, 80.0), "test/accuracy": 0.7, "test/macro_f1": 0.69},
    }
    tests = {
        "han": {"p_baseline": {"test/accuracy": 0.0001}},
        "bigru": {"p_baseline": {"test/accuracy": 0.01}, "p_best": {"test/accuracy": 0.03}},
        "bow": {"p_best": {"test/accuracy": 0.0001}},
    }
    by = rows(ranking_table(get_task("classify"), results, tests))
    assert [by[f][0] for f in ("han", "bigru", "bow")] == ["1", "2", "3"]
    assert by["han"][2:4] == ["0.900 ± 0.020†", "[0.850, 0.950]"]
    assert by["bigru"][2] == "0.700 ± —†‡" and by["bow"][2] == "0.500 ± 0.010‡"
    assert by["han"][4:6] == ["0.890 ± —", "—"]  # macro-F1: no paired test, so no mark
    assert by["han"][-3:] == ["1,234", "100", "5,000"]


def test_ranked_puts_missing_scores_last():
    assert ranked({"a": {"s": 1.0}, "b": {"s": float("nan")}, "c": {}, "d": {"s": 3.0}}, "s") == [
        "d",
        "a",
        "b",
        "c",
    ]


def test_bucket_series_take_the_sd_over_seeds():
    buckets = [[1, 10], [41, 1000]]
    one = {
        "test/bleu_len_1_10": 10.0,
        "test/bleu_len_41_plus": 5.0,
        "per_seed": {"0": {"test/bleu_len_1_10": 10.0, "test/bleu_len_41_plus": 5.0}},
    }
    three = {
        "test/bleu_len_1_10": 20.0,
        "per_seed": {
            s: {"test/bleu_len_1_10": v} for s, v in (("0", 19.0), ("1", 20.0), ("2", 21.0))
        },
    }
    series = bucket_series({"one": one, "three": three}, buckets)
    assert series == {
        "one": {"1-10": (10.0, None), "41+": (5.0, None)},
        "three": {"1-10": (20.0, pytest.approx(1.0))},
    }


def test_pareto_front_keeps_the_undominated_families_by_cost():
    points = {
        "cheap_bad": (10.0, 0.5),
        "mid": (50.0, 0.8),
        "slow_worse": (90.0, 0.7),
        "slow_best": (100.0, 0.9),
        "tie": (50.0, 0.8),
    }
    assert pareto_front(points) == ["cheap_bad", "mid", "tie", "slow_best"]


def test_pictures_with_and_without_bands(tmp_path):
    charts.by_length(
        {
            "a": {"1-10": (10.0, None), "11-20": (8.0, None)},
            "b": {"1-10": (12.0, 1.0), "11-20": (9.0, 2.0)},
        },
        tmp_path / "len.png",
    )
    charts.pareto(
        {"a": (10.0, 0.5, None), "b": (200.0, 0.9, 0.02)},
        ["a", "b"],
        tmp_path / "pareto.png",
        ylabel="accuracy",
    )
    assert (tmp_path / "len.png").stat().st_size > 1000 and (
        tmp_path / "pareto.png"
    ).stat().st_size > 1000


def test_index_links_every_task_page():
    summary = {
        "seq2seq_lstm": {
            **family(1.0, 9.0, 10.0),
            "rank": 2,
            "significance": {"baseline": "seq2seq_lstm", "p_baseline": {}},
        },
        "bahdanau": {
            **family(88.0, 92.0, 20.0, sd=0.5),
            "rank": 1,
            "significance": {"baseline": "seq2seq_lstm", "p_baseline": {"test/bleu": 0.0004}},
        },
    }
    page = render_index({"translate": summary})
    assert "[translate.md](translate.md)" in page
    assert (
        "| `translate` | [translate.md](translate.md) | 2 | `bahdanau`: BLEU 88.0 ± 0.5 |"
        " `seq2seq_lstm`: BLEU 1.0 ± — | < 0.001 |" in page
    )


def test_tuning_section_shows_each_study_s_gain_over_its_default_and_draws_the_curves(tmp_path):
    """Gain is the pick's full-run value against the untuned default's, signed so that better is
    positive."""

    def study(default, best, values):
        trials = [
            {
                "trial": i,
                "state": "complete",
                "stopped_by": "early stopping",
                "updates": 100,
                "value": v,
            }
            for i, v in enumerate(values)
        ]
        return {
            "tuning": {
                "study": {
                    "metric": "val/loss",
                    "direction": "minimize",
                    "trials": len(values),
                    "complete": len(values),
                    "pruned": 0,
                    "updates": 100 * len(values),
                    "budget_updates": 1000,
                    "default_value": default,
                    "best_value": best,
                },
                "trials": trials,
            }
        }

    results = {
        "bahdanau": study(4.0, 3.5, [4.0, 3.5, 3.8]),
        "luong_dot": study(3.0, 3.0, [3.0, 3.2]),
        "bow": {},
    }
    lines = tuning_section("translate", results, tmp_path)
    rows = [line for line in lines if line.startswith("| `")]
    assert rows == [
        "| `bahdanau` | 3 (3 / 0) | 300 (1,000) | 4.0000 | 3.5000 | 0.5000 |",
        "| `luong_dot` | 2 (2 / 0) | 200 (1,000) | 3.0000 | 3.0000 | 0.0000 |",
    ]
    assert "![expected best validation score by trials](translate/expected_best.png)" in lines
    assert (tmp_path / "expected_best.png").stat().st_size > 1000
    assert tuning_section("translate", {"bow": {}}, tmp_path) == []


def test_curves_section_draws_each_family_s_validation_curves_by_seed(tmp_path):
    """Per family the monitored metric of every seed's final run by epoch (metrics `val_curves`,
    from train.json), in reports/<task>/val_curves.png, named after the metric the runs stopped on;
    none without curves. The convergence sentence names that metric too."""

    def family(curves):
        return {
            "val_metric": "val/accuracy",
            "train/stopped_by": ["early stopping"],
            "val_curves": {
                seed: {"curve": c, "stopped_by": "early stopping"} for seed, c in curves.items()
            },
        }

    results = {
        "han": family({"0": [[1, 0.5], [2, 0.7], [3, 0.69]], "1": [[1, 0.4], [2, 0.6]]}),
        "bow": family({"0": [[1, 0.6], [2, 0.62]]}),
        "old": {},
    }
    lines = curves_section("classify", results, tmp_path)
    assert (
        "## Validation curves" in lines
        and "![validation val/accuracy by epoch](classify/val_curves.png)" in lines
    )
    assert any("x marks the last validation, where the run stopped" in line for line in lines)
    assert (tmp_path / "val_curves.png").stat().st_size > 1000
    assert curves_section("classify", {"old": {}}, tmp_path) == []
    assert any("early stopping on val/accuracy" in line for line in config_section(results))
    assert any("early stopping on val/loss" in line for line in config_section({"bahdanau": {}}))
