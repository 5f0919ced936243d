"""Reading users' text files for every task: DataError (names the file and line), decoding and normalisation."""

from __future__ import annotations

import codecs
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

SPLITS = ("train", "valid", "test")


class DataError(ValueError):
    """A corpus file is missing or malformed; the message names the file and line."""


def normalise(text: str) -> str:
    """Collapse whitespace runs to single spaces and strip."""
    return " ".join(text.split())


def read_lines(path: str | Path, encoding: str = "utf-8") -> list[str]:
    """Decoded lines of a file (line endings removed), with a DataError for missing, empty or undecodable files."""
    path = Path(path)
    try:
        codecs.lookup(encoding)
    except LookupError as err:
        raise DataError(f"{path}: unknown encoding {encoding!r} (data.encoding; e.g. utf-8, utf-16, latin-1, cp949)") \
            from err
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
            raise DataError(f"{path}:{n}: cannot decode bytes as {encoding} ({err.reason} at byte {err.start})") \
                from err
    lines[0] = lines[0].removeprefix("\ufeff")
    return lines


def split_files(data: Mapping, keys: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """{split: {config key: path}}: train under `keys` (e.g. src_path), valid and test under `valid_<key>` and
    `test_<key>` where those are set; a split left out is carved from train."""
    files = {"train": {key: data[key] for key in keys}}
    for split in SPLITS[1:]:
        named = {f"{split}_{key}": data.get(f"{split}_{key}") for key in keys}
        if any(named.values()):
            files[split] = named
    return files


@contextmanager
def naming_split(split: str, keys: Mapping[str, str], named: bool = True) -> Iterator[None]:
    """A DataError raised inside names the split and the config keys its files come from (when `named`)."""
    try:
        yield
    except DataError as err:
        if not named:
            raise
        raise DataError(f"{split} split ({', '.join(f'data.{k}' for k in keys)}): {err}") from err
