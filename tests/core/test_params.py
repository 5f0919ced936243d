"""params.py: params.yaml's lists, read and checked (the rest of its checks run through
load_config: tests/core/test_config.py)."""

import pytest

from attention_lab.core.config_rules import ConfigError
from attention_lab.core.params import read_params, replication
from tests.conftest import edit_params


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"nope": 3}, r"translate.replication.nope: not a family or ablation; choose from"),
        (
            {"bahdanau": 1},
            r"translate.replication.bahdanau = 1: expected a number of seeds from 2 to 100",
        ),
        ([3], r"translate.replication: expected a mapping"),
    ],
)
def test_bad_replication_entries_are_named(project, entry, message):
    edit_params(project, lambda p: p["translate"].update(replication=entry))
    with pytest.raises(ConfigError, match=message):
        replication(read_params(project), "translate", project)


def test_a_replication_entry_of_a_family_left_out_has_no_runs(project):
    """As an ablation of a family the run leaves out: no stages, no error."""
    edit_params(
        project,
        lambda p: p["translate"].update(
            families=["bahdanau"], replication={"bahdanau": 3, "luong_dot": 3}
        ),
    )
    assert replication(read_params(project), "translate", project) == {"bahdanau": 3}
