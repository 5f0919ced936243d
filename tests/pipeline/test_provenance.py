"""pipeline.provenance: what `dvc status` says is summarised truthfully, the README block
round-trips, and the agreement check catches hand edits (on a throw-away git copy of the committed
results)."""

import shutil
import subprocess

import pytest

from attention_lab.pipeline import provenance
from attention_lab.results import protocol
from tests.conftest import ROOT

SOURCE = {
    "md5": "0123456789abcdef0123456789abcdef",
    "committed": True,
    "commit": "abc1234",
    "date": "2026-11-24",
}


def test_stale_stages_keeps_what_git_keeps_params_and_the_command():
    status = {
        "train_translate@bahdanau": [
            {
                "changed deps": {
                    "data/prepared/translate": "deleted",
                    "src/attention_lab/core": "modified",
                    "params.yaml": {"translate.family_params.bahdanau": "modified"},
                }
            },
            {"changed outs": {"models/bahdanau/checkpoints": "not in cache"}},
        ],
        "evaluate_translate@bahdanau": [
            {"changed outs": {"predictions/translate/bahdanau.json": "not in cache"}}
        ],
        "report_translate": ["changed command"],
    }
    kept = lambda path: not path.startswith(("data/", "models/", "predictions/"))
    assert provenance.stale_stages(status, kept) == {
        "train_translate@bahdanau": [
            ("modified", "src/attention_lab/core"),
            ("modified", "params.yaml: translate.family_params.bahdanau"),
        ],
        "report_translate": [("changed", "the command")],
    }


def test_a_stage_dvc_lock_has_no_entry_of_has_not_run_yet():
    status = {
        "train_replication_translate@bahdanau": [
            {"changed deps": {"src/attention_lab/core": "new"}}
        ],
        "train_translate@bahdanau": [{"changed deps": {"src/attention_lab/core": "modified"}}],
    }
    stale = provenance.stale_stages(status, lambda path: True, locked={"train_translate@bahdanau"})
    assert stale["train_replication_translate@bahdanau"] == [(provenance.NEVER_RUN, None)]
    names = [
        "train_replication_translate@bahdanau",
        "train_replication_translate@luong_dot",
        "train_translate@bahdanau",
    ]
    assert provenance.summarise(stale, names) == [
        "- `train_replication_translate@{bahdanau}` (1 of 2): not run yet",
        "- `train_translate@bahdanau`: modified `src/attention_lab/core`",
    ]
    fresh = {"source": SOURCE | {"committed": True}, "names": names, "stale": stale}
    assert "for 1 of 3 stages, and 1 stage has not run yet;" in provenance.readme_block(
        fresh, today="2026-12-06"
    )


def test_summarise_names_stage_kinds_and_writes_item():
    names = [
        "prepare@translate",
        "prepare@caption",
        "train_translate@bahdanau",
        "train_translate@luong_dot",
        "train_caption@show_tell",
        "tune_caption@show_tell",
        "evaluate_translate@bahdanau",
        "evaluate_translate@luong_dot",
        "report_index",
    ]
    caption = [("modified", "conf/model/show_tell.yaml"), ("modified", "src/attention_lab/caption")]
    stale = {
        # a folder keeps its name
        "prepare@translate": [("modified", "src/attention_lab/translate/prepare.py")],
        "train_translate@bahdanau": [
            ("modified", "conf/model/bahdanau.yaml"),
            ("modified", "src/attention_lab/translate"),
        ],
        "train_translate@luong_dot": [
            ("modified", "conf/model/luong_dot.yaml"),
            ("modified", "src/attention_lab/translate"),
        ],
        "train_caption@show_tell": caption,
        "tune_caption@show_tell": caption,
        "evaluate_translate@luong_dot": [
            ("deleted", "src/attention_lab/metrics.py"),
            ("changed", "the command"),
        ],
        "report_index": [("modified", "params.yaml: tasks")],
    }
    assert provenance.summarise(stale, names) == [
        "- `prepare@{translate}` (1 of 2): modified `src/attention_lab/translate/prepare.py`",
        (
            "- `train_translate@*` (all 2): modified `conf/model/<item>.yaml`,"
            " `src/attention_lab/translate`"
        ),
        (
            "- `train_caption@show_tell`, `tune_caption@show_tell`: modified"
            " `conf/model/<item>.yaml`, `src/attention_lab/caption`"
        ),
        (
            "- `evaluate_translate@{luong_dot}` (1 of 2): changed the command; deleted"
            " `src/attention_lab/metrics.py`"
        ),
        "- `report_index`: modified `params.yaml: tasks`",
    ]


def test_summarise_counts_paths_when_there_are_many():
    names = ["tune_classify@han", "tune_translate@bahdanau"]
    stale = {
        "tune_classify@han": [("deleted", f"src/attention_lab/models/m{i}.py") for i in range(13)],
        "tune_translate@bahdanau": [
            ("deleted", f"src/attention_lab/tasks/t{i}.py") for i in range(14)
        ]
        + [("deleted", "src/attention_lab/models/m0.py")],
    }
    lines = provenance.summarise(stale, names)
    assert lines == [
        "- `tune_classify@han`: deleted 13 paths in `src/attention_lab/models/`",
        "- `tune_translate@bahdanau`: deleted 15 paths in `src/attention_lab/{models,tasks}/`",
    ]


