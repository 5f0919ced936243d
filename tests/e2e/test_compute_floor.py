"""benchmarks/compute_floor.py: FLOPs trained = step FLOPs × updates over every run, the floor at
the peak, the ratio of machine time to floor, the totals (fresh clone last) and the figures it says
are missing."""

from __future__ import annotations

import json

import pytest

from benchmarks import compute_floor as cf
from tests.conftest import ROOT

PEAK = {
    "gflops": 100.0,
    "n": 64,
    "repeats": 1,
    "threads": 2,
    "dtype": "float32",
    "median_gflops": 90.0,
    "load_before": 0.0,
}


def attempt(stage: str, log: str, seconds: float, finished: bool = True) -> dict:
    return {"stage": stage, "log": log, "seconds": seconds, "finished": finished}


def project() -> dict:
    """inputs() of a made-up project: translate `tr` (tuned in the logs), classify `cl` (two label
    fractions, its study not in the logs) and `pt` (pretrained, its pretraining step not
    measured)."""

    def runs(steps: float, **more) -> dict:
        return {
            "seeds": [0, 1, 2],
            "train/steps": steps,
            "train/params": 10.0,
            "trained_config": {"train.batch_size": 32},
            **more,
        }

    trials = [
        {"trial": 0, "state": "pruned", "updates": 500},
        {"trial": 1, "state": "complete", "updates": 900},
    ]
    return {
        "family_task": {"tr": "translate", "cl": "classify", "pt": "classify"},
        "pretrained": {"pt"},
        "attempts": [
            attempt("prepare_translate", "a.log", 10),
            attempt("tune_translate@tr", "a.log", 190),
            attempt("train_translate@tr", "a.log", 60, finished=False),
            attempt("train_translate@tr", "b.log", 90),
            attempt("train_classify@cl", "b.log", 30),
            attempt("evaluate_classify@cl", "b.log", 30),
            attempt("pretrain@pt", "b.log", 30),
        ],
        "logs": {"a.log": 130.0, "b.log": 180.0},
        "logs_cpu": "cpu X",
        "bench_cpu": "cpu X",
        "bench": {
            "peak_gflops": 50.0,
            "rows": [
                {"family": f, "params": 10, "batch_size": 32, "mflop_per_step": m}
                for f, m in (("tr", 2000.0), ("cl", 500.0), ("pt", 300.0))
            ],
        },
        "metrics": {
            "tr": runs(1000.0),
            "cl": runs(100.0, label_fractions={"0.1": runs(50.0)}),
            "pt": runs(10.0, pretrain={"steps": 400}),
        },
        "tuned": {
            "tr": {"study": {"best_trial": 1}, "trials": trials},
            "cl": {"trials": trials[:1]},
            "pt": {"study": {"trials": 0}},
        },
    }


def row(rows: list[dict], family: str, kind: str) -> dict:
    return next(r for r in rows if (r["family"], r["kind"]) == (family, kind))


def test_flops_floor_and_machine_time_per_family_and_stage():
    rows = cf.floor_rows(project(), peak_gflops=100.0)
    # seed 0 came from the study's best trial (900 updates): 3 × 1000 − 900
    train = row(rows, "tr", "train")
    assert (train["runs"], train["updates"], train["reused_seed0"]) == (2, 2100.0, 900.0)
    assert train["flops"] == pytest.approx(2e9 * 2100) and train["floor_s"] == pytest.approx(42.0)
    # a.log: 130 s of wall over 260 stage seconds -> half each; b.log: 180 over 180 -> whole
    assert (train["stage_s"], train["stopped_s"], train["machine_s"]) == (150.0, 60.0, 30.0 + 90.0)
    assert (
        row(rows, "tr", "tune")["updates"] == 1400.0
        and row(rows, "tr", "tune")["machine_s"] == 95.0
    )
    # three seeds of the full run and of the 10% run, its study not in the logs
    cl = row(rows, "cl", "train")
    assert (cl["runs"], cl["updates"], cl["floor_s"]) == (
        6,
        450.0,
        pytest.approx(0.5e9 * 450 / 100e9),
    )
    assert row(rows, "cl", "tune")["stage_s"] is None and not row(rows, "cl", "tune")["fresh"]
    pt = row(rows, "pt", "pretrain")
    assert (pt["runs"], pt["updates"], pt["floor_s"]) == (1, 400.0, None) and "missing" in pt[
        "note"
    ]
    # tuned: 0 trials, its tune_finetuned stage not logged
    assert row(rows, "pt", "tune")["note"] == "no runs"
    assert (
        row(rows, "cl", "evaluate")["note"] == "not training"
        and row(rows, "cl", "evaluate")["floor_s"] is None
    )
    assert [r["kind"] for r in rows if r["family"] == "tr"] == ["tune", "train"]


