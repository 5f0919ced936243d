"""Python code, or the attention-lab command, in a fresh interpreter: what a serving user runs,
where the test process's own imports (torch) cannot leak in."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "400"}  # one table block, whatever the terminal
    return subprocess.run(
        [sys.executable, "-m", "attention_lab.cli", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
