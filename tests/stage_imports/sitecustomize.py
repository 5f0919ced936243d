"""Imported at the start of every Python process while this folder is on PYTHONPATH and
$STAGE_IMPORTS names a file (tests/e2e/test_pipeline.py): at exit, the process appends one JSON line
there, its pid, parent pid, argv and the attention_lab modules it imported, so a test can tell which
modules each stage's command (and its workers) ran."""

import atexit
import json
import os
import sys


def _record(path: str) -> None:
    modules = sorted(
        m for m in sys.modules if m == "attention_lab" or m.startswith("attention_lab.")
    )
    line = json.dumps(
        {"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv, "modules": modules}
    )
    # one write of one line: lines of several processes never mix
    with open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")


if os.environ.get("STAGE_IMPORTS"):
    atexit.register(_record, os.environ["STAGE_IMPORTS"])
