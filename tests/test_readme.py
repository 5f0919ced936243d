"""The README's results table is the generated one (from the committed metrics), not hand-typed numbers."""

import re

from attention_lab.core.config import families, load_config, read_params
from attention_lab.core.files import read_json
from attention_lab.core.task import get_task
from tests.conftest import ROOT


def test_readme_results_match_committed_metrics():
    readme = (ROOT / "README.md").read_text()
    params = read_params(ROOT)
    for task in params["tasks"]:
        block = re.search(rf"<!-- results:{task}:begin.*?-->\n(.*?)<!-- results:{task}:end -->", readme, re.DOTALL)
        assert block, f"README.md lost its {task} results markers"
        cfg = load_config(root=ROOT, task=task)
        results = {f: read_json(ROOT / "metrics" / task / f"{f}.json") for f in families(params, task)}
        assert get_task(task).table(results, cfg) in block.group(1)


def test_readme_names_the_two_commands_and_the_mlflow_ui():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make pipeline" in readme and "make test" in readme and "make test" in ci
    assert "mlflow ui --backend-store-uri sqlite:///mlflow.db" in readme