def test_totals_fresh_clone_last_and_what_is_missing():
    rows = cf.floor_rows(project(), peak_gflops=100.0)
    *tasks, full, fresh = cf.totals(rows)
    assert [t["label"] for t in tasks] == ["translate", "classify"]
    assert (full["label"], fresh["label"]) == ("full re-run with tuning", "fresh clone")
    tune_floor = 2e9 * 1400 / 100e9 + 0.5e9 * 500 / 100e9
    # a fresh clone runs no tune_<task>
    assert full["floor_s"] == pytest.approx(fresh["floor_s"] + tune_floor)
    assert fresh["machine_s"] == pytest.approx(full["machine_s"] - 95.0)
    assert fresh["ratio"] == pytest.approx(fresh["machine_s"] / fresh["floor_s"])
    assert full["no_floor"] == ["pretrain@pt"] and full["not_logged"] == [
        "tune@cl",
        "tune@pt",
        "train@pt",
    ]
    assert cf.fresh_seed0(rows) == {
        "families": ["tr"],
        "updates": 900.0,
        "flops": pytest.approx(2e9 * 900),
    }


def test_logs_of_a_fresh_clone_count_no_study_and_no_stage_dvc_skipped():
    """Logs that ran no tune_<task> stage: no full re-run total; a stage only skipped (its outputs
    current, as tune_finetuned after a pretraining that reproduced its output) adds no floor; seed 0
    is trained, not reused."""
    inp = project()
    inp["attempts"] = [a for a in inp["attempts"] if not a["stage"].startswith("tune_")]
    inp["skipped"] = cf.skipped_only(
        {"a.log": ["tune_translate@tr", "train_classify@cl"], "b.log": []},
        [*inp["attempts"], attempt("tune_classify@cl", "b.log", 5)],
    )
    assert inp["skipped"] == ["tune_translate@tr"]  # train_classify@cl ran in b.log
    rows = cf.floor_rows(inp, peak_gflops=100.0)
    tune = row(rows, "tr", "tune")
    assert (tune["runs"], tune["floor_s"], tune["note"]) == (
        0,
        0.0,
        "skipped: DVC found its outputs current",
    )
    train = row(rows, "tr", "train")
    assert (train["runs"], train["updates"], train["reused_seed0"]) == (3, 3000.0, 0.0)
    *tasks, fresh = cf.totals(rows)
    assert [t["label"] for t in tasks] == ["translate", "classify"] and fresh[
        "label"
    ] == "fresh clone"
    assert fresh["floor_s"] == pytest.approx(
        sum(t["floor_s"] for t in tasks) - row(rows, "cl", "tune")["floor_s"]
    )
    # skipped is not missing
    assert "tune@tr" not in fresh["not_logged"] and "tune@cl" in tasks[1]["not_logged"]


def test_a_stage_measured_under_its_floor_says_its_time_is_short():
    """Machine time under the floor cannot be: part of the work ran outside the logs (a piece
    without timestamps)."""
    inp = project()
    inp["attempts"] = [
        a if a["stage"] != "train_classify@cl" else attempt("train_classify@cl", "b.log", 0.001)
        for a in inp["attempts"]
    ]
    # 3 × 10⁶ updates of 0.5 GFLOP: a floor of hours, logged in ms
    inp["metrics"]["cl"]["train/steps"] = 1e6
    cl = row(cf.floor_rows(inp, peak_gflops=100.0), "cl", "train")
    assert cl["machine_s"] < cl["floor_s"] and cl["note"].startswith("under its floor")
    assert row(cf.floor_rows(project(), peak_gflops=100.0), "tr", "train")["note"] == ""


def test_side_by_side_logs_share_one_wall_time():
    attempts, logs = project()["attempts"], {"a.log": 130.0, "b.log": 180.0}
    shares = cf.machine_shares(attempts, logs, [["a.log", "b.log"]])
    assert shares == {"a.log": 180.0 / 440.0, "b.log": 180.0 / 440.0}
    with pytest.raises(cf.ArtifactError, match="c.log"):
        cf.machine_shares(attempts, logs, [["a.log", "c.log"]])


