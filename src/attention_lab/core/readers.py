"""Reading users' text files for every task: DataError (names the file and line), decoding and normalisation."""

from __future__ import annotations

import codecs
from pathlib import Path


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
