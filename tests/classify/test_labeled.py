"""Bring-your-own labelled documents: JSONL/CSV readers and their errors, label folders, stratified
splits, real corpora read whole."""

import json
import re
import statistics
from collections import Counter
from pathlib import Path

import pytest

from attention_lab.classify.data.labeled import (
    check_labels,
    document_row,
    read_label_folders,
    read_labeled,
    read_unlabelled,
    stratified_split,
    unescape,
)
from attention_lab.core.readers import DataError


def write(path: Path, data: str | bytes) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def jsonl(path: Path, *records) -> Path:
    return write(
        path, "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
    )


def test_document_row_follows_the_contract():
    row = document_row("Shares fell.\n\nMr. Lee  sold them, he said.", "business")
    assert row == {
        "label": "business",
        "rationale": None,
        "sentences": [
            ["Shares", "fell", "."],
            ["Mr.", "Lee", "sold", "them", ",", "he", "said", "."],
        ],
    }


def test_jsonl_happy_path_with_titles(tmp_path):
    f = jsonl(
        tmp_path / "d.jsonl",
        {
            "text": "Ad sales boost profit\n\nProfits rose.",
            "label": "business",
            "title": "Ad sales boost profit",
        },
        "   ",
        {"text": "Profits fell.", "label": 3, "title": "Bad year", "id": "x"},
        {"text": "No title here.", "label": "tech"},
    )
    rows = read_labeled(f, "jsonl", "text", "label", title_field="title")
    assert [r["sentences"] for r in rows] == [
        [["Ad", "sales", "boost", "profit"], ["Profits", "rose", "."]],
        [["Bad", "year"], ["Profits", "fell", "."]],
        [["No", "title", "here", "."]],
    ]
    assert [r["label"] for r in rows] == ["business", "3", "tech"]
    assert read_labeled(f, "jsonl", "text", "label")[1]["sentences"] == [["Profits", "fell", "."]]


def test_csv_happy_path_with_bom_crlf_and_multiline_fields(tmp_path):
    f = write(
        tmp_path / "d.csv",
        '\ufeffid,body,topic\r\n1,"First line.\r\n\r\nSecond, quoted ""line"".",sport\r\n'
        "\r\n2,Just one sentence.,politics\r\n",
    )
    rows = read_labeled(f, "csv", "body", "topic")
    assert [r["label"] for r in rows] == ["sport", "politics"]
    assert rows[0]["sentences"] == [
        ["First", "line", "."],
        ["Second", ",", "quoted", '"', "line", '"', "."],
    ]


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("e.jsonl", "\n  \n", r"e.jsonl: file is empty"),
        (
            "u.jsonl",
            b'{"text": "a", "label": "b"}\n{"text": "\xff"}\n',
            r"u.jsonl:2: cannot decode bytes as utf-8 .*byte 10",
        ),
        ("j.jsonl", '{"text": "a", "label": "b"}\n{"text": "a",\n', r"j.jsonl:2: not valid JSON"),
        ("a.jsonl", '["a", "b"]\n', r"a.jsonl:1: expected a JSON object, found list"),
        (
            "t.jsonl",
            '{"body": "a", "label": "b"}\n',
            r"t.jsonl:1: no field 'text' \(fields present: body, label\)",
        ),
        ("l.jsonl", '{"text": "a"}\n', r"l.jsonl:1: no field 'label' \(fields present: text\)"),
        (
            "n.jsonl",
            '{"text": 5, "label": "b"}\n',
            r"n.jsonl:1: field 'text' is int, expected a string",
        ),
        (
            "w.jsonl",
            '{"text": "a", "label": "b"}\n{"text": " \\n\\n ", "label": "b"}\n',
            r"w.jsonl:2: empty document: field 'text' has no words",
        ),
        ("b.jsonl", '{"text": "a", "label": "  "}\n', r"b.jsonl:1: empty label in field 'label'"),
        (
            "c.csv",
            "body,label\nhello,x\n",
            r"c.csv:1: no field 'text' \(fields present: body, label\)",
        ),
        (
            "f.csv",
            "text,label\nhello,x\nhello,x,extra\n",
            r"f.csv:3: 3 fields, but the header has 2",
        ),
        ("h.csv", "text,label\n", r"h.csv: no documents after the header row"),
        ("g.csv", "text,label\na,b\n,c\n", r"g.csv:3: empty document"),
    ],
)
def test_bad_files_name_file_line_and_field(tmp_path, name, data, message):
    f = write(tmp_path / name, data)
    with pytest.raises(DataError, match=rf"{tmp_path}/{message}"):
        read_labeled(f, name.split(".")[1], "text", "label")


