"""repro.py: how `attention-lab repro` splits the pipeline into the shared head, the families'
chains and the rest, and how it runs them with real DVC on a small project of its own (it runs the
real pipeline in tests/e2e/test_pipeline.py).
"""

import subprocess
import sys
from pathlib import Path

import pytest

from attention_lab.pipeline.repro import dvc, pipeline_plan, plan, repro, studies_first
from tests.conftest import ROOT


def test_plan_puts_each_family_s_stages_in_its_chain_in_order():
    order = [
        "prepare_t",
        "tokenize_t",
        "pretrain@b",
        "tune_t@a",
        "tune_t@b",
        "train_t@a",
        "train_t@b",
        "report_t",
        "report_index",
    ]
    upstream = {
        "prepare_t": set(),
        "tokenize_t": {"prepare_t"},
        "pretrain@b": {"prepare_t"},
        "tune_t@a": {"prepare_t", "tokenize_t"},
        "tune_t@b": {"prepare_t", "pretrain@b"},
        "train_t@a": {"prepare_t", "tokenize_t", "tune_t@a"},
        "train_t@b": {"prepare_t", "pretrain@b", "tune_t@b"},
        "report_t": set(order[:7]),
        "report_index": set(order[:8]),
    }
    got = plan(order, upstream, ["a", "b", "c"])
    assert got.chains == {
        "a": ["tune_t@a", "train_t@a"],
        "b": ["pretrain@b", "tune_t@b", "train_t@b"],
    }
    assert got.head == ["prepare_t", "tokenize_t"] and got.tail == ["report_t", "report_index"]


def test_an_ablation_s_stages_run_in_its_family_s_chain_after_its_study():
    order = [
        "prepare_t",
        "tune_t@a",
        "train_t@a",
        "train_ablation_t@a_off",
        "evaluate_ablation_t@a_off",
        "report_t",
    ]
    upstream = {
        "prepare_t": set(),
        "tune_t@a": {"prepare_t"},
        "train_t@a": {"prepare_t", "tune_t@a"},
        "train_ablation_t@a_off": {"prepare_t", "tune_t@a"},
        "evaluate_ablation_t@a_off": {"prepare_t", "tune_t@a", "train_ablation_t@a_off"},
        "report_t": set(order[:5]),
    }
    got = plan(order, upstream, ["a"], of={"a_off": "a"})
    assert got.chains == {"a": order[1:5]} and studies_first(got.chains["a"])[0] == ["tune_t@a"]
    assert got.head == ["prepare_t"] and got.tail == ["report_t"]


def test_the_project_s_plan_covers_every_stage_once():
    import yaml

    got = pipeline_plan(ROOT)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    families = [
        f for t in params["tasks"] for f in params[t]["families"] + params[t].get("pretrained", [])
    ]
    assert list(got.chains) == families
    ablations = {
        name: entry["of"]
        for t in params["tasks"]
        for key in ("ablations", "corpus_ablations")
        for name, entry in (params[t].get(key) or {}).items()
    }
    # the family's stages to its export, and those of its ablations
    for family, stages in got.chains.items():
        own = [s for s in stages if s.rpartition("@")[2] == family]
        assert own[-1].startswith("export") and all(
            ablations[s.rpartition("@")[2]] == family for s in stages if s not in own
        )
    every = got.head + [s for stages in got.chains.values() for s in stages] + got.tail
    assert len(every) == len(set(every)) and set(got.tail) == {
        "report_index",
        "report_claims",
        *(f"report_{t}" for t in params["tasks"]),
    }
    assert [s.partition("@")[0] for s in got.chains["bert"]] == [
        "pretrain",
        "tune_finetuned",
        "finetune_classify",
        "evaluate_finetuned",
        "export_finetuned",
    ]


def test_a_task_s_plan_holds_its_chains_and_the_reports_that_read_them():
    got = pipeline_plan(ROOT, ["caption"])
    assert list(got.chains) == ["show_tell", "show_attend_tell"]
    # the corpus an ablation trains on (params.yaml caption.corpora) is prepared with the task's
    # data, before the chains
    assert got.head == [
        "prepare_caption",
        "prepare_corpus_caption@frozen_cnn",
        "tokenize_caption",
        "tokenize_corpus_caption@frozen_cnn",
    ]
    assert got.tail == ["report_caption", "report_claims", "report_index"]


