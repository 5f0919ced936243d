"""pool.py: a family's runs as Ray tasks train bit for bit as they do in the stage's own process, on this machine's pool
and on a cluster of two nodes (started inside a network namespace that holds the loopback alone), and the pool this
machine starts listens on 127.0.0.1 alone."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from attention_lab.pipeline.neutral import fingerprints
from attention_lab.pipeline.scratch import copy_project, environ
from attention_lab.train import pool

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
TRAIN = ["python", "-m", "attention_lab.stages.train", "task=translate", "family=bahdanau"]
NODE = re.compile(r"pool: side_by_side on node (\w+)")


def env(lab: Path, **extra: str) -> dict[str, str]:
    return environ(lab, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", OMP_NUM_THREADS="1", **extra)


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """A one-family project on the tiny profile (two seeds), its data prepared and tokenized."""
    def bahdanau_only(params: dict) -> None:
        params.update(tasks=["translate"])
        params["translate"]["families"] = ["bahdanau"]

    dest = copy_project(tmp_path_factory.mktemp("pool") / "lab", profile="tiny", seeds=[0, 1], edit=bahdanau_only)
    for stage in ("prepare", "tokenizer"):
        subprocess.run(["python", "-m", f"attention_lab.stages.{stage}", "task=translate"], cwd=dest, env=env(dest),
                       check=True, capture_output=True)
    return dest


def trained(lab: Path, args: list[str], **extra: str) -> tuple[dict[str, str], str]:
    """The family's checkpoints (state dicts and steps, by neutral.fingerprints) after `args` ran, and its output."""
    shutil.rmtree(lab / "models", ignore_errors=True)
    proc = subprocess.run(args, cwd=lab, env=env(lab, **extra), capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {k: v for k, v in fingerprints(lab).items() if k.endswith(".ckpt")}, proc.stdout + proc.stderr


def test_runs_train_alike_in_the_stage_on_the_local_pool_and_on_two_nodes(lab):
    here, out = trained(lab, [*TRAIN, "train.processes=1"])
    assert len(here) == 4 and not NODE.search(out)  # best and last of two seeds, trained in the stage's process
    local, out = trained(lab, [*TRAIN, "train.processes=2"])  # a Ray instance of two CPUs for the stage
    assert local == here and len(NODE.findall(out)) == 2
    cluster = f"""
        ip link set lo up
        ray start --head --node-ip-address=127.0.0.1 --port=6391 --num-cpus=1 --include-dashboard=false \
            --disable-usage-stats --temp-dir={tempfile.mkdtemp(prefix="ray-")} >/dev/null
        ray start --address=127.0.0.1:6391 --node-ip-address=127.0.0.1 --num-cpus=1 --disable-usage-stats >/dev/null
        RAY_ADDRESS=127.0.0.1:6391 {' '.join(TRAIN)}
        ss -ltnH > listening.txt
    """  # the namespace's first process is this shell: when it exits, every Ray process of the cluster goes with it
    args = ["unshare", "--user", "--map-root-user", "--net", "--pid", "--fork", "--mount-proc", "sh", "-ec", cluster]
    two, out = trained(lab, args, RAY_worker_niceness="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    assert two == here
    assert len(set(NODE.findall(out))) == 2, out  # one run on each node
    addresses = [line.split()[3] for line in (lab / "listening.txt").read_text().splitlines()]
    assert addresses and all(a.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:", "[::1]:")) for a in addresses)


def test_the_pool_of_this_machine_listens_on_the_loopback_alone():
    with pool.local_instance(1):
        ours = [line.split() for line in subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True,
                                                        check=True).stdout.splitlines()
                if f"pid={os.getpid()}," in line or re.search(r'"(raylet|gcs_server|ray::\w+)"', line)]
    assert ours and all(fields[3].startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")) for fields in ours), ours


def test_what_a_run_asks_the_pool_for():
    assert pool.needs({"accelerator": "cpu"}) == {"num_cpus": 1}
    assert pool.needs({"accelerator": "gpu"}) == {"num_cpus": 1, "num_gpus": pool.GPU_SHARE}
    assert pool.needs({"accelerator": "cpu", "strategy": "ddp"}) is None  # Lightning starts a data-parallel run's