# Zhang et al.'s CSV: no header row, a line break written as \n, JSON's escapes; a blank row skipped
ZHANG = r"""3,"Great tacos, cheap beer.\nCame back the next day."
1,"The ""special"" was cold. Never again."

5,"Multi\nline, \""quoted\"" and caf\u00e9: 1\\2 off."
"""


def test_csv_without_a_header_row(tmp_path):
    """Zhang et al.'s layout: `label,"text"` rows, no header; the first row is a document."""
    f = write(
        tmp_path / "z.csv",
        '3,"Great tacos, cheap beer. Came back the next day."\n'
        '1,"The ""special"" was cold."\n\n2,"Two\nlines."\n',
    )
    rows = read_labeled(f, "csv", "text", "label", columns=["label", "text"])
    assert [r["label"] for r in rows] == ["3", "1", "2"]
    assert rows[0]["sentences"] == [
        ["Great", "tacos", ",", "cheap", "beer", "."],
        ["Came", "back", "the", "next", "day", "."],
    ]
    assert rows[1]["sentences"] == [["The", '"', "special", '"', "was", "cold", "."]]
    assert rows[2]["sentences"] == [["Two"], ["lines", "."]]
    three = write(tmp_path / "t.csv", '2,"Storm hits coast","Rain fell. Roads closed."\n')
    rows = read_labeled(
        three, "csv", "text", "label", title_field="title", columns=["label", "title", "text"]
    )
    assert rows[0]["sentences"] == [
        ["Storm", "hits", "coast"],
        ["Rain", "fell", "."],
        ["Roads", "closed", "."],
    ]
    message = (
        "z.csv:1: no field 'text' (fields present: 3, Great tacos, cheap beer. Came…); "
        "for a file without a header row, set data.columns (e.g. [label, text])"
    )
    with pytest.raises(DataError, match=re.escape(message)):
        read_labeled(f, "csv", "text", "label")


def test_escapes_on_and_off(tmp_path):
    """escapes: true reads \\n as a line break (a sentence end), \\" \\\\ \\uXXXX as characters."""
    f = write(tmp_path / "z.csv", ZHANG)
    on = read_labeled(f, "csv", "text", "label", columns=["label", "text"], escapes=True)
    assert on[0]["sentences"] == [
        ["Great", "tacos", ",", "cheap", "beer", "."],
        ["Came", "back", "the", "next", "day", "."],
    ]
    assert on[2]["sentences"] == [
        ["Multi"],
        ["line", ",", '"', "quoted", '"', "and", "café", ":", "1", "\\", "2", "off", "."],
    ]
    off = read_labeled(f, "csv", "text", "label", columns=["label", "text"])
    assert off[0]["sentences"] == [
        [
            "Great",
            "tacos",
            ",",
            "cheap",
            "beer",
            ".",
            "\\",
            "nCame",
            "back",
            "the",
            "next",
            "day",
            ".",
        ]
    ]
    assert off[1] == on[1]  # no backslash: the same either way
    assert "caf" in off[2]["sentences"][0] and "u00e9" in off[2]["sentences"][0]
    titled = jsonl(tmp_path / "d.jsonl", {"text": "One.\\nTwo.", "title": "A\\u00e9", "label": "x"})
    assert read_labeled(titled, "jsonl", "text", "label", title_field="title", escapes=True)[0][
        "sentences"
    ] == [["Aé"], ["One", "."], ["Two", "."]]
    u = write(tmp_path / "u.csv", '"First.\\nSecond."\n')
    assert read_unlabelled(u, "csv", "text", columns=["text"], escapes=True) == [
        {"sentences": [["First", "."], ["Second", "."]]}
    ]


@pytest.mark.parametrize(
    ("text", "read"),
    [
        (r"a\\nb", "a\\nb"),  # an escaped backslash, then a plain n: not a line break
        (r"a\\\nb", "a\\\nb"),
        (r"\r\n\t\/\"", '\r\n\t/"'),
        (r"\ud83d\ude00 \u00E9", "\U0001f600 é"),  # a surrogate pair is one character
        (r"C:\band \x41 \u12 end\\", r"C:\band \x41 \u12 end" + "\\"),  # not escapes: kept
        ("no backslash", "no backslash"),
    ],
)
def test_unescape(text, read):
    assert unescape(text, "f.csv:1") == read


