"""git, as the results' provenance and the ledger's preregistration read it."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(root: Path, *args: str) -> str:
    """stdout of `git <args>` in root; ValueError (with git's message) when it fails, e.g. outside a
    git checkout."""
    done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    if done.returncode:
        raise ValueError(
            f"`git {' '.join(args)}` failed in {root}: {done.stderr.strip()} "
            "(results provenance needs the project's git checkout)"
        )
    return done.stdout
