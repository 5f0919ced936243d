#!/usr/bin/env bash
# Here, with network, before a session's GPU check (benchmarks/gpu_check.sh): the Python 3.12 x86-64 wheels of what the
# project needs and the GPU machine's image lacks (docs/scaling.md, "A GPU machine"), at constraints.txt's versions,
# into .whl/ (.gitignore'd; carried with `carry: [".whl"]`, 64 MiB at most with the tree).
# Left out: mlflow's server and UI (mlflow-skinny logs to sqlite), dvc's ssh remotes and queue (asyncssh, celery),
# serving, the photo captioner's CNN and the Hangul font (gpu_check.sh stubs koreanize_matplotlib). MiniLM's 88 MB of
# weights do not fit: benchmarks/gpu_minilm.py packs them to 22 MB in .whl/minilm (gpu_check.sh rebuilds them there).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PY=${PY:-.venv/bin/python}; [ -x "$PY" ] || PY=python3
NEED="hydra-core omegaconf
dvc dvc-data dvc-objects dvc-render dvc-studio-client dvc-task dvc-http scmrepo pygit2 dulwich gitpython gitdb smmap
cryptography cffi pycparser funcy flufl-lock atpublic configobj dictdiffer diskcache distro dpath flatten-dict
grandalf gto semver pydot pygtrie ruamel-yaml shortuuid shtab tomlkit voluptuous zc-lockfile sqltrie entrypoints
iterative-telemetry appdirs platformdirs aiohttp-retry orjson
mlflow-skinny mlflow-tracing sqlalchemy alembic mako sqlparse databricks-sdk google-auth pyasn1 pyasn1-modules
opentelemetry-api opentelemetry-proto opentelemetry-sdk opentelemetry-semantic-conventions importlib-metadata
python-dotenv pydantic pydantic-core pydantic-settings annotated-types typing-inspection fastapi starlette uvicorn cachetools
optuna optuna-integration colorlog"
pins=()
for name in $NEED; do
  pin=$(grep -i -m1 "^${name//-/[-_.]}==" constraints.txt || true)
  [ -n "$pin" ] || { echo "gpu_wheels: $name is not in constraints.txt" >&2; exit 1; }
  pins+=("$pin")
done
rm -rf .whl && mkdir .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_34_x86_64 -d .whl "${pins[@]}"
# omegaconf's parser runtime has no wheel on PyPI, only pure-Python source: built here
"$PY" -m pip wheel -q --no-deps -w .whl "$(grep -i -m1 '^antlr4-python3-runtime==' constraints.txt)"
PYTHONPATH=src "$PY" benchmarks/gpu_minilm.py pack .whl/minilm
tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1); whl=$(du -sb .whl | cut -f1)
echo "gpu_wheels: .whl $((whl >> 20)) MiB + tracked tree $((tree >> 20)) MiB of the 64 MiB a device call carries"
