"""The prepare stage on a copy of the repository config: generated and bring-your-own sources."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from attention_lab.core.config import ConfigError
from attention_lab.core.files import read_json, read_jsonl
from attention_lab.core.readers import DataError
from attention_lab.stages.prepare import main
from tests.caption.photo_set import write_coco_split, write_photo_set
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


def set_data(root: Path, data: dict, task: str = "translate") -> None:
    params = yaml.safe_load((root / "params.yaml").read_text())
    params[task]["data"] = data
    (root / "params.yaml").write_text(yaml.safe_dump(params))


def write_lines(path: Path, lines) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def write_label_folders(base: Path, counts: dict[str, dict[str, int]]) -> Path:
    """base/<split>/<label>/<i>_<label>.txt with a two-sentence review each."""
    for split, labels in counts.items():
        for label, n in labels.items():
            for i in range(n):
                write_lines(
                    base / split / label / f"{i}_{label}.txt",
                    [f"Review {i} of {split}.", f"It is {label}."],
                )
    return base


def write_corpus(root: Path, data: dict, n: int = 20) -> None:
    """Tiny files at every path a data section names (an example config), in its source's format."""
    # tests/caption/photo_set.py's shapes, and the split file if named
    if data["source"] == "image_captions":
        names = write_photo_set(root / data["path"], per_pair=1)
        if data.get("split_file"):
            write_lines(
                root / data["split_file"],
                [
                    "image,split",
                    *(
                        f"{n},{('train', 'train', 'train', 'val', 'test')[i % 5]}"
                        for i, n in enumerate(names)
                    ),
                ],
            )
        return
    if data["source"] == "coco_captions":  # tiny PNGs and COCO's JSON for each split given as files
        for k, files in enumerate(f for f in data["splits"].values() if f):
            write_coco_split(
                root / data["path"],
                files["annotations"],
                files["images"],
                n if k == 0 else 3,
                first_id=1 + 1000 * k,
            )
        return
    paths = {k: root / v for k, v in data.items() if k.endswith("path") and v}
    for key, path in paths.items():
        if data["source"] == "parallel_files":
            write_lines(
                path, (f"{'src' if 'src' in key else 'tgt'} {key} sentence {i}" for i in range(n))
            )
        elif data["source"] == "tsv":
            write_lines(path, (f"{key} sentence {i}\t{key} 문장 {i}" for i in range(n)))
        elif data["source"] == "labeled_files" and data.get("columns"):
            write_lines(path, (zhang_row(data["columns"], key, i) for i in range(n)))
        elif data["source"] == "labeled_files":
            write_lines(
                path,
                (
                    json.dumps({"text": f"{key} document {i}.", "label": "ab"[i % 2]})
                    for i in range(n)
                ),
            )
        else:
            labels = {label: n // 2 for label in data.get("labels") or ["neg", "pos"]}
            write_label_folders(path, {"train": {**labels, "unsup": 3}, "test": labels})


def zhang_row(columns: list[str], key: str, i: int) -> str:
    """A row of Zhang et al.'s CSV: label 1 or 2, a quoted text with a comma, "" and \\n."""
    text = f'"{key} review {i}, the ""best"" yet.\\nCame back."'
    return ",".join(str(i % 2 + 1) if name == "label" else text for name in columns)


def test_generated(repo, capsys):
    main(["data.n_train=300", "data.n_valid=40", "data.n_test_per_bucket=6"])
    splits = {s: read_jsonl(OUT / f"{s}.jsonl") for s in ("train", "valid", "test")}
    assert [len(splits[s]) for s in splits] == [300, 40, 30]
    assert splits["test"][0]["id"] == "test-0" and set(splits["test"][0]) == {
        "id",
        "src",
        "tgt",
        "align",
    }
    train = {r["src"] for r in splits["train"]}
    assert not train & {r["src"] for r in splits["valid"] + splits["test"]}
    stats = read_json(OUT / "stats.json")
    assert stats["test"]["buckets"] == {"1-10": 6, "11-20": 6, "21-30": 6, "31-40": 6, "41-1000": 6}
    assert stats["train"]["pairs"] == 300 and stats["test"]["src_words_max"] <= 60
    assert capsys.readouterr().out.count("prepare_translate: ") == 3


def test_tsv(repo):
    corpus = repo / "corpus.tsv"
    corpus.write_text(
        "".join(f"sentence {i}\t문장 {i}\tcredit\n" for i in range(40)), encoding="utf-8"
    )
    set_data(
        repo, {"source": "tsv", "path": "corpus.tsv", "valid_fraction": 0.1, "test_fraction": 0.25}
    )
    main([])
    rows = {s: read_jsonl(OUT / f"{s}.jsonl") for s in ("train", "valid", "test")}
    assert [len(rows[s]) for s in rows] == [26, 4, 10]
    assert set(rows["train"][0]) == {"id", "src", "tgt"}


def test_parallel_files_with_max_pairs(repo):
    (repo / "a.en").write_text("".join(f"line {i}\n" for i in range(30)))
    (repo / "a.ko").write_text("".join(f"줄 {i}\n" for i in range(30)))
    set_data(
        repo, {"source": "parallel_files", "src_path": "a.en", "tgt_path": "a.ko", "max_pairs": 20}
    )
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


def test_parallel_files_with_their_own_splits(repo):
    """Multi30k's layout: train, val and test files read whole, no random split; the tokenizer's
    options apply."""
    from attention_lab.stages import tokenizer

    names = {"train": "train", "valid": "val", "test": "test_2016_flickr"}
    for split, n in (("train", 30), ("valid", 6), ("test", 5)):
        write_lines(
            repo / "m30k" / f"{names[split]}.de", (f"Ein Satz {split} {i}" for i in range(n))
        )
        write_lines(
            repo / "m30k" / f"{names[split]}.en", (f"A sentence {split} {i}" for i in range(n))
        )
    files = {
        f"{p}{side}_path": f"m30k/{names[split]}.{lang}"
        for split, p in (("train", ""), ("valid", "valid_"), ("test", "test_"))
        for side, lang in (("src", "de"), ("tgt", "en"))
    }
    set_data(repo, {"source": "parallel_files", **files})
    main([])
    rows = {s: read_jsonl(OUT / f"{s}.jsonl") for s in ("train", "valid", "test")}
    assert [len(rows[s]) for s in rows] == [30, 6, 5]
    # in file order
    assert [r["src"] for r in rows["test"]] == [f"Ein Satz test {i}" for i in range(5)]
    assert {r["tgt"].split()[2] for r in rows["train"]} == {"train"}
    tokenizer.main(
        [
            "tokenize.vocab_size=60",
            "tokenize.min_frequency=1",
            "tokenize.lowercase=true",
            "tokenize.normalization=nfc",
        ]
    )
    spec = json.loads((repo / "data" / "tokenized" / "translate" / "tokenizer.json").read_text())
    assert spec["normalizer"] == {
        "type": "Sequence",
        "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}],
    }


def test_tsv_test_file_and_valid_carved_from_train(repo, capsys):
    write_lines(repo / "train.tsv", (f"sentence {i}\t문장 {i}" for i in range(40)))
    write_lines(repo / "test.tsv", (f"test {i}\t시험 {i}" for i in range(7)))
    set_data(
        repo,
        {
            "source": "tsv",
            "path": "train.tsv",
            "test_path": "test.tsv",
            "valid_fraction": 0.1,
            "max_pairs": 30,
        },
    )
    main([])
    rows = {s: read_jsonl(OUT / f"{s}.jsonl") for s in ("train", "valid", "test")}
    assert [len(rows[s]) for s in rows] == [27, 3, 7]  # max_pairs caps the train file only
    assert {r["src"].split()[0] for r in rows["train"] + rows["valid"]} == {"sentence"}
    assert (
        "prepare_translate: valid: carved from the train files (10% of the pairs, seed 1234): no"
        " valid split given" in capsys.readouterr().out
    )


def test_labeled_files_with_a_file_per_split(repo, capsys):
    for split, n in (("train", 20), ("test", 6)):
        write_lines(
            repo / f"{split}.jsonl",
            (
                json.dumps({"text": f"{split} document {i}.", "label": "ab"[i % 2]})
                for i in range(n)
            ),
        )
    set_data(
        repo,
        {
            "source": "labeled_files",
            "path": "train.jsonl",
            "test_path": "test.jsonl",
            "valid_fraction": 0.2,
        },
        task="classify",
    )
    main(["task=classify"])
    stats = read_json(Path("data/prepared/classify/stats.json"))
    assert [stats[s]["labels"] for s in ("train", "valid", "test")] == [
        {"a": 8, "b": 8},
        {"a": 2, "b": 2},
        {"a": 3, "b": 3},
    ]
    assert (
        "valid: carved from the train file (20% of each label, seed 1234)"
        in capsys.readouterr().out
    )


def test_label_folders_like_imdb(repo, capsys):
    """train/{neg,pos,unsup} and test/{neg,pos}: unsup skipped by `labels`, valid carved from train,
    stratified."""
    write_label_folders(
        repo / "aclImdb",
        {"train": {"neg": 10, "pos": 10, "unsup": 4}, "test": {"neg": 5, "pos": 5}},
    )
    set_data(
        repo,
        {"source": "label_folders", "path": "aclImdb", "labels": ["neg", "pos"]},
        task="classify",
    )
    main(["task=classify"])
    rows = {
        s: read_jsonl(Path(f"data/prepared/classify/{s}.jsonl")) for s in ("train", "valid", "test")
    }
    assert [len(rows[s]) for s in rows] == [18, 2, 10]
    assert sorted(r["label"] for r in rows["valid"]) == ["neg", "pos"]
    # one file each
    assert all(r["sentences"][1] == ["It", "is", r["label"], "."] for s in rows for r in rows[s])
    # shuffled, seeded
    assert [r["label"] for r in rows["test"]] != sorted(r["label"] for r in rows["test"])
    assert "valid: carved from " in capsys.readouterr().out
    shutil.rmtree("data")
    main(["task=classify"])
    assert read_jsonl(Path("data/prepared/classify/test.jsonl")) == rows["test"]


EXAMPLES = sorted((REPO / "conf" / "data").glob("*/examples/*.yaml"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_every_example_config_prepares(repo, example):
    """Each conf/data/<task>/examples/*.yaml, pasted into params.yaml, prepares tiny files written
    at its paths."""
    task = example.parent.parent.name
    data = yaml.safe_load(example.read_text())
    write_corpus(repo, data)
    set_data(repo, data, task)
    main([f"task={task}"])
    stats = read_json(Path("data/prepared") / task / "stats.json")
    unit = {"translate": "pairs", "classify": "documents", "caption": "photos"}[task]
    assert all(stats[s][unit] > 0 for s in ("train", "valid", "test"))
    if data.get("escapes"):  # zhang_row's \n ends a sentence; the quote and the comma are words
        rows = read_jsonl(Path("data/prepared/classify/test.jsonl"))
        assert [r["sentences"][1] for r in rows] == [["Came", "back", "."]] * len(rows)
        assert all(r["sentences"][0][3:7] == [",", "the", '"', "best"] for r in rows)


def test_there_is_an_example_per_layout():
    assert {
        f"{p.parent.parent.name}/{yaml.safe_load(p.read_text())['source']}" for p in EXAMPLES
    } == {
        "translate/parallel_files",
        "translate/tsv",
        "classify/labeled_files",
        "classify/label_folders",
        "caption/image_captions",
        "caption/coco_captions",
    }


def test_coco_photos_missing_are_all_counted_before_any_is_decoded(repo, monkeypatch):
    """COCO's layout: every missing photo named at once, before any is decoded; nothing written."""
    from attention_lab.caption.data import photos

    data = yaml.safe_load((REPO / "conf/data/caption/examples/coco.yaml").read_text())
    write_corpus(repo, data)
    set_data(repo, data, "caption")
    for name in ("images/train2017/000000000002.png", "images/val2017/000000001001.png"):
        (repo / data["path"] / name).unlink()
    monkeypatch.setattr(photos, "read_photo", lambda *a, **k: pytest.fail("a photo was decoded"))
    with pytest.raises(
        DataError,
        match=r"corpora/coco: 2 image\(s\) named in annotations/"
        r"captions_train2017.json, annotations/captions_val2017"
        r".json not found, e.g. images/train2017/000000000002.png, "
        r"images/val2017/000000001001.png$",
    ):
        main(["task=caption"])
    assert not Path("data/prepared/caption").exists()


def test_unlabelled_documents_beside_the_labelled_splits(repo):
    """Generated: data.n_unlabelled text-only documents in unlabelled.jsonl, none a valid/test
    document; a user source: data.unlabelled_path (IMDB's train/unsup); none asked for: an empty
    unlabelled.jsonl."""
    out = Path("data/prepared/classify")
    main(
        [
            "task=classify",
            "data.n_train=60",
            "data.n_valid=20",
            "data.n_test_per_bucket=5",
            "data.n_unlabelled=600",
        ]
    )
    rows = {s: read_jsonl(out / f"{s}.jsonl") for s in ("train", "valid", "test", "unlabelled")}
    assert len(rows["unlabelled"]) == 600 and set(rows["unlabelled"][0]) == {"id", "sentences"}
    assert not {str(r["sentences"]) for r in rows["unlabelled"]} & {
        str(r["sentences"]) for s in ("valid", "test") for r in rows[s]
    }
    assert read_json(out / "stats.json")["unlabelled"]["documents"] == 600
    main(
        [
            "task=classify",
            "data.n_train=60",
            "data.n_valid=20",
            "data.n_test_per_bucket=5",
            "data.n_unlabelled=0",
        ]
    )
    assert (
        read_jsonl(out / "unlabelled.jsonl") == []
        and read_jsonl(out / "train.jsonl") == rows["train"]
    )
    write_label_folders(
        repo / "aclImdb",
        {"train": {"neg": 10, "pos": 10, "unsup": 4}, "test": {"neg": 5, "pos": 5}},
    )
    set_data(
        repo,
        {
            "source": "label_folders",
            "path": "aclImdb",
            "labels": ["neg", "pos"],
            "unlabelled_path": "aclImdb/train/unsup",
        },
        task="classify",
    )
    main(["task=classify"])
    assert [r["sentences"][1] for r in read_jsonl(out / "unlabelled.jsonl")] == [
        ["It", "is", "unsup", "."]
    ] * 4
