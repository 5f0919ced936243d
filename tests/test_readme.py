"""The README's results table is the generated one (from the committed records), not typed."""

import re

import pytest

from attention_lab.core.config import load_config
from attention_lab.core.files import read_json
from attention_lab.core.params import families, read_params
from attention_lab.core.task import get_task
from attention_lab.results import records
from tests.conftest import ROOT


def test_readme_results_match_committed_metrics():
    readme = (ROOT / "README.md").read_text()
    params = read_params(ROOT)
    for task in params["tasks"]:
        block = re.search(
            rf"<!-- results:{task}:begin.*?-->\n(.*?)<!-- results:{task}:end -->", readme, re.DOTALL
        )
        assert block, f"README.md lost its {task} results markers"
        cfg = load_config(root=ROOT, task=task)
        results = {
            f: records.read_at(ROOT, task, f)
            for f in families(params, task)
            # a family not run yet: no row
            if (ROOT / "metrics" / task / f"{f}.json").is_file()
        }
        assert get_task(task).table(results, cfg) in block.group(1)


def test_readme_names_the_two_commands_and_the_mlflow_ui():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make pipeline" in readme and "make test" in readme and "make test" in ci
    assert "mlflow ui --backend-store-uri sqlite:///mlflow.db" in readme


def _anchors(markdown: str) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    # a `# comment` in code is no heading
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.MULTILINE | re.DOTALL)
    return {
        re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", prose, re.MULTILINE)
    }


def test_readme_and_docs_links_resolve():
    """The README's short paragraphs send readers to docs/: every relative link (and #anchor) there
    must exist."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    readme_links = set(re.findall(r"\]\((docs/[^)#]+)", pages[0].read_text()))
    for page in (
        "tasks",
        "pipeline",
        "tuning",
        "data",
        "mlflow",
        "serving",
        "benchmarks",
        "scaling",
        "design",
    ):
        assert f"docs/{page}.md" in readme_links, f"README.md does not link docs/{page}.md"
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if "://" in target:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            assert dest.exists(), f"{page.relative_to(ROOT)} links {target}: no such file"
            if anchor and dest.suffix == ".md":
                assert anchor in _anchors(dest.read_text()), (
                    f"{page.relative_to(ROOT)} links {target}: no such heading"
                )


def test_design_notes_name_each_family_class_as_conf_does():
    """docs/design.md's family table names each family's model class as conf/model/<family>.yaml's
    _target_ does (a new family needs no row: adding one takes three edits, none of them in
    docs/)."""
    import re

    import yaml

    design = (ROOT / "docs" / "design.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| `([\w.]+)` \|", design, flags=re.MULTILINE))
    assert rows, "docs/design.md: no family table"
    for family, named in rows.items():
        conf = ROOT / "conf" / "model" / f"{family}.yaml"
        assert conf.is_file(), f"docs/design.md: a row for `{family}`, which has no conf/model file"
        target = yaml.safe_load(conf.read_text())["_target_"].removeprefix("attention_lab.")
        assert named == target, (
            f"docs/design.md: `{family}` -> `{named}`, but its _target_ is `{target}`"
        )


@pytest.mark.parametrize(
    "marker, report, render",
    [("cost", "cost.json", "cost_table"), ("fresh-clone", "cost-fresh.json", "fresh_clone_table")],
)
def test_readme_cost_is_the_committed_cost_report(marker, report, render):
    """README's cost tables are the ones `attention-lab readme` writes from reports/cost.json (the
    full re-run's logs) and reports/cost-fresh.json (a clean clone's `make pipeline`), both by
    benchmarks/pipeline_cost.py."""
    from attention_lab import project

    cost = ROOT / "reports" / report
    readme = (ROOT / "README.md").read_text()
    block = re.search(
        rf"<!-- results:{marker}:begin.*?-->\n(.*?)<!-- results:{marker}:end -->", readme, re.DOTALL
    )
    assert bool(block) == cost.is_file(), (
        f"README.md's {marker} markers and reports/{report} come together"
    )
    if block:
        assert block.group(1) == getattr(project, render)(read_json(cost)) + "\n"


def test_readme_verdicts_are_the_committed_ledger():
    """README's front table of claims is the one `attention-lab readme` writes from
    metrics/claims.json (the report_claims stage) and the real-data ledgers' (results/ledgers/), so
    no verdict or effect there is typed by hand."""
    from attention_lab.results import corpus_ledger, ledger

    readme = (ROOT / "README.md").read_text()
    block = re.search(
        r"<!-- results:claims:begin.*?-->\n(.*?)<!-- results:claims:end -->", readme, re.DOTALL
    )
    assert block, "README.md lost its claims markers"
    found = read_json(ROOT / "metrics" / "claims.json")
    rows = ledger.headline(found["claims"], found.get("confirmatory") or [])
    assert block.group(1) == ledger.readme_table(rows, corpus_ledger.verdicts(ROOT)) + "\n"
