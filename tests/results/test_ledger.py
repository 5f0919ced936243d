"""ledger.py: which row the README shows, and the seeds the power analysis asks (the page's rows and
tables on fake outputs: tests/stages/test_claims.py)."""

import yaml

from attention_lab.results import ledger
from tests.conftest import ROOT


def test_the_headline_is_the_confirmatory_row_where_there_is_one():
    rows = [{"id": "a", "evidence": "exploratory"}, {"id": "b", "evidence": "exploratory"}]
    again = [{"id": "b", "evidence": "confirmatory"}]
    assert [r["evidence"] for r in ledger.headline(rows, again)] == ["exploratory", "confirmatory"]


def test_the_seeds_asked_are_the_most_a_familys_decidable_claims_need_at_least_three():
    def row(task, families, mean, sd):
        return {
            "task": task,
            "families": families,
            "side": "above",
            "threshold": 0,
            "effect": {"mean": mean, "sd": sd, "item_sd": 0.0},
        }

    asked = ledger.seeds_asked(
        [
            row("t", ["a", "b"], 10.0, 1.0),
            row("t", ["b"], 3.0, 2.5),
            # c's claim needs far more than 10: undecidable here
            row("t", ["c"], 0.1, 5.0),
        ]
    )
    assert asked == {"t": {"a": 3, "b": 8}}


def test_each_retest_stands_beside_its_claim_and_says_whether_the_verdict_moved():
    effect = {"mean": 1.0, "low": 0.5, "high": 1.5}
    rows = [
        {"id": "a", "effect": effect, "verdict": "contradicted"},
        {
            "id": "a-regime",
            "retests": "a",
            "regime": "the paper's | schedule",
            "effect": effect,
            "verdict": "holds",
        },
        {
            "id": "a-control",
            "retests": "a",
            "claim": "beside a control",
            "effect": effect,
            "verdict": "contradicted",
        },
        {"id": "a-later", "retests": "a", "claim": "not yet", "effect": None, "verdict": "not run"},
    ]
    lines = ledger.retest_text(rows).splitlines()
    assert (
        len(lines) == 5
        and lines[4].endswith("| not run | — |")
        and lines[2].startswith("| **a** |")
        and "**a-regime**" in lines[2]
    )
    assert "the paper's \\| schedule" in lines[2] and lines[2].endswith(
        "| holds | contradicted → holds |"
    )
    assert "beside a control" in lines[3] and lines[3].endswith("| no |")


def test_readme_table_adds_a_column_per_real_corpus():
    rows = [
        {"id": "a", "claim": "A", "paper": "P, 2015", "effect": None, "verdict": "holds"},
        {"id": "b", "claim": "B", "paper": "Q, 2016", "effect": None, "verdict": "inconclusive"},
    ]
    text = ledger.readme_table(rows, {"multi30k": {"a": {"verdict": "contradicted"}}})
    lines = text.splitlines()
    assert lines[0].endswith("| verdict | [multi30k](reports/ledgers/multi30k.md) |")
    assert lines[2].endswith("| **holds** | contradicted |") and lines[3].endswith(
        "| **inconclusive** | — |"
    )
    assert "Each real corpus's column" in text and "Each real corpus" not in ledger.readme_table(
        rows
    )


def test_readme_names_each_paper_by_its_authors_and_year():
    papers = yaml.safe_load((ROOT / "conf" / "claims.yaml").read_text(encoding="utf-8"))
    shorts = {ledger.short_paper(c["paper"]) for c in papers["claims"] if "paper" in c}
    assert "Bahdanau et al. 2015" in shorts and "Vaswani et al. 2017" in shorts
    assert all("(" not in s and "," not in s for s in shorts)


def test_a_claim_not_held_names_the_run_that_would_tell_until_its_retest_has_run():
    rows = [
        {"id": "a", "verdict": "contradicted", "evidence": "confirmatory", "if_not_held": "Run x."},
        {"id": "b", "verdict": "inconclusive", "if_not_held": "Run y."},
        {"id": "c", "verdict": "holds", "if_not_held": "Run z."},
        {"id": "a-regime", "retests": "a", "verdict": "holds", "evidence": "exploratory"},
        {"id": "b-later", "retests": "b", "verdict": "not run"},
    ]
    assert ledger.open_questions(rows) == [
        (
            "- **a** (contradicted, confirmatory): retested as **a-regime** (holds, exploratory):"
            " see each verdict beside its retest."
        ),
        "- **b** (inconclusive): Run y.",
    ]
