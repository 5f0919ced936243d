"""The prepare stage on a copy of the repository config: generated and bring-your-own sources."""

import shutil
from pathlib import Path

import pytest
import yaml

from attention_lab.core.config import ConfigError
from attention_lab.core.files import read_json, read_jsonl
from attention_lab.core.readers import DataError
from attention_lab.stages.prepare import main
from tests.conftest import ROOT

REPO = ROOT
OUT = Path("data/prepared/translate")


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """conf/ and params.yaml copied into tmp_path, which becomes the working directory."""
    shutil.copytree(REPO / "conf", tmp_path / "conf")
    shutil.copy(REPO / "params.yaml", tmp_path / "params.yaml")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def set_data(root: Path, data: dict) -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["translate"]["data"] = data
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def test_generated(repo, capsys):
    main(["data.n_train=300", "data.n_valid=40", "data.n_test_per_bucket=6"])
    splits = {s: read_jsonl(OUT / f"{s}.jsonl") for s in ("train", "valid", "test")}
    assert [len(splits[s]) for s in splits] == [300, 40, 30]
    assert splits["test"][0]["id"] == "test-0" and set(splits["test"][0]) == {"id", "src", "tgt", "align"}
    train = {r["src"] for r in splits["train"]}
    assert not train & {r["src"] for r in splits["valid"] + splits["test"]}
    stats = read_json(OUT / "stats.json")
    assert stats["test"]["buckets"] == {"1-10": 6, "11-20": 6, "21-30": 6, "31-40": 6, "41-1000": 6}
    assert stats["train"]["pairs"] == 300 and stats["test"]["src_words_max"] <= 60
    assert capsys.readouterr().out.count("prepare@translate: ") == 3


def test_tsv(repo):
    corpus = repo / "corpus.tsv"
    corpus.write_text("".join(f"sentence {i}\t문장 {i}\tcredit\n" for i in range(40)), encoding="utf-8")
    set_data(repo, {"source": "tsv", "path": "corpus.tsv", "valid_fraction": 0.1, "test_fraction": 0.25})
    main([])
    rows = {s: read_jsonl(OUT / f"{s}.jsonl") for s in ("train", "valid", "test")}
    assert [len(rows[s]) for s in rows] == [26, 4, 10]
    assert set(rows["train"][0]) == {"id", "src", "tgt"}


def test_parallel_files_with_max_pairs(repo):
    (repo / "a.en").write_text("".join(f"line {i}\n" for i in range(30)))
    (repo / "a.ko").write_text("".join(f"줄 {i}\n" for i in range(30)))
    set_data(repo, {"source": "parallel_files", "src_path": "a.en", "tgt_path": "a.ko", "max_pairs": 20})
    main(["data.valid_fraction=0.1", "data.test_fraction=0.1"])
    assert sum(read_json(OUT / "stats.json")[s]["pairs"] for s in ("train", "valid", "test")) == 20


def test_bad_tsv_path_is_a_clear_error_and_writes_nothing(repo):
    set_data(repo, {"source": "tsv", "path": "missing.tsv"})
    with pytest.raises(DataError, match=r"missing\.tsv: file not found"):
        main([])
    assert not (repo / "data").exists()


def test_unknown_data_key_is_refused(repo):
    set_data(repo, {"source": "tsv", "path": "x.tsv", "n_train": 10})
    with pytest.raises(ConfigError, match="n_train"):
        main([])
