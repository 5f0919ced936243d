"""The README's results table is the generated one (from the committed metrics), not hand-typed numbers."""

import re

from attention_lab.config import families, load_config, read_params
from attention_lab.io import read_json
from attention_lab.report import results_table
from tests.conftest import ROOT


def test_readme_results_match_committed_metrics():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- results:begin.*?-->\n(.*?)<!-- results:end -->", readme, re.DOTALL)
    assert block, "README.md lost its results markers"
    cfg = load_config(root=ROOT)
    names = families(read_params(ROOT), "translate")
    results = {f: read_json(ROOT / "metrics" / "translate" / f"{f}.json") for f in names}
    assert results_table(results, cfg.task.buckets) in block.group(1)


def test_readme_names_the_two_commands_and_the_mlflow_ui():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make pipeline" in readme and "make test" in readme and "make test" in ci
    assert "mlflow ui --backend-store-uri sqlite:///mlflow.db" in readme
