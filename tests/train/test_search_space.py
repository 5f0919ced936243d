"""search_space.py: a family's search space checked against its config (each bad space names the
file and key), every family's space valid, and sampled values typed and nested."""

import optuna
import pytest
import yaml

from attention_lab.core.config import ConfigError
from attention_lab.stages.common import stage_config
from attention_lab.train.search_space import load_space, nested, suggest


def write_space(project, family: str, text: str):
    (project / "conf" / "tune" / f"{family}.yaml").write_text(text)


@pytest.mark.parametrize(
    "text, message",
    [
        ("model.no_such_key: {low: 1, high: 2}", "not a key of the family's config"),
        ("train.lr: {low: 0.1, high: 0.01}", "low < high"),
        ("train.lr: {low: 0.0, high: 0.1, log: true}", "log scale needs low > 0"),
        ("train.lr: {choices: []}", "non-empty list"),
        ("train.lr: {low: 0.1, high: 0.2, choices: [1]}", "expected {low: L, high: H"),
        ("train.lr: 0.1", "expected {low: L, high: H"),
    ],
)
def test_bad_search_spaces_name_the_file_and_key(project, text, message):
    write_space(project, "bahdanau", text)
    cfg = stage_config(["family=bahdanau"])
    with pytest.raises(ConfigError, match=message) as err:
        load_space(project / "conf" / "tune" / "bahdanau.yaml", cfg)
    assert "conf/tune/bahdanau.yaml" in str(err.value)


def test_every_family_has_a_valid_search_space(project):
    params = yaml.safe_load((project / "params.yaml").read_text())
    for task in ("translate", "classify", "caption"):
        for family in params[task]["families"] + params[task].get("pretrained", []):
            cfg = stage_config([f"task={task}", f"family={family}"])
            assert load_space(project / "conf" / "tune" / f"{family}.yaml", cfg), family


def test_suggest_types_and_nesting():
    space = {
        "train.lr": {"low": 1e-4, "high": 1e-2, "log": True},
        "model.hops": {"low": 1, "high": 6},
        "model.dim": {"choices": [64, 128]},
    }
    values = suggest(
        optuna.trial.FixedTrial({"train.lr": 1e-3, "model.hops": 3, "model.dim": 128}), space
    )
    assert values == {"train.lr": 1e-3, "model.hops": 3, "model.dim": 128}
    assert nested(values) == {"train": {"lr": 1e-3}, "model": {"hops": 3, "dim": 128}}


def test_the_family_s_own_value_must_lie_in_its_space(project):
    """Trial 0 trains the untuned default, so a space that excludes it is refused, naming the key
    and value."""
    cfg = stage_config(["family=bahdanau", "train.lr=0.01"], tuned=False)
    write_space(project, "bahdanau", "train.lr: {low: 1.0e-4, high: 1.0e-3}\n")
    with pytest.raises(
        ConfigError, match=r"`train.lr`: the family's own value 0.01 is outside the space"
    ):
        load_space(project / "conf" / "tune" / "bahdanau.yaml", cfg)
