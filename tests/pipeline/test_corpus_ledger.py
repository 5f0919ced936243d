"""pipeline.corpus_ledger: specs checked before anything runs, the copy's params, the corpus's
checksums."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import yaml

from attention_lab.core.config import ConfigError
from attention_lab.pipeline import corpus_ledger
from attention_lab.pipeline.scratch import copy_project
from tests.conftest import ROOT

SPEC = {
    "title": "T",
    "task": "translate",
    "corpus": "c",
    "files": "corpus",
    "recipe": "r",
    "families": ["bahdanau"],
    "params": {"data": {"source": "tsv", "path": "{files}/pairs.tsv"}},
}


def write_spec(tmp_path: Path, **changes) -> Path:
    spec = {**SPEC, **changes}
    for key in [k for k, v in changes.items() if v is None]:
        spec.pop(key)
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "conf" / "ledgers").glob("*.yaml")))
def test_shipped_specs_load(name):
    spec = corpus_ledger.load_spec(ROOT, name)
    assert spec.name == name and spec.families and "{files}" in str(spec.params)
    for entry in spec.published:  # each figure names its source, where, our family and its protocol
        assert {"source", "where", "model", "family", "metric", "value", "protocol"} <= set(
            entry
        ), entry


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"colour": "red"}, "unknown key 'colour'"),
        ({"recipe": None}, "'recipe' is missing"),
        ({"families": "bahdanau"}, "families is str, expected a list"),
        ({"families": ["rnn"]}, "families ['rnn'] are not in params.yaml translate.families"),
        (
            {"ablations": ["none_such"]},
            "ablations ['none_such'] are not in params.yaml translate.ablations",
        ),
        ({"task": "speech"}, "task 'speech' is not a section of params.yaml"),
    ],
)
def test_bad_specs_name_the_file_and_key(tmp_path, changes, message):
    path = write_spec(tmp_path, **changes)
    with pytest.raises(ConfigError, match=None) as err:
        corpus_ledger.load_spec(ROOT, str(path))
    assert str(path) in str(err.value) and message in str(err.value)


def test_an_unknown_ledger_lists_the_shipped_ones():
    with pytest.raises(ConfigError, match="no such ledger spec; expected one of .*multi30k"):
        corpus_ledger.load_spec(ROOT, "wmt14")


def test_missing_files_stop_before_any_copy(tmp_path):
    spec = corpus_ledger.load_spec(ROOT, str(write_spec(tmp_path)))
    (tmp_path / "corpus").mkdir()
    with pytest.raises(FileNotFoundError, match=r"the corpus's files are missing: .*pairs\.tsv"):
        corpus_ledger.named_files(spec, tmp_path / "corpus")


def test_checksums_are_the_files_sha256(tmp_path):
    spec = corpus_ledger.load_spec(ROOT, str(write_spec(tmp_path)))
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "pairs.tsv").write_bytes(b"a\tb\n")
    found = corpus_ledger.checksums(
        corpus_ledger.named_files(spec, tmp_path / "corpus"), tmp_path / "corpus"
    )
    assert found == {"pairs.tsv": hashlib.sha256(b"a\tb\n").hexdigest()}


def test_the_copy_runs_the_spec_task_alone_on_its_data(tmp_path):
    spec = corpus_ledger.load_spec(ROOT, "multi30k")
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    corpus_ledger.edit_params(spec, Path("corpora/multi30k"))(params)
    t = params["translate"]
    assert params["tasks"] == ["translate"]
    assert t["families"] == spec.families and list(t["ablations"]) == list(spec.ablations)
    assert t["replication"] == {} and t["corpora"] == {}
    # the data section whole (no generated-data key left), the rest merged key by key
    assert t["data"]["source"] == "parallel_files" and "n_train" not in t["data"]
    assert t["data"]["test_src_path"] == "corpora/multi30k/test_2016_flickr.de"
    assert t["train"]["batch_size"] == 64 and t["train"]["lr"] == 0.002
    assert params["classify"]["families"] == [] and params["classify"]["pretrained"] == []
    assert params["caption"]["families"] == []


def test_a_folders_checksum_is_that_of_its_files_sha256sum_lines(tmp_path):
    folder = tmp_path / "corpus"
    (folder / "images").mkdir(parents=True)
    (folder / "images" / "b.jpg").write_bytes(b"b")
    (folder / "a.json").write_bytes(b"{}")
    lines = "".join(
        f"{hashlib.sha256(data).hexdigest()}  {name}\n"
        for name, data in (("a.json", b"{}"), ("images/b.jpg", b"b"))
    )
    found = corpus_ledger.checksums([folder], folder)
    assert found == {"./ (2 files)": hashlib.sha256(lines.encode()).hexdigest()}


def test_collect_writes_the_ledger_whole_or_leaves_it_as_it_was(tmp_path, monkeypatch):
    from attention_lab.results import corpus_ledger as figures

    spec = corpus_ledger.load_spec(ROOT, str(write_spec(tmp_path)))
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "pairs.tsv").write_bytes(b"a\tb\n")
    work = tmp_path / "work"
    (work / "metrics").mkdir(parents=True)
    (work / "metrics" / "claims.json").write_text('{"claims": []}')
    (work / "dvc.lock").write_text("schema: '2.0'\n")
    (work / "origin.json").write_text('{"commit": "abc", "dirty": false, "made": "now"}')
    root = tmp_path / "root"
    out = corpus_ledger.collect(root, spec, work, tmp_path / "corpus")
    written = sorted(p.name for p in out.iterdir())
    assert written == ["claims.json", "corpus.json", "dvc.lock", "summary.json"]
    (out / "claims.json").write_text("kept")

    def broken(work, spec):
        raise RuntimeError("no figures")

    monkeypatch.setattr(figures, "summary", broken)
    with pytest.raises(RuntimeError, match="no figures"):
        corpus_ledger.collect(root, spec, work, tmp_path / "corpus")
    assert (out / "claims.json").read_text() == "kept"  # nothing half-written
    assert [p.name for p in out.parent.iterdir()] == ["mine"]  # no temporary folder left beside it


def test_a_new_copy_takes_the_stages_a_commit_of_its_progress_carried(tmp_path, capsys):
    root = copy_project(tmp_path / "clone", ROOT)  # a clone whose git has the ledger's progress
    (root / "corpus").mkdir()
    (root / "corpus" / "pairs.tsv").write_text("a\tb\n", encoding="utf-8")
    spec = corpus_ledger.load_spec(root, str(write_spec(root)))
    saved = root / corpus_ledger.RECORDS / spec.name / corpus_ledger.PROGRESS
    (saved / "reports").mkdir(parents=True)
    (saved / "reports" / "translate.md").write_text("# translate\n", encoding="utf-8")
    (saved / "origin.json").write_text('{"commit": "abc1234"}\n', encoding="utf-8")
    entry = {"cmd": "python -m attention_lab.stages.report task=translate", "outs": []}
    lock = {"schema": "2.0", "stages": {"report_translate": entry}}
    (saved / "dvc.lock").write_text(yaml.safe_dump(lock), encoding="utf-8")
    work = corpus_ledger.prepare(root, spec, root / "corpus", tmp_path / "work")
    assert "1 finished stages restored" in capsys.readouterr().out
    assert yaml.safe_load((work / "dvc.lock").read_text())["stages"] == lock["stages"]
    assert (work / "reports" / "translate.md").read_text() == "# translate\n"
    assert (work / "origin.json").read_text() == '{"commit": "abc1234"}\n'  # the first copy's
