"""Bring-your-own corpus readers: every bad input gets a DataError naming file and line."""

from pathlib import Path

import pytest

from attention_lab.core.readers import DataError
from attention_lab.translate.data.readers import read_parallel_files, read_tsv, split_pairs


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def test_tsv_normalises_whitespace_and_skips_blank_lines(tmp_path):
    f = write(tmp_path / "c.tsv", "\ufeffhello   world \t 안녕  세상\tx\n\nbye\t잘 가\n")
    assert read_tsv(f) == [
        {"src": "hello world", "tgt": "안녕 세상"},
        {"src": "bye", "tgt": "잘 가"},
    ]
    assert read_tsv(f, src_column=1, tgt_column=0)[1] == {"src": "잘 가", "tgt": "bye"}


def test_tsv_missing_column(tmp_path):
    f = write(tmp_path / "c.tsv", "a\tb\nonly one column\n")
    with pytest.raises(
        DataError, match=rf"{f}:2: expected at least 2 tab-separated columns .* found 1"
    ):
        read_tsv(f)


@pytest.mark.parametrize(
    ("text", "side"), [("a\tb\n  \t가\n", "source"), ("a\tb\nc\t \n", "target")]
)
def test_tsv_empty_side(tmp_path, text, side):
    f = write(tmp_path / "c.tsv", text)
    with pytest.raises(DataError, match=rf"{f}:2: empty {side} text"):
        read_tsv(f)


def test_undecodable_bytes_name_the_line(tmp_path):
    f = write(tmp_path / "c.tsv", b"a\tb\nc\td\n\xff\xfe\tx\n")
    with pytest.raises(DataError, match=rf"{f}:3: cannot decode bytes as utf-8"):
        read_tsv(f)


def test_empty_and_missing_files(tmp_path):
    with pytest.raises(DataError, match=rf"{tmp_path / 'e.tsv'}: file is empty"):
        read_tsv(write(tmp_path / "e.tsv", "\n \n"))
    with pytest.raises(DataError, match=rf"{tmp_path / 'nope.tsv'}: file not found"):
        read_tsv(tmp_path / "nope.tsv")
    with pytest.raises(DataError, match="file not found"):
        read_parallel_files(tmp_path / "nope.en", tmp_path / "nope.ko")


def test_parallel_files(tmp_path):
    en, ko = (
        write(tmp_path / "a.en", "the  dog\n\ncats\n"),
        write(tmp_path / "a.ko", "개\n\n 고양이 \n"),
    )
    assert read_parallel_files(en, ko) == [
        {"src": "the dog", "tgt": "개"},
        {"src": "cats", "tgt": "고양이"},
    ]


def test_parallel_files_mismatched_line_counts(tmp_path):
    en, ko = write(tmp_path / "a.en", "a\nb\nc\n"), write(tmp_path / "a.ko", "가\n나\n")
    with pytest.raises(DataError, match=rf"{en} has 3 lines but {ko} has 2"):
        read_parallel_files(en, ko)


def test_parallel_files_empty_side(tmp_path):
    en, ko = write(tmp_path / "a.en", "a\nb\n"), write(tmp_path / "a.ko", "가\n \n")
    with pytest.raises(DataError, match=rf"{ko}:2: empty target line"):
        read_parallel_files(en, ko)
    with pytest.raises(DataError, match=rf"{ko}:2: empty source line"):
        read_parallel_files(ko, en)


def test_split_pairs_is_reproducible_and_complete():
    pairs = [{"src": str(i), "tgt": str(i)} for i in range(100)]
    train, valid, test = split_pairs(pairs, 0.1, 0.2, seed=3)
    assert (len(train), len(valid), len(test)) == (70, 10, 20)
    assert sorted(p["src"] for p in train + valid + test) == sorted(p["src"] for p in pairs)
    assert split_pairs(pairs, 0.1, 0.2, seed=3) == (train, valid, test)
    assert split_pairs(pairs, 0.1, 0.2, seed=4)[0] != train
    with pytest.raises(DataError, match="fraction"):
        split_pairs(pairs, 0.6, 0.5, seed=0)


def test_reads_the_tatoeba_corpus(shared_data):
    tatoeba = shared_data / "korean_english_tatoeba" / "kor.txt"
    if not tatoeba.is_file():
        pytest.fail(
            f"{tatoeba} is missing: {shared_data} is there but lacks the Tatoeba English-Korean"
            " corpus"
        )
    pairs = read_tsv(tatoeba)
    assert len(pairs) == 3798
    assert pairs[0] == {"src": "Go.", "tgt": "가."}
    assert all(p["src"] and p["tgt"] for p in pairs)
