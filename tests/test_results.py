"""The committed results agree with each other and with the committed dvc.lock: no hand edits, no
half-committed re-runs. This is agreement, not freshness: code, conf and params may have changed
since the last full `dvc repro` (the README's provenance block says which stages, and `make
check-results` fails until the next full run), but the metrics, reports and tuned values in git must
be the ones dvc.lock records. The README tables' agreement with the committed metrics is
tests/test_readme.py's."""

from attention_lab.core.params import families, read_params
from attention_lab.pipeline.provenance import block_disagreements, lock_disagreements
from attention_lab.results.protocol import protocol_problems
from tests.conftest import ROOT


def test_committed_outputs_have_the_hashes_dvc_lock_records():
    checked, problems = lock_disagreements(ROOT)
    params = read_params(ROOT)
    tables = {
        f"metrics/{task}/{f}.json"
        for task in params["tasks"]
        for f in families(params, task)
        # a family not run yet: the README says so
        if (ROOT / "metrics" / task / f"{f}.json").is_file()
    }
    summaries = {f"metrics/{task}_summary.json" for task in params["tasks"]}
    reports = {f"reports/{task}.md" for task in params["tasks"]} | {"reports/index.md"}
    # what the README tables and report pages are made of is among what the lock vouches for
    assert tables | summaries | reports <= set(checked), sorted(
        tables | summaries | reports - set(checked)
    )
    assert not problems, "committed results that dvc.lock does not record:\n" + "\n".join(problems)


def test_readme_provenance_block_names_the_committed_lock():
    problems = block_disagreements(ROOT, (ROOT / "README.md").read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


def test_committed_results_keep_the_protocol():
    """Three seeds, every final run stopped by early stopping, >= 8 trials in every tuned family's
    study."""
    gaps = protocol_problems(ROOT)
    assert not gaps, "\n".join(gaps)
