"""The code's style as ruff (pyproject.toml `[tool.ruff]`) enforces it: lint clean, formatted, lines
at most 100 columns, over src/, tests/ and benchmarks/ (`make format` rewrites, `make lint`
checks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ["src", "tests", "benchmarks"]


@pytest.mark.parametrize(
    "command", [["check"], ["format", "--check", "--diff"]], ids=["check", "format"]
)
def test_ruff_passes(command):
    proc = subprocess.run(
        [sys.executable, "-m", "ruff", *command, *FOLDERS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
