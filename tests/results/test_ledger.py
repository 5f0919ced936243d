"""ledger.py: which row the README shows, and the replication params.yaml sets against what the committed ledger's
power analysis asks (the page's rows and tables on fake outputs: tests/stages/test_claims.py)."""

from attention_lab.core.config import read_params, replication
from attention_lab.core.files import read_json
from attention_lab.results import ledger
from tests.conftest import ROOT


def test_the_headline_is_the_confirmatory_row_where_there_is_one():
    rows = [{"id": "a", "evidence": "exploratory"}, {"id": "b", "evidence": "exploratory"}]
    again = [{"id": "b", "evidence": "confirmatory"}]
    assert [r["evidence"] for r in ledger.headline(rows, again)] == ["exploratory", "confirmatory"]


def test_params_yaml_replicates_what_the_committed_ledger_asks():
    """params.yaml `<task>.replication` is the power table's ask (reports/claims.md), not a number typed apart."""
    params = read_params(ROOT)
    rows = read_json(ROOT / "metrics" / "claims.json")["claims"]
    set_here = {t: replication(params, t, ROOT) for t in params["tasks"]}
    assert ledger.seeds_asked(rows) == {t: own for t, own in set_here.items() if own}
