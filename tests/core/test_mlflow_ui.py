"""The MLflow UI as a user first sees it: experiments are model training (not GenAI) and carry a
saved runs view with the headline metrics as columns, best first; checked in a real headless
Chromium against a real `mlflow server`."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote

import mlflow
import pytest
from omegaconf import OmegaConf

from attention_lab.core import tracking
from attention_lab.core.task import get_task
from tests.core.test_tracking import serve

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out

# BLEU, chrF
SCORES = {"seq2seq_gru": (10.9, 32.9), "bahdanau": (86.3, 91.2), "luong_dot": (68.9, 80.3)}


def task_cfg(root: Path, task: str = "translate", **more):
    """The few config keys the tracking code reads, for a local store at root/mlflow.db."""
    return OmegaConf.create(
        {
            "root": str(root),
            "tracking": {"uri": f"sqlite:///{root / 'mlflow.db'}"},
            "task": {"name": task},
            **more,
        }
    )


def view_state(tags: dict) -> dict:
    return json.loads(json.loads(tags[tracking.VIEW_TAG])["state"])


def test_a_new_experiment_opens_as_model_training_on_its_headline_metrics(tmp_path):
    exp = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_experiment(
        tracking.experiment_id(task_cfg(tmp_path, "classify"))
    )
    assert exp.name == "classify" and exp.tags[tracking.KIND_TAG] == "custom_model_development"
    state = view_state(exp.tags)
    assert state["selectedColumns"] == [
        "tags.`family`",
        "tags.`seed`",
        "metrics.`test/accuracy`",
        "metrics.`test/macro_f1`",
    ]
    assert (state["orderByKey"], state["orderByAsc"], state["searchFilter"]) == (
        "metrics.`test/accuracy`",
        False,
        "tags.stage = 'train'",
    )


def test_an_older_experiment_gets_the_tags_when_a_stage_next_opens_it(tmp_path):
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    old = client.create_experiment("translate")  # as the pipeline made it before: no tags
    other = client.create_experiment(
        "caption", tags={tracking.KIND_TAG: "finetuning", tracking.VIEW_TAG: "{}"}
    )
    assert tracking.experiment_id(task_cfg(tmp_path)) == old
    assert tracking.experiment_id(task_cfg(tmp_path, "caption")) == other
    tags = client.get_experiment(old).tags
    assert tags[tracking.KIND_TAG] == "custom_model_development"
    assert view_state(tags)["orderByKey"] == "metrics.`test/bleu`"
    tags = client.get_experiment(other).tags
    # a kind someone chose stays; a stale view of ours is replaced
    assert tags[tracking.KIND_TAG] == "finetuning"
    assert view_state(tags)["orderByKey"] == "metrics.`test/accuracy`"


def tiny_store(root: Path, scores: dict[str, tuple[float, float]]) -> tuple[str, list[str]]:
    """A translate experiment as the pipeline leaves it: a `comparison` run and one training run per
    family nested under it, with test BLEU and chrF; its id and the family runs' ids."""
    exp = tracking.experiment_id(task_cfg(root))
    comparison = {"kind": "comparison", "task": "translate"}
    with mlflow.start_run(experiment_id=exp, run_name="comparison", tags=comparison) as parent:
        mlflow.log_metrics({f"{f}/test_bleu_mean": bleu for f, (bleu, _) in scores.items()})
    runs = []
    for family, (bleu, chrf) in scores.items():
        cfg = task_cfg(
            root, family=family, seed=0, profile="tiny", train={}, paths={"prepared": "prepared"}
        )
        tags = {
            **tracking.run_tags(cfg, get_task(cfg.task.name)),
            "mlflow.parentRunId": parent.info.run_id,
        }
        with mlflow.start_run(
            experiment_id=exp, run_name=tracking.run_name(cfg, get_task(cfg.task.name)), tags=tags
        ) as run:
            mlflow.log_metrics({"test/bleu": bleu, "test/chrf": chrf})
        runs.append(run.info.run_id)
    return exp, runs


def compare_link(experiment: str, runs: list[str]) -> str:
    """The compare view of `runs` (what the runs table's Compare button opens)."""
    ids = json.dumps(runs, separators=(",", ":"))
    return f'#/compare-runs?runs={ids}&experiments=["{experiment}"]&workflowType=machine_learning'


def visible(browser, text: str):
    from selenium.webdriver.common.by import By

    return [
        e
        for e in browser.find_elements(By.XPATH, f"//*[normalize-space(text())='{text}']")
        if e.is_displayed()
    ]


def open_page(browser, url: str, ready: str) -> None:
    """Open `url` and wait until an element with text `ready` is shown."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(url)
    WebDriverWait(browser, 60).until(lambda d: visible(d, ready))


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return (tmp_path, *tiny_store(tmp_path, SCORES))


def test_the_headline_view_and_the_compare_view_in_a_browser(store, browser, tmp_path):
    """The README's link opens the runs table (not GenAI's traces), training runs only, best BLEU
    first, BLEU and chrF shown as columns; ticking the runs and pressing Compare, or compare_link,
    opens their compare view."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    root, experiment, runs = store
    with serve(tmp_path / "server", root / "mlflow.db") as server:
        base = server.ready()
        browser.set_window_size(1400, 900)
        open_page(browser, f"{base}/{tracking.ui_link(experiment)}", "bahdanau-seed0")
        assert (
            "/runs?" in browser.current_url
            and visible(browser, "Runs")
            and visible(browser, "Model training")
        )
        assert not visible(browser, "Detect Issues") and not visible(browser, "Overview")
        # the saved view; families only
        assert visible(browser, "headline") and not visible(browser, "comparison")
        assert (
            visible(browser, "test/bleu")
            and visible(browser, "test/chrf")
            and visible(browser, "Sort: test/bleu")
        )
        order = sorted(SCORES, key=lambda f: -SCORES[f][0])
        rows = [visible(browser, f"{f}-seed0")[0].location["y"] for f in order]
        assert rows == sorted(rows)  # best BLEU first
        for bleu, chrf in SCORES.values():
            assert visible(browser, f"{bleu:g}") and visible(browser, f"{chrf:g}")
        browser.save_screenshot(str(tmp_path / "mlflow-runs.png"))

        # tick every run, then Compare
        for box in browser.find_elements(By.CSS_SELECTOR, "input.ag-checkbox-input"):
            if "row selection" in (box.get_attribute("aria-label") or ""):
                # the grid draws its own box over the input
                browser.execute_script("arguments[0].click();", box)
        visible(browser, "Compare")[0].click()
        WebDriverWait(browser, 60).until(lambda d: visible(d, "Comparing 3 Runs from 1 Experiment"))
        assert "/compare-runs?" in browser.current_url and all(
            r in unquote(browser.current_url) for r in runs
        )
        open_page(
            browser,
            base + "/" + compare_link(experiment, runs),
            "Comparing 3 Runs from 1 Experiment",
        )
        assert visible(browser, "test/bleu") and visible(browser, "bahdanau-seed0")
        shot = tmp_path / "mlflow-compare.png"
        assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 1000
