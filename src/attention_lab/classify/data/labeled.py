"""Bring-your-own labelled documents: JSONL or CSV readers, label folders, stratified splits;
segment.py splits their text into sentences and words."""

from __future__ import annotations

import csv
import json
import random
import re
from collections import defaultdict
from pathlib import Path

from attention_lab.classify.data.segment import split_sentences, split_words
from attention_lab.core.readers import DataError, read_lines

FORMATS = ("jsonl", "csv")
# escapes: true reads a text's backslash escapes as a JSON string does: Zhang et al. 2015's CSV
# files write a line break as \n, and their Yelp text kept its JSON escapes (\" \\ \r \uXXXX).
# JSON's \b and \f stay as written: never prose, while a backslash before a letter may be.
ESCAPE = re.compile(r'\\(?:u([0-9a-fA-F]{4})|(["\\/nrt]))')
UNESCAPED = {"n": "\n", "r": "\r", "t": "\t", '"': '"', "\\": "\\", "/": "/"}
SURROGATE = re.compile("[\ud800-\udfff]")
SPLITS = ("train", "valid", "test")


def document_row(text: str, label: str) -> dict:
    """A row of the classify contract: label, sentences as word lists, no rationale."""
    sentences = [words for s in split_sentences(text) if (words := split_words(s))]
    return {"label": label, "sentences": sentences, "rationale": None}


def read_labeled(
    path: str | Path,
    fmt: str,
    text_field: str,
    label_field: str,
    encoding: str = "utf-8",
    title_field: str | None = None,
    split_field: str | None = None,
    columns: list[str] | None = None,
    escapes: bool = False,
) -> list[dict]:
    """Rows from a JSONL file (one object a line) or a CSV file; a DataError names file and line.

    With `split_field`, each row also gets "split" (train, valid or test) from that field.
    `columns`: the column names of a CSV file without a header row (data.columns).
    `escapes`: the backslash escapes of the text and title are read (unescape, data.escapes).
    """
    if fmt not in FORMATS:
        raise DataError(f"{path}: unknown format {fmt!r}, expected one of {', '.join(FORMATS)}")
    lines = read_lines(path, encoding)  # DataError for a missing, empty or undecodable file
    required = {"text_field": text_field, "label_field": label_field}
    records = _records(path, fmt, lines, required, columns)
    rows = []
    for n, record in records:
        where = f"{path}:{n}"
        text, label = _field(where, record, text_field), _field(where, record, label_field)
        if not isinstance(text, str):
            raise DataError(
                f"{where}: field {text_field!r} is {type(text).__name__}, expected a string"
            )
        text = unescape(text, where) if escapes else text
        if isinstance(label, bool) or not isinstance(label, str | int):
            raise DataError(
                f"{where}: field {label_field!r} is {type(label).__name__}, expected a string"
            )
        if not str(label).strip():
            raise DataError(f"{where}: empty label in field {label_field!r}")
        title = record.get(title_field) if title_field else None
        if title is not None and not isinstance(title, str):
            raise DataError(
                f"{where}: field {title_field!r} is {type(title).__name__}, expected a string"
            )
        title = unescape(title, where) if escapes and title else title
        if title and title.strip() and not text.lstrip().startswith(title.strip()):
            text = f"{title.strip()}\n{text}"  # the title becomes the first sentence
        row = document_row(text, str(label).strip())
        if not row["sentences"]:
            raise DataError(f"{where}: empty document: field {text_field!r} has no words")
        if split_field:
            row["split"] = _field(where, record, split_field)
            if row["split"] not in SPLITS:
                raise DataError(
                    f"{where}: field {split_field!r} is {row['split']!r}, expected one of "
                    f"{', '.join(SPLITS)}"
                )
        rows.append(row)
    return rows


def read_label_folders(
    base: str | Path,
    split: str,
    labels: list[str] | None = None,
    encoding: str = "utf-8",
    strict: bool = False,
) -> list[dict]:
    """Rows from <base>/<split>/<label>/*.txt, one document a file, label by label and files in name
    order.

    `labels`: the label folders to read (None: every subfolder); other folders are skipped (IMDB's
    train/unsup), or with `strict` are a DataError (a label that only valid/test has).
    """
    folder = Path(base) / split
    if not folder.is_dir():
        where = "" if Path(base).is_dir() else f" (nor {base}, data.path)"
        raise DataError(
            f"{folder}: folder not found{where}; expected {base}/{split}/<label>/*.txt, one folder"
            " per label (train/ and test/ needed, valid/ optional)"
        )
    present = sorted(p.name for p in folder.iterdir() if p.is_dir())
    labels = present if labels is None else labels
    if not labels:
        raise DataError(
            f"{folder}: no label folders; expected {folder}/<label>/*.txt, one folder per label"
        )
    if strict and (extra := sorted(set(present) - set(labels))):
        raise DataError(
            f"{folder / extra[0]}: label {extra[0]!r} does not occur in train (train labels: "
            f"{', '.join(labels)}); expected the same label folders in every split, or data.labels "
            "naming the ones to read"
        )
    return [row for label in labels for row in _label_folder(folder, label, encoding)]