@pytest.mark.parametrize(
    ("name", "data", "kwargs", "message"),
    [
        (
            "f.csv",
            '1,"A."\n2,"B.",extra\n',
            {},
            "f.csv:2: 3 fields, expected 2 (data.columns: label, text)",
        ),
        (
            "t.csv",
            '1,"A."\n',
            {"columns": ["label", "text", "text"]},
            (
                "t.csv: column(s) 'text' appear more than once in data.columns (label, text, text);"
                " expected one column per name"
            ),
        ),
        (
            "m.csv",
            '1,"A."\n',
            {"columns": ["label", "body"]},
            (
                "m.csv: no column 'text' (data.text_field) in data.columns (label, body); expected"
                " it among the column names"
            ),
        ),
        (
            "l.csv",
            '1,"A."\n',
            {"columns": ["stars", "text"]},
            (
                "l.csv: no column 'label' (data.label_field) in data.columns (stars, text);"
                " expected it among the column names"
            ),
        ),
        (
            "j.jsonl",
            '{"text": "A.", "label": "1"}\n',
            {"fmt": "jsonl"},
            (
                "j.jsonl: data.columns is for format csv (a file without a header row), not jsonl; "
                "expected columns: null"
            ),
        ),
        ("b.csv", ",\n , \n", {}, "b.csv: no documents, only blank rows"),
        (
            "s.csv",
            '1,"A."\n2,"B \\ud800 C."\n',
            {"escapes": True},
            (
                r"s.csv:2: a \u escape is a lone surrogate ('\ud800'), not a character; expected"
                r" valid "
                "Unicode text (data.escapes)"
            ),
        ),
    ],
)
def test_bad_csv_without_a_header_row(tmp_path, name, data, kwargs, message):
    f = write(tmp_path / name, data)
    kwargs = {"fmt": "csv", "columns": ["label", "text"], **kwargs}
    with pytest.raises(DataError, match=f"^{re.escape(f'{tmp_path}/{message}')}$"):
        read_labeled(f, kwargs.pop("fmt"), "text", "label", **kwargs)


def test_split_field(tmp_path):
    f = jsonl(
        tmp_path / "s.jsonl",
        {"text": "A.", "label": "x", "part": "test"},
        {"text": "B.", "label": "y", "part": "train"},
    )
    assert [r["split"] for r in read_labeled(f, "jsonl", "text", "label", split_field="part")] == [
        "test",
        "train",
    ]
    assert "split" not in read_labeled(f, "jsonl", "text", "label")[0]
    jsonl(f, {"text": "A.", "label": "x", "part": "dev"})
    with pytest.raises(
        DataError, match=r"s.jsonl:1: field 'part' is 'dev', expected one of train, valid, test"
    ):
        read_labeled(f, "jsonl", "text", "label", split_field="part")


def test_missing_file_and_unknown_format(tmp_path):
    with pytest.raises(DataError, match=rf"{tmp_path / 'nope.jsonl'}: file not found"):
        read_labeled(tmp_path / "nope.jsonl", "jsonl", "text", "label")
    with pytest.raises(DataError, match="unknown format 'tsv'"):
        read_labeled(tmp_path / "nope.tsv", "tsv", "text", "label")


def folders(base: Path, files: dict[str, str | bytes]) -> Path:
    """base/<relative path> for each file; a path ending in / is an empty folder."""
    for name, data in files.items():
        (base / name).parent.mkdir(parents=True, exist_ok=True)
        if name.endswith("/"):
            (base / name).mkdir(exist_ok=True)
        else:
            write(base / name, data)
    return base


def test_read_label_folders(tmp_path):
    base = folders(
        tmp_path / "imdb",
        {
            "train/pos/1_9.txt": "Great film.<br />Loved it.",
            "train/pos/0_8.txt": "Fine.",
            "train/neg/0_2.txt": "Dull.\n\nToo long.",
            "train/unsup/0_0.txt": "Eh.",
            "train/urls_pos.txt": "not a label",
        },
    )
    rows = read_label_folders(base, "train", ["neg", "pos"])
    assert [(r["label"], r["sentences"][0][0]) for r in rows] == [
        ("neg", "Dull"),
        ("pos", "Fine"),
        ("pos", "Great"),
    ]
    assert rows[0]["sentences"] == [["Dull", "."], ["Too", "long", "."]]
    assert {r["label"] for r in read_label_folders(base, "train")} == {"neg", "pos", "unsup"}