def test_stage_kinds_and_what_a_fresh_clone_runs():
    assert cf.kind_of("finetune_classify@bert") == ("train", True)
    assert cf.kind_of("tune_finetuned@bert") == ("tune", True)
    assert cf.kind_of("tune_caption@show_tell") == ("tune", False)
    assert cf.kind_of("report_index") == ("shared", True)


def test_step_flops_missing_or_measured_on_another_model():
    bench = {"rows": [{"family": "a", "params": 10, "batch_size": 32, "mflop_per_step": 1500.0}]}
    metrics = {"a": {"train/params": 10.0, "trained_config": {"train.batch_size": 16}}, "b": {}}
    steps = cf.step_gflop(bench, metrics)
    assert "batch 32" in steps["a"] and steps["b"] == "not in reports/benchmarks.json §4"
    metrics["a"]["trained_config"]["train.batch_size"] = 32
    assert cf.step_gflop(bench, metrics)["a"] == 1.5


def test_peak_is_the_best_measurement_of_the_logs_cpu():
    inp = project()
    # this run beat §4's 50 on the same CPU
    assert cf.floor_peak(inp, PEAK, "cpu X")["gflops"] == 100.0
    used = cf.floor_peak(inp, PEAK, "cpu Y")
    assert (used["gflops"], used["source"]) == (50.0, "reports/benchmarks.json §4")
    inp["bench_cpu"] = "cpu Z"
    assert "another CPU" in cf.floor_peak(inp, PEAK, "cpu Y")["source"]


def test_an_artifact_missing_or_malformed_is_named(tmp_path):
    (tmp_path / "m.json").write_text('{"results": {}}')
    with pytest.raises(cf.ArtifactError, match=r"m\.json: no field results\.flops"):
        cf.read(tmp_path / "m.json", "results", "flops")
    with pytest.raises(cf.ArtifactError, match=r"gone\.yaml: not found"):
        cf.read(tmp_path / "gone.yaml")


def test_pipeline_cost_writes_the_section_and_keeps_the_side_by_side_logs(tmp_path, monkeypatch):
    """On the committed metrics, tuned/ and benchmarks.json: pipeline_cost.py rewrites cost.md with
    the section."""
    from benchmarks import pipeline_cost

    monkeypatch.setattr(cf, "matmul_peak", lambda: PEAK)
    logs = []
    for name, stage in (
        ("x.log", "train_caption@show_tell"),
        ("y.log", "train_caption@show_attend_tell"),
    ):
        logs.append(tmp_path / name)
        logs[-1].write_text(
            f"10:00:00 [c] Running stage '{stage}':\n10:10:00 [c] Updating lock file\n"
        )
    out = tmp_path / "cost"
    assert pipeline_cost.main([*map(str, logs), "--out", str(out)]) == 0
    cf.refresh(out, ROOT, [["x.log", "y.log"]], PEAK)
    # a later piece: the groups named before stay
    pipeline_cost.main([str(logs[0]), "--out", str(out)])
    floor = json.loads(out.with_suffix(".json").read_text())["compute_floor"]
    assert (
        floor["side_by_side"] == [["x.log", "y.log"]] and floor["totals"][-1]["machine_s"] == 600.0
    )
    text = out.with_suffix(".md").read_text()
    assert (
        text.startswith("# What the pipeline cost")
        and text.count("## Against the compute floor") == 1
    )
    assert "| caption | show_tell | train |" in text and text.rstrip().endswith(
        "<!-- compute_floor:end -->"
    )


def test_logs_that_overlap_in_time_share_the_union_of_their_spans():
    """a.log ran 0-130 s, b.log 100-280 s (their union: 280 s of machine time), c.log later
    alone."""
    attempts = [*project()["attempts"], attempt("train_classify@cl", "c.log", 50)]
    logs = {"a.log": 130.0, "b.log": 180.0, "c.log": 60.0}
    spans = {"a.log": [0.0, 130.0], "b.log": [100.0, 280.0], "c.log": [1000.0, 1060.0]}
    shares = cf.machine_shares(attempts, logs, [], spans)
    assert shares == {"a.log": 280.0 / 440.0, "b.log": 280.0 / 440.0, "c.log": 60.0 / 50.0}
    assert cf.overlapping_logs({"side_by_side": [], "logs": logs, "spans": spans}) == [
        ["a.log", "b.log"]
    ]
    # named: longest
    assert cf.machine_shares(attempts, logs, [["a.log", "b.log"]], spans)["a.log"] == 180.0 / 440.0