def _label_folder(folder: Path, label: str, encoding: str) -> list[dict]:
    """The documents of <folder>/<label>/*.txt."""
    path = folder / label
    if not path.is_dir():
        raise DataError(f"{path}: folder not found; every split folder needs one folder per label")
    files = sorted(path.glob("*.txt"))
    if not files:
        raise DataError(
            f"{path}: empty label folder, no .txt files; expected one document per .txt file"
        )
    return _text_files(files, label, encoding)


def _text_files(files: list[Path], label: str, encoding: str) -> list[dict]:
    """One document per file, each with `label`; a DataError names an undecodable or wordless
    file."""
    rows = []
    for file in files:
        # DataError names the file and line
        row = document_row("\n".join(read_lines(file, encoding)), label)
        if not row["sentences"]:
            raise DataError(f"{file}: empty document: no words")
        rows.append(row)
    return rows


def read_unlabelled(
    path: str | Path,
    fmt: str,
    text_field: str,
    encoding: str = "utf-8",
    columns: list[str] | None = None,
    escapes: bool = False,
) -> list[dict]:
    """Documents {"sentences"} for pretraining, no label: every *.txt file of a folder (one document
    each), or the `text_field` of each line/row of a JSONL/CSV file; a DataError names the file (and
    line) and what was expected. `columns`, `escapes`: as read_labeled's, for a file."""
    path = Path(path)
    if not path.exists():
        raise DataError(
            f"{path}: not found; expected a folder of .txt files or a {'/'.join(FORMATS)} file of "
            "unlabelled documents"
        )
    if path.is_dir():
        files = sorted(path.glob("*.txt"))
        if not files:
            raise DataError(
                f"{path}: no .txt files; expected one unlabelled document per .txt file"
            )
        rows = _text_files(files, "", encoding)
    else:
        if fmt not in FORMATS:
            raise DataError(f"{path}: unknown format {fmt!r}, expected one of {', '.join(FORMATS)}")
        lines = read_lines(path, encoding)  # DataError for a missing, empty or undecodable file
        records = _records(path, fmt, lines, {"text_field": text_field}, columns)
        rows = []
        for n, record in records:
            text = _field(f"{path}:{n}", record, text_field)
            text = unescape(text, f"{path}:{n}") if escapes and isinstance(text, str) else text
            if not isinstance(text, str) or not (row := document_row(text, ""))["sentences"]:
                raise DataError(
                    f"{path}:{n}: field {text_field!r} is {text!r:.40}, expected a document's text"
                )
            rows.append(row)
    return [{"sentences": row["sentences"]} for row in rows]


def unescape(text: str, where: str) -> str:
    """`text` with JSON's escapes read (\\n \\r \\t \\" \\\\ \\/ \\uXXXX); others stay."""
    if "\\" not in text:
        return text
    text = ESCAPE.sub(lambda m: chr(int(m[1], 16)) if m[1] else UNESCAPED[m[2]], text)
    if SURROGATE.search(text):  # join \ud83d\ude00 into one character; a half pair is not text
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "surrogatepass")
        if lone := SURROGATE.search(text):
            raise DataError(
                f"{where}: a \\u escape is a lone surrogate ({lone[0]!r}), not a "
                "character; expected valid Unicode text (data.escapes)"
            )
    return text


def _records(
    path: str | Path,
    fmt: str,
    lines: list[str],
    required: dict[str, str],
    columns: list[str] | None,
) -> list[tuple[int, dict]]:
    """(line number, record) of a JSONL or CSV file; `columns` only with csv."""
    if columns is not None and fmt != "csv":
        raise DataError(
            f"{path}: data.columns is for format csv (a file without a header row), "
            f"not {fmt}; expected columns: null"
        )
    if fmt == "jsonl":
        return _jsonl_records(path, lines)
    return _csv_records(path, lines, required, columns)


def _check_columns(path: str | Path, columns: list[str], required: dict[str, str]) -> None:
    """A DataError for data.columns naming a column twice or lacking a required field."""
    listed = ", ".join(map(str, columns))
    if twice := sorted({c for c in columns if columns.count(c) > 1}):
        raise DataError(
            f"{path}: column(s) {', '.join(map(repr, twice))} appear more than once in "
            f"data.columns ({listed}); expected one column per name"
        )
    for key, name in required.items():
        if name not in columns:
            raise DataError(
                f"{path}: no column {name!r} (data.{key}) in data.columns ({listed}); "
                "expected it among the column names"
            )


def _field(where: str, record: dict, name: str):
    if name not in record:
        raise DataError(
            f"{where}: no field {name!r} (fields present: {', '.join(map(str, record)) or 'none'})"
        )
    return record[name]