def project(root: Path, pipeline: str) -> None:
    """A DVC project of one task with families a and b, and the given dvc.yaml."""
    (root / "params.yaml").write_text("tasks: [caption]\ncaption: {families: [a, b]}\n")
    (root / "dvc.yaml").write_text(pipeline)
    subprocess.run([dvc()[0], "init", "--no-scm", "-q"], cwd=root, check=True)


DVC_YAML = """stages:
  shared:
    cmd: python -c "import sys; open('shared.txt', 'w').write(sys.executable)"
    outs: [shared.txt]
  first:
    foreach: [a, b]
    do:
      cmd: python -c "import os, sys;
        '${item}' == os.environ.get('BROKEN') and sys.exit('${item} is broken');
        open('first_${item}.txt', 'w').write(os.environ['OMP_NUM_THREADS'])"
      deps:
        - shared.txt
      outs:
        - first_${item}.txt
  second:
    foreach: [a, b]
    do:
      cmd: python -c "open('second_${item}.txt', 'w').write('y')"
      deps:
        - first_${item}.txt
      outs:
        - second_${item}.txt
  report:
    cmd: python -c "open('report.txt', 'w').write('z')"
    deps: [second_a.txt, second_b.txt]
    outs: [report.txt]
"""


@pytest.mark.slow  # runs stages through DVC: `make test-fast` leaves it out
def test_a_failed_stage_stops_its_chain_only_and_a_rerun_continues(tmp_path, monkeypatch):
    """Two chains side by side under real DVC: b's first stage fails, a's chain still finishes
    (recorded in dvc.lock), the report waits, and the command names the stage; run again once b is
    fixed, only what is left runs. The stages' `python` is the one attention-lab runs on, though
    PATH (an unactivated venv) names another or none."""
    project(tmp_path, DVC_YAML)
    monkeypatch.setenv("BROKEN", "b")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    said: list[str] = []
    assert repro(tmp_path, jobs=2, say=said.append) == 1
    log = "\n".join(said)
    assert "first@b failed" in log and "b is broken" in log and "1 failed (first@b)" in log
    assert (tmp_path / "second_a.txt").is_file() and not (tmp_path / "report.txt").exists()
    assert (tmp_path / "first_a.txt").read_text() == "1", "every stage runs on one thread"
    assert "second@a" in (tmp_path / "dvc.lock").read_text()
    assert Path((tmp_path / "shared.txt").read_text()).parent == Path(sys.executable).parent

    monkeypatch.delenv("BROKEN")
    said.clear()
    assert repro(tmp_path, jobs=2, say=said.append) == 0
    ran = {line.split("] ")[0].split("[")[-1] for line in said if "Running stage" in line}
    assert ran == {"first@b", "second@b", "rest"}, said
    assert (
        tmp_path / "report.txt"
    ).is_file() and "the pipeline is done (2 chains, --jobs 2)" in said[-1]


STUDY_YAML = """stages:
  tune:
    foreach: {a: 0, b: 3}
    do:
      cmd: python -c "import time;
        open('tune_${key}.txt', 'w').write(str(time.time())); time.sleep(${item});
        open('tune_${key}.txt', 'a').write(' ' + str(time.time()))"
      outs:
        - tune_${key}.txt
  train:
    foreach: [a, b]
    do:
      cmd: python -c "import time; open('train_${item}.txt', 'w').write(str(time.time()))"
      deps:
        - tune_${item}.txt
      outs:
        - train_${item}.txt
"""


@pytest.mark.slow  # runs stages through DVC: `make test-fast` leaves it out
def test_studies_come_first_and_training_waits_while_they_could_fill_the_slots(tmp_path):
    """One slot, two chains: a's study ends at once, b's takes 3 s; a's training starts only after
    b's study ends."""
    project(tmp_path, STUDY_YAML)
    assert studies_first(["pretrain@b", "tune_finetuned@b", "finetune@b", "export@b"]) == (
        ["pretrain@b", "tune_finetuned@b"],
        ["finetune@b", "export@b"],
    )
    assert studies_first(["train@c", "export@c"]) == ([], ["train@c", "export@c"])
    said: list[str] = []
    assert repro(tmp_path, jobs=2, slots=1, say=said.append) == 0, said
    b_ended = float((tmp_path / "tune_b.txt").read_text().split()[1])
    a_ended = float((tmp_path / "tune_a.txt").read_text().split()[1])
    assert a_ended < b_ended <= float((tmp_path / "train_a.txt").read_text())
