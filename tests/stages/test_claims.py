"""The report_claims stage on fake evaluate outputs of caption: the ledger's page, JSON and forest
plot, the claims the data cannot give marked so, and the rows logged to the task's MLflow comparison
run."""

import mlflow
import pytest

from attention_lab.core.files import read_json
from attention_lab.results import claims
from attention_lab.stages import claims as claims_stage
from attention_lab.stages import report as report_stage
from tests.stages.test_report import fake_evaluation


def test_the_ledger_of_a_task_with_its_comparison_run(project):
    fake_evaluation(project, [0, 1, 2])
    report_stage.main(["task=caption"])
    claims_stage.main([])
    rows = {r["id"]: r for r in read_json(project / "metrics" / "claims.json")["claims"]}
    # params.yaml `tasks` is [caption] here
    assert {r["task"] for r in rows.values()} == {"caption"}
    soft = rows["xu2015-soft"]  # show_attend_tell right on 8-9 of 10 canvases, show_tell on 1-2
    assert soft["effect"]["mean"] == 70.0 and soft["seeds"] == ["0", "1", "2"]
    assert soft["variance"] == "seeds and test items" and soft["effect"]["item_sd"] > 0
    # every seed's difference is 7 of 10
    assert soft["verdict"] == claims.HOLDS and soft["effect"]["sd"] == 0.0
    # localisation from the evaluate stage's per-canvas counts of hits and digits
    where = rows["xu2015-where"]
    assert where["variance"] == "seeds and test items" and where["effect"]["item_sd"] > 0
    # k = 8, 9, 8 canvases
    assert where["effect"]["mean"] == pytest.approx(100 * (18 + 19 + 18) / 90 - 50)
    # no localisation_sweep in the fakes
    assert rows["xu2015-where-sweep"]["verdict"] == claims.NOT_MEASURABLE
    assert rows["vinyals2015-once"]["verdict"] == claims.NOT_RUN  # no show_tell_once family
    page = (project / "reports" / "claims.md").read_text()
    assert (
        "## The rule" in page
        and "**xu2015-soft**" in page
        and "## The seeds that would decide" in page
    )
    # 2 families × 3 seeds of 10 s and 80 s, no study; the fakes' train.json name no CPU
    assert "| caption | exploratory | 6 | 0.1 | — | unknown |" in page
    assert (project / "reports" / "claims" / "forest.png").stat().st_size > 1000
    (comparison,) = mlflow.search_runs(
        experiment_names=["caption"], filter_string="tags.kind = 'comparison'", output_format="list"
    )
    assert comparison.data.tags["claims.xu2015-soft"] == soft["verdict"]
    assert comparison.data.metrics["claims/xu2015-soft/effect"] == 70.0


def test_an_ablation_is_measured_by_the_ledger_and_tabled_against_its_family(project):
    """show_tell_once (an entry of params.yaml caption.ablations): its fake outputs are show_tell's,
    so Δ is 0 on every seed; the claim that rests on it is measured (contradicted: no effect), and
    reports/ablations.md has its row."""
    import shutil

    import yaml

    fake_evaluation(project, [0, 1, 2])
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["caption"]["ablations"] = {
        "show_tell_once": {"of": "show_tell", "set": {"model": {"image_input": "first"}}}
    }
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    for kind in ("metrics", "predictions"):
        shutil.copy(
            project / kind / "caption" / "show_tell.json",
            project / kind / "caption" / "show_tell_once.json",
        )
    shutil.copytree(
        project / "results" / "caption" / "show_tell",
        project / "results" / "caption" / "show_tell_once",
    )
    report_stage.main(["task=caption"])
    claims_stage.main([])
    rows = {r["id"]: r for r in read_json(project / "metrics" / "claims.json")["claims"]}
    once = rows["vinyals2015-once"]
    assert once["effect"]["mean"] == 0.0 and once["p"] == 1.0
    # within its smallest effect
    assert once["verdict"] == claims.CONTRADICTED and once["p_equivalent_holm"] < 0.05
    table = (project / "reports" / "ablations.md").read_text()
    line = next(x for x in table.splitlines() if x.startswith("| `show_tell_once` | `show_tell` |"))
    assert "model.image_input: every_step → first" in line and "(+0.0 [+0.0, +0.0])" in line