def _jsonl_records(path: str | Path, lines: list[str]) -> list[tuple[int, dict]]:
    """(line number, object) for every non-blank line."""
    records = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise DataError(
                f"{path}:{n}: not valid JSON ({err.msg} at column {err.colno})"
            ) from err
        # a number of over 4300 digits, arrays nested thousands deep
        except (ValueError, RecursionError) as err:
            raise DataError(
                f"{path}:{n}: not valid JSON for this reader ({str(err)[:120]})"
            ) from err
        if not isinstance(record, dict):
            raise DataError(f"{path}:{n}: expected a JSON object, found {type(record).__name__}")
        try:
            json.dumps(record, ensure_ascii=False).encode("utf-8")
        # "\ud800": a \u escape of half a surrogate pair is not a character
        except UnicodeEncodeError as err:
            raise DataError(
                f"{path}:{n}: a \\u escape is a lone surrogate"
                f" ({err.object[err.start : err.end]!r}), not a character; expected valid Unicode"
                " text"
            ) from err
        records.append((n, record))
    return records


def _csv_records(
    path: str | Path, lines: list[str], required: dict[str, str], columns: list[str] | None = None
) -> list[tuple[int, dict]]:
    """(first line, {column: value}) of each non-blank CSV record; a quoted field may span lines.

    The column names are the header row's, or `columns` (data.columns) for a file without one.
    """
    # whole documents can exceed the 128 KiB default
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))
    # physical lines: reader.line_num counts them
    reader = csv.reader((line + "\n" for line in lines), strict=True)
    records: list[tuple[int, dict]] = []
    header: list[str] | None = None
    if columns is not None:
        header = list(columns)
        _check_columns(path, header, required)
    try:
        while True:
            start = reader.line_num + 1
            try:
                values = next(reader)
            except StopIteration:
                break
            if not any(v.strip() for v in values):
                continue
            if header is None:
                header = [h.strip() for h in values]
                if twice := sorted({h for h in header if header.count(h) > 1}):
                    raise DataError(
                        f"{path}:{start}: column(s) {', '.join(map(repr, twice))} appear more than"
                        " once in the header; expected one column per name"
                    )
                for name in required.values():  # report a missing column once, at the header line
                    if name not in header:
                        present = ", ".join(
                            h if len(h) <= 30 else f"{h[:30].rstrip()}…" for h in header
                        )
                        raise DataError(
                            f"{path}:{start}: no field {name!r} (fields present: "
                            f"{present}); for a file without a header row, set "
                            "data.columns (e.g. [label, text])"
                        )
            elif len(values) != len(header):
                expected = (
                    f"but the header has {len(header)}"
                    if columns is None
                    else f"expected {len(header)} (data.columns: {', '.join(map(str, header))})"
                )
                raise DataError(f"{path}:{start}: {len(values)} fields, {expected}")
            else:
                records.append((start, dict(zip(header, values, strict=True))))
    except csv.Error as err:
        hint = (
            "; a quoted field that starts here is never closed" if "end of data" in str(err) else ""
        )
        raise DataError(f"{path}:{start}: malformed CSV ({err}){hint}") from err
    if not records:
        raise DataError(
            f"{path}: no documents after the header row"
            if columns is None
            else f"{path}: no documents, only blank rows"
        )
    return records


def stratified_split(
    rows: list[dict], valid_fraction: float, test_fraction: float, seed: int
) -> tuple[list[dict], list[dict], list[dict]]:
    """(train, valid, test) with each label split in the same proportions; depends only on
    `seed`."""
    if not (
        0 <= valid_fraction < 1 and 0 <= test_fraction < 1 and valid_fraction + test_fraction < 1
    ):
        raise DataError(
            f"valid_fraction={valid_fraction}, test_fraction={test_fraction}: "
            "expected each in [0, 1) and their sum below 1"
        )
    by_label: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        by_label[row["label"]].append(row)
    rng = random.Random(seed)
    train: list[dict] = []
    valid: list[dict] = []
    test: list[dict] = []
    for label in sorted(by_label):
        group = by_label[label]
        n_valid = max(1, round(len(group) * valid_fraction)) if valid_fraction else 0
        n_test = max(1, round(len(group) * test_fraction)) if test_fraction else 0
        if len(group) - n_valid - n_test < 1:
            raise DataError(
                f"label {label!r} has {len(group)} document(s): too few to appear in train and in"
                f" every other split (needs at least {n_valid + n_test + 1})"
            )
        rng.shuffle(group)
        valid += group[:n_valid]
        test += group[n_valid : n_valid + n_test]
        train += group[n_valid + n_test :]
    for split in (train, valid, test):
        rng.shuffle(split)
    return train, valid, test


def check_labels(splits: dict[str, list[dict]]) -> list[str]:
    """The sorted labels of train; a DataError if another split holds a label that train lacks."""
    if not splits.get("train"):
        raise DataError("the train split is missing or empty: it defines the labels")
    labels = sorted({row["label"] for row in splits["train"]})
    for name, rows in splits.items():
        for i, row in enumerate(rows):
            if row["label"] not in labels:
                raise DataError(
                    f"{name} document {i}: label {row['label']!r} does not occur in train "
                    f"(train labels: {', '.join(labels)})"
                )
    return labels
