"""One task registry: every task declares itself once (attention_lab/<task>/task.py), its hooks
resolve, no stage names a task, a family's model class sits in a module named after the family, and
no module shadows the standard library."""

import ast
import importlib
import inspect
import sys
from pathlib import Path

import pytest
import yaml

from attention_lab.core.params import families, read_params
from attention_lab.core.task import NAMES, Task, get_task
from tests.conftest import ROOT

SRC = ROOT / "src" / "attention_lab"
HOOKS = ("splits", "stats", "tokenizer", "build", "evaluate", "export", "page", "table")


@pytest.mark.parametrize("name", NAMES)
def test_each_task_declares_itself_once_with_hooks_that_resolve(name):
    task = get_task(name)
    assert isinstance(task, Task) and task.name == name and task.headline
    for hook in HOOKS:
        module, function = getattr(task, hook).__qualname__.split(":")
        assert module.startswith(f"attention_lab.{name}."), (
            f"{name}.{hook} lives outside its task's folder: {module}"
        )
        assert callable(getattr(importlib.import_module(module), function))
    declared = [p for p in SRC.rglob("task.py") if "\nTASK = Task(" in p.read_text()]
    assert sorted(p.parent.name for p in declared) == sorted(NAMES)


def test_unknown_task_names_the_known_ones():
    with pytest.raises(KeyError, match="translate, classify, caption"):
        get_task("summarise")


def test_no_stage_names_a_task():
    for path in (SRC / "stages").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in NAMES:
                pytest.fail(
                    f"{path.name}:{node.lineno} names the task {node.value!r}: dispatch through"
                    " core.task"
                )


def test_every_family_class_is_in_a_module_named_after_the_family():
    params = read_params(ROOT)
    for task in NAMES:
        for family in families(params, task):
            target = yaml.safe_load((ROOT / "conf" / "model" / f"{family}.yaml").read_text())[
                "_target_"
            ]
            module, cls = target.rsplit(".", 1)
            package, _, stem = module.rpartition(".")
            assert package == f"attention_lab.{task}.models", (
                f"{family}: {target} is not in its task's models/"
            )
            assert family.startswith(stem), (
                f"{family}: its class {cls} is in {stem}.py, not a module named after it"
            )
            assert inspect.isclass(getattr(importlib.import_module(module), cls))


def test_no_module_shadows_the_standard_library():
    shadowing = [
        str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if p.stem in sys.stdlib_module_names
    ]
    assert not shadowing, f"modules named like standard-library ones: {shadowing}"


@pytest.mark.parametrize("name", ["translate", "caption"])
def test_by_default_a_task_trains_one_full_run_per_seed(name):
    from omegaconf import OmegaConf

    from attention_lab.core.task import Run

    cfg = OmegaConf.create(
        {
            "root": "/r",
            "family": "f",
            "seeds": [0, 2],
            "paths": {"models": "models"},
            "train": {"label_fraction": 0.5},
            "task": {"name": name},
        }
    )
    task = get_task(name)
    runs = task.runs(cfg)
    assert runs == [
        Run(0, Path("/r/models/f/checkpoints/seed0")),
        Run(2, Path("/r/models/f/checkpoints/seed2")),
    ]
    assert (
        task.full_run(cfg, 2) == runs[1]
        and task.run_marks(cfg) == ("", {})
        and task.train_summary(cfg, None) == {}
    )
