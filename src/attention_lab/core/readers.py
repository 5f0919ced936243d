"""Reading users' text files for every task: DataError (names the file and line), decoding and
normalisation."""

from __future__ import annotations

import codecs
from collections.abc import Callable, Mapping
from pathlib import Path

SPLITS = ("train", "valid", "test")


class DataError(ValueError):
    """A corpus file is missing or malformed; the message names the file and line."""


def normalise(text: str) -> str:
    """Collapse whitespace runs to single spaces and strip."""
    return " ".join(text.split())


def read_lines(path: str | Path, encoding: str = "utf-8") -> list[str]:
    """Decoded lines of a file (line endings removed), with a DataError for missing, empty or
    undecodable files."""
    path = Path(path)
    try:
        codecs.lookup(encoding)
    except LookupError as err:
        raise DataError(
            f"{path}: unknown encoding {encoding!r} (data.encoding; e.g. utf-8, utf-16, latin-1,"
            " cp949)"
        ) from err
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    raw = path.read_bytes()
    if not raw.strip():
        raise DataError(f"{path}: file is empty")
    lines = []
    for n, line in enumerate(raw.splitlines(), 1):
        try:
            lines.append(line.decode(encoding))
        except UnicodeDecodeError as err:
            raise DataError(
                f"{path}:{n}: cannot decode bytes as {encoding} ({err.reason} at byte {err.start})"
            ) from err
    lines[0] = lines[0].removeprefix("\ufeff")
    return lines


def read_splits(
    data: Mapping, keys: tuple[str, ...], read: Callable[[list[str]], list]
) -> dict[str, list]:
    """{split: read(its paths)} for train (the paths under `keys`, e.g. src_path) and for valid and
    test where their `valid_<key>`/`test_<key>` are set; with split files, a DataError names the
    split and its config keys."""
    files = {"train": {key: data[key] for key in keys}}
    for split in SPLITS[1:]:
        named = {f"{split}_{key}": data.get(f"{split}_{key}") for key in keys}
        if any(named.values()):
            files[split] = named
    rows = {}
    for split, named in files.items():
        try:
            rows[split] = read(list(named.values()))
        except DataError as err:
            if len(files) == 1:
                raise
            raise DataError(
                f"{split} split ({', '.join(f'data.{k}' for k in named)}): {err}"
            ) from err
    return rows


def carved_fractions(
    data: Mapping, given: Mapping, task: str, source: str, share: str
) -> tuple[float, float]:
    """(valid, test) shares of train to carve out: data.<split>_fraction, or 0 for a split given as
    files; prepare says which splits are carved when others were given."""
    fractions = {split: 0 if split in given else data[f"{split}_fraction"] for split in SPLITS[1:]}
    for split in SPLITS[1:]:
        if given and split not in given:
            print(
                f"prepare_{task}: {split}: carved from {source} ({fractions[split]:.0%} {share},"
                f" seed {data['seed']}): no {split} split given"
            )
    return fractions["valid"], fractions["test"]