@pytest.mark.parametrize("committed", [True, False])
@pytest.mark.parametrize("stale", [{}, {"report_index": [("modified", "src/attention_lab/core")]}])
def test_readme_block_round_trips(committed, stale):
    fresh = {
        "source": {**SOURCE, "committed": committed},
        "names": ["report_translate", "report_index"],
        "tasks": {},
        "stale": stale,
    }
    block = provenance.readme_block(fresh, today="2026-11-25")
    readme = provenance.splice_block(
        f"# x\n{provenance.HEADER}\nold\n{provenance.END}\nrest\n", block
    )
    assert readme == f"# x\n{block}\nrest\n"
    parsed = provenance.parse_block(readme)
    assert parsed == {
        "md5": SOURCE["md5"][: provenance.MD5_CHARS],
        "committed": committed,
        "commit": "abc1234",
        "date": "2026-11-24",
        "fresh": not stale,
        "kinds": ["report_index"] if stale else [],
    }
    if stale:
        assert (
            "**These results may be stale.** `dvc status` (2026-11-25)" in block
            and "1 of 2 stages" in block
        )
    else:
        assert "the results are fresh" in block


def test_parse_block_refuses_a_missing_or_hand_written_block():
    with pytest.raises(ValueError, match="no <!-- provenance:begin"):
        provenance.parse_block("# README\n")
    with pytest.raises(ValueError, match="names no dvc.lock md5"):
        provenance.parse_block(
            f"{provenance.HEADER}\nResults: fresh, trust me.\n{provenance.END}\n"
        )


@pytest.fixture(scope="module")
def results_repo(tmp_path_factory):
    """A git repository holding the pipeline definition and the committed results (no code, no
    data)."""
    repo = tmp_path_factory.mktemp("results")
    for name in (
        "dvc.yaml",
        "dvc.lock",
        "params.yaml",
        ".dvcignore",
        ".dvc/config",
        "metrics",
        "reports",
        "tuned",
    ):
        src, dest = ROOT / name, repo / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest)
    git = lambda *args: subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)
    git("init", "-q")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "results")
    return repo


def test_agreement_catches_hand_edits_and_a_stale_readme_block(results_repo):
    source = provenance.lock_source(results_repo)
    assert source["committed"] and source["md5"] == provenance.md5((ROOT / "dvc.lock").read_bytes())
    readme = f"# results\n{provenance.readme_block({'source': source, 'names': [], 'stale': {}})}\n"
    checked, problems = provenance.lock_disagreements(results_repo)
    assert (
        "metrics/translate/bahdanau.json" in checked
        and "reports/translate" in checked
        and not problems
    )
    assert provenance.block_disagreements(results_repo, readme, names=["report_index"]) == []

    metrics = results_repo / "metrics" / "translate" / "bahdanau.json"
    metrics.write_text(metrics.read_text().replace('"test/bleu": ', '"test/bleu": 1 + ', 1))
    picture = next(
        p for p in sorted((results_repo / "reports" / "translate").iterdir()) if p.is_file()
    )
    picture.write_bytes(picture.read_bytes() + b"\0")
    (results_repo / "dvc.lock").write_text(
        (results_repo / "dvc.lock").read_text() + "# hand edit\n"
    )
    try:
        _, problems = provenance.lock_disagreements(results_repo)
        text = "\n".join(problems)
        assert (
            "metrics/translate/bahdanau.json: dvc.lock (evaluate_translate@bahdanau) records"
            in text
        )
        assert "reports/translate: dvc.lock (report_translate) records" in text
        # the report is of other metrics
        assert "report_translate: dvc.lock says it read metrics/translate at" in text
        assert "dvc.lock md5" in "\n".join(
            provenance.block_disagreements(results_repo, readme, names=[])
        )
    finally:
        subprocess.run(["git", "checkout", "-q", "--", "."], cwd=results_repo, check=True)


@pytest.mark.parametrize(
    ("stale", "disagree", "outdated", "gaps", "passed"),
    [
        ({}, [], False, [], True),
        ({"report_index": [("modified", "x.py")]}, [], False, [], False),
        ({}, ["metrics/a.json: dvc.lock records 1, the committed one is 2"], False, [], False),
        ({}, [], True, [], False),
        ({}, [], False, ["tuned/a.yaml: 4 trials, the protocol asks for >= 8"], False),
    ],
)
def test_check_results_fails_while_stale_disagreeing_outdated_or_off_protocol(
    monkeypatch, stale, disagree, outdated, gaps, passed
):
    monkeypatch.setattr(
        provenance, "lock_disagreements", lambda root: (["metrics/a.json"], disagree)
    )
    monkeypatch.setattr(provenance, "block_disagreements", lambda root, readme, names: [])
    monkeypatch.setattr(protocol, "protocol_problems", lambda root: gaps)
    fresh = {"source": SOURCE, "names": ["report_index"], "tasks": {}, "stale": stale}
    ok, lines = provenance.check_results(
        ROOT, "readme", "readme, regenerated" if outdated else "readme", fresh
    )
    assert ok == passed and lines[-1] == f"check-results: {'passed' if passed else 'FAILED'}"
    assert lines[0].startswith("STALE" if stale else "fresh")
    assert any(line.startswith("DISAGREE") for line in lines) == bool(disagree)
    assert any(line.startswith("OUTDATED") for line in lines) == outdated
    assert any(line.startswith("PROTOCOL") for line in lines) == bool(gaps)