@pytest.mark.parametrize(
    ("files", "split", "labels", "strict", "message"),
    [
        (
            {"test/pos/0.txt": "A."},
            "train",
            None,
            False,
            (
                r"imdb/train: folder not found; expected .*imdb/train/<label>/\*.txt, one folder"
                r" per label \(train/ and test/"
            ),
        ),
        ({}, "train", None, False, r"nope/train: folder not found \(nor .*nope, data.path\)"),
        ({"train/": ""}, "train", None, False, r"imdb/train: no label folders"),
        (
            {"train/pos/0.txt": "A.", "train/neg/": ""},
            "train",
            None,
            False,
            (
                r"imdb/train/neg: empty label folder, no .txt files; expected one document per .txt"
                r" file"
            ),
        ),
        (
            {"train/pos/0.txt": b"caf\xe9."},
            "train",
            None,
            False,
            r"imdb/train/pos/0.txt:1: cannot decode bytes as utf-8",
        ),
        ({"train/pos/0.txt": " \n"}, "train", None, False, r"imdb/train/pos/0.txt: file is empty"),
        (
            {"train/pos/0.txt": "\u3000"},
            "train",
            None,
            False,
            r"imdb/train/pos/0.txt: empty document: no words",
        ),
        (
            {"test/pos/0.txt": "A.", "test/zzz/0.txt": "B."},
            "test",
            ["pos"],
            True,
            r"imdb/test/zzz: label 'zzz' does not occur in train \(train labels: pos\)",
        ),
        (
            {"test/pos/0.txt": "A."},
            "test",
            ["neg", "pos"],
            False,
            r"imdb/test/neg: folder not found; every split folder needs one folder per label",
        ),
    ],
)
def test_bad_label_folders_name_the_folder_or_file(tmp_path, files, split, labels, strict, message):
    base = (
        folders(tmp_path / ("nope" if not files else "imdb"), files) if files else tmp_path / "nope"
    )
    with pytest.raises(DataError, match=message):
        read_label_folders(base, split, labels, strict=strict)


def test_read_unlabelled_from_a_file_or_a_folder_of_text_files(tmp_path):
    f = jsonl(tmp_path / "u.jsonl", {"text": "One. Two."}, {"text": "Three.", "label": "ignored"})
    assert read_unlabelled(f, "jsonl", "text") == [
        {"sentences": [["One", "."], ["Two", "."]]},
        {"sentences": [["Three", "."]]},
    ]
    assert read_unlabelled(write(tmp_path / "u.csv", "body\nFour.\n"), "csv", "body") == [
        {"sentences": [["Four", "."]]}
    ]
    base = folders(tmp_path / "unsup", {"1.txt": "Six.", "0.txt": "Five."})
    assert read_unlabelled(base, "jsonl", "text") == [
        {"sentences": [["Five", "."]]},
        {"sentences": [["Six", "."]]},
    ]


@pytest.mark.parametrize(
    ("files", "name", "message"),
    [
        (
            {},
            "nope",
            (
                r"nope: not found; expected a folder of .txt files or a jsonl/csv file of"
                r" unlabelled documents"
            ),
        ),
        (
            {"unsup/": ""},
            "unsup",
            r"unsup: no .txt files; expected one unlabelled document per .txt file",
        ),
        ({"unsup/0.txt": "\u3000"}, "unsup", r"unsup/0.txt: empty document: no words"),
        (
            {"u.jsonl": '{"text": "A."}\n{"body": "B."}\n'},
            "u.jsonl",
            r"u.jsonl:2: no field 'text' \(fields present: body\)",
        ),
        (
            {"u.jsonl": '{"text": "A."}\n{"text": 5}\n'},
            "u.jsonl",
            r"u.jsonl:2: field 'text' is 5, expected a document's text",
        ),
        (
            {"u.jsonl": '{"text": "A."}\n["B."]\n'},
            "u.jsonl",
            r"u.jsonl:2: expected a JSON object, found list",
        ),
    ],
)
def test_bad_unlabelled_documents_name_the_file_line_and_what_was_expected(
    tmp_path, files, name, message
):
    folders(tmp_path, files)
    with pytest.raises(DataError, match=rf"{tmp_path}/{message}"):
        read_unlabelled(tmp_path / name, "jsonl", "text")


