"""preregistration.py on a real git repository: a claim frozen before its runs is confirmatory on
fresh seeds, exploratory on a study's seed, on runs recorded before it, or while its lines are
uncommitted."""

import subprocess

import pytest

from attention_lab.results import preregistration

CLAIM = """claims:
  - id: c1
    claim: a beats b
    holds_if: {above: 0}
  # a comment freezes nothing
  - id: c2
    claim: b beats c
"""


def lock(md5: str) -> str:
    return f"""schema: '2.0'
stages:
  tune_translate@a:
    outs:
    - path: tuned/a.yaml
      md5: tune{md5}
  train_translate@a:
    outs:
    - path: models/a/checkpoints
      md5: {md5}.dir
"""


@pytest.fixture
def repo(tmp_path):
    def commit(message: str, **files: str) -> str:
        for name, text in files.items():
            path = tmp_path / name.replace("__", "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        run("add", "-A")
        run("commit", "-q", "-m", message)
        return run("rev-parse", "--short=7", "HEAD").strip()

    def run(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True
        ).stdout

    run("init", "-q")
    run("config", "user.email", "lab@example.com")
    run("config", "user.name", "lab")
    return tmp_path, commit


def test_runs_before_the_claim_are_exploratory_runs_after_it_confirmatory(repo):
    root, commit = repo
    first_runs = commit("runs", **{"dvc.lock": lock("aaa")})
    frozen = commit("freeze", **{"conf__claims.yaml": CLAIM})
    at = preregistration.frozen_at(root)
    assert at["c1"][0] == at["c2"][0] == frozen
    before = preregistration.recorded_at(root, "a")
    assert before[0] == first_runs and preregistration.recorded_at(root, "nope") is None
    found = preregistration.evidence(root, at["c1"], {"a": before}, ["10", "11"], {"0"})
    assert found["kind"] == "exploratory" and "recorded before the claim was frozen" in found["why"]

    later = commit("replication", **{"dvc.lock": lock("bbb")})
    after = preregistration.recorded_at(root, "a")
    assert after[0] == later
    assert (
        preregistration.evidence(root, at["c1"], {"a": after}, ["10", "11"], {"0"})["kind"]
        == "confirmatory"
    )
    chosen = preregistration.evidence(root, at["c1"], {"a": after}, ["0", "10"], {"0"})
    assert chosen["kind"] == "exploratory" and "seed 0 is a tuning study's" in chosen["why"]
    pending = preregistration.evidence(root, at["c1"], {"a": after, "b": None}, ["10"], {"0"})
    assert pending["kind"] == "exploratory" and "in no commit of dvc.lock yet" in pending["why"]
    assert "`b`" in pending["why"] and "`a`" not in pending["why"]


def test_a_changed_claim_is_frozen_by_its_last_commit_and_uncommitted_lines_freeze_nothing(
    repo,
):
    root, commit = repo
    first = commit("freeze", **{"conf__claims.yaml": CLAIM})
    second = commit("restate c2", **{"conf__claims.yaml": CLAIM.replace("b beats c", "c beats b")})
    at = preregistration.frozen_at(root)
    assert at["c1"][0] == first and at["c2"][0] == second
    restated = CLAIM.replace("b beats c", "c beats b")
    (root / "conf" / "claims.yaml").write_text(restated.replace("a beats b", "a beats everything"))
    at = preregistration.frozen_at(root)
    assert at["c1"] is None and at["c2"][0] == second
    assert (
        preregistration.evidence(root, None, {}, ["10"], set())["why"]
        == "the claim is not committed yet"
    )
