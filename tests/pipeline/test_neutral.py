"""`attention-lab neutral` on a one-family project: it refuses a change to a formula, and a change
that cannot alter a figure it proves and records in dvc.lock, so that `dvc repro` re-runs nothing
and the study keeps its name."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attention_lab.pipeline.scratch import copy_project, environ
from tests.conftest import ROOT

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
ATTENTION = Path("src/attention_lab/nn/attention.py")
# Bahdanau et al. 2015, eq. 6
FORMULA = "hidden = torch.tanh(self.W(query).unsqueeze(1) + projected_keys)"


def sh(args: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = environ(
        cwd,
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@t",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@t",
        OMP_NUM_THREADS="1",
    )
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if check and proc.returncode:
        pytest.fail(
            f"{' '.join(args)} failed"
            f" ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def bahdanau_only(params: dict) -> None:
    """One family and nothing else: no ablation of it either (each would train its own runs)."""
    params.update(tasks=["translate"])
    params["translate"].update(
        families=["bahdanau"], ablations={}, corpus_ablations={}, corpora={}, replication={}
    )


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """A git checkout of the project with one family on the tiny profile, its pipeline run and
    committed."""
    dest = copy_project(
        tmp_path_factory.mktemp("neutral") / "lab", profile="tiny", seeds=[0], edit=bahdanau_only
    )
    for args in (
        ["git", "init", "-q"],
        ["dvc", "init", "-q"],
        ["dvc", "config", "core.analytics", "false"],
        ["attention-lab", "stages"],
        ["dvc", "repro"],
        ["git", "add", "-A"],
        ["git", "commit", "-qm", "base"],
    ):
        sh(args, dest)
    return dest


def test_a_changed_formula_is_refused_and_nothing_is_recorded(lab):
    source = lab / ATTENTION
    text = source.read_text()
    source.write_text(text.replace(FORMULA, FORMULA.replace("torch.tanh", "torch.sigmoid")))
    try:
        proc = sh(["attention-lab", "neutral", "--base", "HEAD"], lab, check=False)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "NOT result-neutral" in proc.stdout
        assert "output models/bahdanau/checkpoints/seed0/best.ckpt: differs" in proc.stdout
        assert "output metrics/translate/bahdanau.json: differs" in proc.stdout
        assert sh(["git", "status", "--porcelain"], lab).stdout.split() == [
            "M",
            ATTENTION.as_posix(),
        ]
    finally:
        source.write_text(text)


CODE = (
    "from omegaconf import OmegaConf; from attention_lab.core import tracking; cfg ="
    " OmegaConf.create({'root': '.', 'task': {'name': 'translate'}, 'family': 'bahdanau'});"
    " print(tracking.code_hash(cfg), tracking.raw_code_hash(cfg))"
)


def test_a_neutral_change_is_proved_and_recorded_so_nothing_re_runs(lab):
    # the code hash the study and runs are named by
    named, raw = sh([sys.executable, "-c", CODE], lab).stdout.split()
    source = lab / ATTENTION
    source.write_text(
        source.read_text().replace(FORMULA, f"{FORMULA}  # the alignment model a(s_{{i-1}}, h_j)")
    )
    page = lab / "src/attention_lab/translate/report.py"  # read by report_translate alone
    page.write_text(page.read_text() + "\n# the page of the translate task\n")
    # the edit stales the stages importing it
    assert "train_translate@bahdanau" in sh(["dvc", "status"], lab).stdout

    proc = sh(["attention-lab", "neutral", "--base", "HEAD"], lab)
    assert "result-neutral: every state dict" in proc.stdout, proc.stdout
    # best.ckpt and last.ckpt of each seed's run and of the trial
    assert "compared: 6 checkpoints" in proc.stdout
    # progress
    assert re.search(r"^  tree, +\d+\.\d min: train_translate@bahdanau$", proc.stdout, re.MULTILINE)
    assert "recorded in dvc.lock" in proc.stdout
    # the proof compares no report: a report whose code changed re-runs for real, the others do not
    assert "Running stage 'report_translate'" in proc.stdout + proc.stderr
    assert "Running stage 'report_index'" not in proc.stdout + proc.stderr

    assert "Data and pipelines are up to date" in sh(["dvc", "status"], lab).stdout
    assert "Running stage" not in sh(["dvc", "repro"], lab).stdout  # nothing re-runs
    now, now_raw = sh([sys.executable, "-c", CODE], lab).stdout.split()
    # a re-run tune stage resumes its study; kept runs stay reusable
    assert now_raw != raw and now == named


def test_a_key_the_change_adds_is_left_out_of_the_config_comparison_and_said():
    """--new-key: a config key in every config of the tree and none of the base is not compared, and
    the proof says what it is set to; a key the base has as well is compared like any other."""
    from attention_lab.pipeline.neutral import added, differences

    base = {"t/f": "tune:\n  trials: 4\n"}
    tree = {"t/f": "pool:\n  gpu_share: 0.25\ntune:\n  in_flight: 1\n  trials: 4\n"}
    left, right, said, new = added(base, tree, ["tune.in_flight", "pool", "tune.trials"])
    assert differences(left, right, "config") == []
    assert new == ["tune.in_flight", "pool"] and said == [
        "tune.in_flight: new, set to 1 (not compared)",
        'pool: new, set to {"gpu_share": 0.25} (not compared)',
        "tune.trials: both sides have it (compared)",
    ]
    changed = {"t/f": "tune:\n  in_flight: 1\n  trials: 5\n"}
    assert differences(*added(base, changed, ["tune.in_flight"])[:2], "config") == [
        "config t/f: differs"
    ]


def test_a_renamed_key_is_named_twice_the_key_dropped_and_the_key_added():
    from attention_lab.pipeline.neutral import added, differences

    base = {"caption/f": "evaluate:\n  beam: 3\n  max_len: 10\n"}
    tree = {"caption/f": "evaluate:\n  beam: 3\n  max_len_ratio: 1.5\n"}
    assert differences(base, tree, "config") == ["config caption/f: differs"]
    left, right, said, keys = added(
        base, tree, ["evaluate.max_len", "evaluate.max_len_ratio", "evaluate.top_k"]
    )
    assert differences(left, right, "config") == [] and keys == [
        "evaluate.max_len",
        "evaluate.max_len_ratio",
    ]
    assert said == [
        "evaluate.max_len: dropped, was 10 (not compared)",
        "evaluate.max_len_ratio: new, set to 1.5 (not compared)",
        "evaluate.top_k: neither side has it",
    ]


def test_the_proof_trains_the_families_whose_stages_the_change_stales():
    """affected(): a family's stages give that family (an ablation's, its family), a task-wide stage
    every family of its task, a stage of no one task (none today) every family."""
    from attention_lab.pipeline.neutral import affected

    params = {
        "tasks": ["translate", "caption"],
        "translate": {
            "families": ["bahdanau", "luong_dot"],
            "ablations": {"dot_torch_init": {"of": "luong_dot"}},
        },
        "caption": {"families": ["show_tell", "show_attend_tell"]},
    }
    assert affected(params, []) == []
    assert affected(params, ["train_caption@show_tell", "export_caption@show_tell"]) == [
        "show_tell"
    ]
    assert affected(params, ["train_ablation_translate@dot_torch_init"]) == ["luong_dot"]
    assert affected(params, ["tokenize_caption"]) == ["show_attend_tell", "show_tell"]
    assert affected(params, ["tune_translate@bahdanau", "cluster_check"]) is None


def test_a_key_the_change_adds_is_left_out_of_each_run_s_config_too(tmp_path):
    from attention_lab.pipeline.neutral import fingerprints

    run = tmp_path / "models" / "f" / "checkpoints" / "seed0"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("tune:\n  trials: 4\n")
    before = fingerprints(tmp_path)
    (run / "config.yaml").write_text(
        "pool:\n  gpu_share: 0.25\ntune:\n  in_flight: 1\n  trials: 4\n"
    )
    assert fingerprints(tmp_path, ["tune.in_flight"]) != before
    assert fingerprints(tmp_path, ["tune.in_flight", "pool"]) == before
    details = tmp_path / "results" / "t" / "f" / "details.json"  # the run's settings: dotted keys
    details.parent.mkdir(parents=True)
    details.write_text(json.dumps({"trained_config": {"model.dropout": 0.1}}))
    before = fingerprints(tmp_path, ["tune.in_flight", "pool"])
    settings = {"model.dropout": 0.1, "model.init": "torch"}
    details.write_text(json.dumps({"trained_config": settings}))
    assert fingerprints(tmp_path, ["tune.in_flight", "pool"]) != before
    assert fingerprints(tmp_path, ["tune.in_flight", "pool", "model.init"]) == before


def test_a_report_s_missing_input_names_its_maker_a_foreach_item_too(tmp_path):
    """In a checkout that never ran prepare, report_claims lacks the prepared test items of the
    task's corpora too: their makers are foreach items (prepare_corpus_translate@monotone), named
    so that `dvc repro --single-item` runs them before the reports."""
    from attention_lab.pipeline.lock import missing_makers
    from attention_lab.pipeline.resolved import expand

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "metrics").symlink_to(ROOT / "metrics")  # the committed records are there
    makers = missing_makers(checkout, expand(ROOT), ["report_claims"])
    assert "prepare_translate" in makers
    assert "prepare_corpus_translate@monotone" in makers
    assert "prepare_corpus_caption@frozen_cnn" in makers