def rows_with(counts: dict[str, int]) -> list[dict]:
    return [
        {"label": label, "sentences": [[label, str(i)]], "rationale": None}
        for label, n in counts.items()
        for i in range(n)
    ]


def test_stratified_split_keeps_proportions_and_is_reproducible():
    rows = rows_with({"a": 100, "b": 40, "c": 10})
    train, valid, test = stratified_split(rows, 0.1, 0.2, seed=1)
    assert [Counter(r["label"] for r in s) for s in (train, valid, test)] == [
        {"a": 70, "b": 28, "c": 7},
        {"a": 10, "b": 4, "c": 1},
        {"a": 20, "b": 8, "c": 2},
    ]
    assert sorted(map(str, train + valid + test)) == sorted(map(str, rows))
    assert stratified_split(rows, 0.1, 0.2, seed=1) == (train, valid, test)
    assert stratified_split(rows, 0.1, 0.2, seed=2)[0] != train
    assert stratified_split(rows, 0.0, 0.2, seed=1)[1] == []


def test_stratified_split_errors():
    with pytest.raises(DataError, match=r"label 'rare' has 2 document\(s\): too few .* at least 3"):
        stratified_split(rows_with({"common": 50, "rare": 2}), 0.1, 0.1, seed=0)
    with pytest.raises(DataError, match="fraction"):
        stratified_split(rows_with({"a": 10}), 0.6, 0.5, seed=0)


def test_check_labels():
    splits = {
        "train": rows_with({"b": 2, "a": 1}),
        "valid": rows_with({"a": 1}),
        "test": rows_with({"b": 1}),
    }
    assert check_labels(splits) == ["a", "b"]
    splits["test"] = rows_with({"b": 2, "z": 1})
    with pytest.raises(
        DataError,
        match=r"test document 2: label 'z' does not occur in train \(train labels: a, b\)",
    ):
        check_labels(splits)
    with pytest.raises(DataError, match="train split is missing or empty"):
        check_labels({"train": [], "valid": []})


def test_real_bbc_corpus(shared_data):
    bbc = shared_data / "bbc_news" / "bbc_news.jsonl"
    if not bbc.is_file():
        pytest.fail(f"{bbc} is missing: {shared_data} is there but lacks the BBC News corpus")
    # no timing: a test asserts what is read, not how fast (a loaded machine is slower)
    rows = read_labeled(bbc, "jsonl", "text", "label", title_field="title")
    assert len(rows) == 2225
    assert sorted(Counter(r["label"] for r in rows)) == [
        "business",
        "entertainment",
        "politics",
        "sport",
        "tech",
    ]
    first = rows[0]["sentences"]  # the text starts with the title: not prepended twice
    assert first[0] == ["Ad", "sales", "boost", "Time", "Warner", "profit"] and first[1][:2] == [
        "Quarterly",
        "profits",
    ]
    assert 10 <= statistics.median(len(r["sentences"]) for r in rows) <= 40
    # words per sentence
    assert 10 <= statistics.mean(len(s) for r in rows for s in r["sentences"]) <= 40
    train, valid, test = stratified_split(rows, 0.1, 0.1, seed=0)
    assert (
        len(train) + len(valid) + len(test) == 2225
        and 215 <= len(valid) <= 230
        and 215 <= len(test) <= 230
    )
    assert check_labels({"train": train, "valid": valid, "test": test}) == sorted(
        {r["label"] for r in rows}
    )


def test_real_yelp_reviews_in_zhangs_csv(shared_data):
    """Zhang et al.'s Yelp Review Full sample: no header row, JSON escapes in the text."""
    yelp = shared_data / "yelp_review_full" / "train.csv"
    if not yelp.is_file():
        pytest.fail(f"{yelp} is missing: {shared_data} is there but lacks the Yelp reviews")
    assert b"\\n" in yelp.read_bytes()  # the escapes are there to read
    rows = read_labeled(yelp, "csv", "text", "label", columns=["label", "text"], escapes=True)
    assert len(rows) == 5000
    assert {r["label"] for r in rows} == {"1", "2", "3", "4", "5"}
    texts = ["".join(words) for r in rows for words in r["sentences"]]  # "\\" is a word of its own
    assert not [t for t in texts if re.search(r'\\[n"u]', t)]
    assert sum("é" in t for t in texts) > 10  # \u00e9 is é
