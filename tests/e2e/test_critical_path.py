"""benchmarks/critical_path.py: the critical path and the wall time on N single-core nodes, by hand
on a small graph and on the committed run, whose block in docs/scaling.md must be what the committed
files give."""

from __future__ import annotations

import json

import pytest

from benchmarks import critical_path as cp
from benchmarks.compute_floor import FULL
from tests.conftest import ROOT

# A -> B (three runs of 4 s) and A -> C (one of 10 s), both -> D: the chain A, C, D is 2 + 10 + 1 =
# 13 s of 25 s in all
RUNS = {"A": [2.0], "B": [4.0, 4.0, 4.0], "C": [10.0], "D": [1.0]}
DEPS = {"A": set(), "B": {"A"}, "C": {"A"}, "D": {"B", "C"}}


@pytest.fixture(scope="module")
def real() -> dict:
    return cp.compute(ROOT)


def test_critical_path_and_schedule_of_a_small_graph():
    assert cp.critical_path(RUNS, DEPS) == (13.0, ["A", "C", "D"])
    assert cp.tails(RUNS, DEPS) == {"A": 11.0, "B": 1.0, "C": 1.0, "D": 0.0}
    # 2 nodes: C (10 s left) before the Bs (5 s left) at t=2, so C ends at 12, the Bs at 6, 10, 14,
    # D at 15 (the Bs first would end C at 16 and D at 17)
    assert [cp.schedule(RUNS, DEPS, n) for n in (1, 2, 3, 4, 64)] == [25.0, 15.0, 13.0, 13.0, 13.0]


def test_a_stage_waits_for_every_stage_it_depends_on():
    runs, deps = {"A": [5.0], "B": [1.0], "C": [1.0]}, {"A": set(), "B": set(), "C": {"A", "B"}}
    assert cp.schedule(runs, deps, 3) == 6.0 and cp.critical_path(runs, deps) == (6.0, ["A", "C"])
    # a stage of no time
    assert cp.schedule({"A": [0.0], "B": [3.0]}, {"A": set(), "B": {"A"}}, 1) == 3.0


def test_the_committed_block_is_what_the_committed_files_give(real):
    assert cp.written(ROOT / "docs" / "scaling.md") == cp.block(cp.markdown(real)), (
        "docs/scaling.md: run `python benchmarks/critical_path.py --write`"
    )


def test_wall_times_of_the_committed_run_are_bounded_and_fall_with_the_nodes(real):
    walls = [real["total_s"], *real["walls"].values(), real["critical_s"]]
    for n, wall in real["walls"].items():
        assert wall >= max(real["critical_s"], real["total_s"] / n) - 1e-6
    assert walls == sorted(walls, reverse=True)
    assert real["total_s"] == pytest.approx(real["cores"] * real["measured_s"])
    assert real["critical_s"] == pytest.approx(sum(s for _, s in real["chain"]))


def test_stage_times_add_up_to_compute_floors_rows(real):
    """Per row of compute_floor (task, family, kind), the stages' core seconds are its machine
    seconds × cores and its runs; the whole is the full re-run's machine time."""
    cf = json.loads((ROOT / "reports" / "cost.json").read_text())["compute_floor"]
    for row in cf["rows"]:
        stages = [
            s for s, k in real["key"].items() if k == (row["task"], row["family"], row["kind"])
        ]
        seconds = sum(sum(real["runs"][s]) for s in stages)
        assert seconds == pytest.approx(real["cores"] * (row["machine_s"] or 0.0)), row
        if row["kind"] == "train" and row["runs"]:
            assert [len(real["runs"][s]) for s in stages] == [row["runs"]]
    assert real["measured_s"] == pytest.approx(
        next(t for t in cf["totals"] if t["label"] == FULL)["machine_s"]
    )


def test_write_appends_the_section_then_replaces_the_block(tmp_path):
    md = tmp_path / "scaling.md"
    md.write_text("# Scale out\n\ntext\n", encoding="utf-8")
    cp.write(md, ["one"])
    assert md.read_text() == f"# Scale out\n\ntext\n\n{cp.HEADING}\n\n{cp.START}\none\n{cp.END}\n"
    cp.write(md, ["two", "lines"])
    assert (
        md.read_text().count(cp.HEADING) == 1
        and cp.written(md) == f"{cp.START}\ntwo\nlines\n{cp.END}"
    )


def test_older_logs_name_a_tasks_stage_with_an_at():
    assert [
        cp.dvc_name(s, ("translate",))
        for s in ("prepare@translate", "tune_translate@bahdanau", "report_index")
    ] == ["prepare_translate", "tune_translate@bahdanau", "report_index"]
