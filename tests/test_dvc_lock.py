"""The committed dvc.lock is the lock of the committed code, conf and params: the results in git are reproducible
as they stand, and `dvc repro` on a fresh clone does not re-run a stage because of an edit nobody re-ran."""

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def test_committed_lock_matches_committed_code_and_params():
    dvc = Path(sys.executable).with_name("dvc")
    out = subprocess.run([str(dvc), "status", "--json"], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={**os.environ, "DVC_NO_ANALYTICS": "1"}).stdout
    tracked = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                                 check=True).stdout.splitlines())
    in_git = lambda path: path in tracked or any(f.startswith(path.rstrip("/") + "/") for f in tracked)
    # data/, models/ and plots/ are outputs (not in git, not in a fresh clone): only deps kept in git must match
    stale = {stage: [f"{path}: {how}" for change in changes if isinstance(change, dict)
                     for path, how in change.get("changed deps", {}).items() if in_git(path)]
             for stage, changes in json.loads(out or "{}").items()}
    stale = {stage: paths for stage, paths in stale.items() if paths}
    assert not stale, f"dependencies edited since dvc.lock was written (re-run `dvc repro` and commit): {stale}"
