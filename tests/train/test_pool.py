"""pool.py: a family's runs as Ray tasks train bit for bit as they do in the stage's own process, on
this machine's pool and on a cluster of two nodes (started inside a network namespace that holds the
loopback alone), and the pool this machine starts listens on 127.0.0.1 alone."""

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


# Ray's own default on Linux; pool.local_instance sets 0 for good
CLUSTER = {
    "RAY_worker_niceness": "0",
    "RAY_AUTH_MODE": "token",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1",
}
# in the process it runs in (an earlier test in this worker), and `ray start` of a second node
# refuses it


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Path:
    """A one-family project on the tiny profile (two seeds), its data prepared and tokenized."""

    def bahdanau_only(params: dict) -> None:
        params.update(tasks=["translate"])
        params["translate"]["families"] = ["bahdanau"]

    dest = copy_project(
        tmp_path_factory.mktemp("pool") / "lab", profile="tiny", seeds=[0, 1], edit=bahdanau_only
    )
    for stage in ("prepare", "tokenizer"):
        subprocess.run(
            ["python", "-m", f"attention_lab.stages.{stage}", "task=translate"],
            cwd=dest,
            env=env(dest),
            check=True,
            capture_output=True,
        )
    return dest


def trained(lab: Path, args: list[str], **extra: str) -> tuple[dict[str, str], str]:
    """The family's checkpoints (state dicts and steps, by neutral.fingerprints) after `args` ran,
    and its output."""
    shutil.rmtree(lab / "models", ignore_errors=True)
    proc = subprocess.run(
        args, cwd=lab, env=env(lab, **extra), capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {
        k: v for k, v in fingerprints(lab).items() if k.endswith(".ckpt")
    }, proc.stdout + proc.stderr


def test_runs_train_alike_in_the_stage_on_the_local_pool_and_on_two_nodes(lab):
    here, out = trained(lab, [*TRAIN, "train.processes=1"])
    # best and last of two seeds, trained in the stage's process
    assert len(here) == 4 and not NODE.search(out)
    # a Ray instance of two CPUs for the stage
    local, out = trained(lab, [*TRAIN, "train.processes=2"])
    assert local == here and len(NODE.findall(out)) == 2
    cluster = f"""
        ip link set lo up
        ray start --head --node-ip-address=127.0.0.1 --port=6391 --num-cpus=1 \
            --include-dashboard=false --disable-usage-stats \
            --temp-dir={tempfile.mkdtemp(prefix="ray-")} >/dev/null
        ray start --address=127.0.0.1:6391 --node-ip-address=127.0.0.1 --num-cpus=1 \
            --disable-usage-stats >/dev/null
        RAY_ADDRESS=127.0.0.1:6391 {" ".join(TRAIN)}
        ss -ltnH > listening.txt
    """  # the namespace's first process is this shell: when it exits, every Ray process goes too
    args = [
        "unshare",
        "--user",
        "--map-root-user",
        "--net",
        "--pid",
        "--fork",
        "--mount-proc",
        "sh",
        "-ec",
        cluster,
    ]
    two, out = trained(lab, args, **CLUSTER, RAY_AUTH_TOKEN=secrets.token_hex(32))
    assert two == here
    assert len(set(NODE.findall(out))) == 2, out  # one run on each node
    addresses = [line.split()[3] for line in (lab / "listening.txt").read_text().splitlines()]
    assert addresses and all(
        a.startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:", "[::1]:")) for a in addresses
    )


def test_the_pool_of_this_machine_listens_on_the_loopback_alone():
    with pool.local_instance(1):
        ours = [
            line.split()
            for line in subprocess.run(
                ["ss", "-ltnpH"], capture_output=True, text=True, check=True
            ).stdout.splitlines()
            if f"pid={os.getpid()}," in line or re.search(r'"(raylet|gcs_server|ray::\w+)"', line)
        ]
    assert ours and all(
        fields[3].startswith(("127.0.0.1:", "[::ffff:127.0.0.1]:")) for fields in ours
    ), ours


def test_a_run_on_a_lost_node_is_retried_elsewhere_and_resumes_to_the_same_checkpoints(lab):
    """Two worker nodes, one run each; once both have written last.ckpt, every Ray process of one of
    the nodes (its raylet and all it started) is killed (SIGKILL): its run is retried on the other
    node, resumes from its last.ckpt (the nodes share the workspace's filesystem), and both runs end
    bit for bit as they do in one uninterrupted process."""
    # a last.ckpt after each epoch; no clock cut
    longer = [*TRAIN, "train.max_epochs=4", "train.max_minutes=30"]
    here, _ = trained(lab, [*longer, "train.processes=1"])
    partial = "models/bahdanau/.partial-checkpoints"
    cluster = f"""
        ip link set lo up
        ray start --head --node-ip-address=127.0.0.1 --port=6392 --num-cpus=0 \
            --include-dashboard=false --disable-usage-stats \
            --temp-dir={tempfile.mkdtemp(prefix="ray-")} >/dev/null
        for node in a b; do
            ray start --address=127.0.0.1:6392 --node-ip-address=127.0.0.1 --num-cpus=1 \
                --disable-usage-stats >/dev/null
        done
        RAY_ADDRESS=127.0.0.1:6392 {" ".join(longer)} &
        stage=$!
        until [ -s {partial}/seed0/last.ckpt ] && [ -s {partial}/seed1/last.ckpt ]; do
            sleep 0.2
        done
        sleep 1  # past the checkpoint's write
        # one of the two runs (^: not this shell, which names it)
        worker=$(pgrep -f "^ray::_in_worker" | head -1)
        raylet=$(ps -o ppid= -p "$worker" | tr -d ' ')
        [ "$raylet" -gt 1 ]  # the worker's node: its raylet started it
        kill_tree() {{ for child in $(pgrep -P $1); do kill_tree $child; done; kill -9 $1; }}
        kill_tree $raylet
        echo "killed node: raylet $raylet, worker $worker"
        wait $stage
    """
    args = [
        "unshare",
        "--user",
        "--map-root-user",
        "--net",
        "--pid",
        "--fork",
        "--mount-proc",
        "sh",
        "-ec",
        cluster,
    ]
    retried, out = trained(lab, args, **CLUSTER, RAY_AUTH_TOKEN=secrets.token_hex(32))
    assert "killed node" in out and "resuming bahdanau seed" in out, out[-4000:]
    assert len(set(NODE.findall(out))) == 2, out[-4000:]  # the lost run again on the other node
    assert retried == here


def test_four_runs_asking_a_quarter_of_a_gpu_train_at_once_each_with_its_device():
    """On a GPU trainer a run asks for pool.gpu_share of a GPU: on one (logical) GPU, four runs at a
    quarter each run side by side, and Ray sets each one's CUDA_VISIBLE_DEVICES."""
    import time

    from omegaconf import OmegaConf

    def run(_: int) -> tuple[float, float, str | None]:
        start = time.monotonic()
        time.sleep(3)
        return start, time.monotonic(), os.environ.get("CUDA_VISIBLE_DEVICES")

    need = pool.needs(
        OmegaConf.create({"trainer": {"accelerator": "gpu"}, "pool": {"gpu_share": 0.25}})
    )
    assert need == {"num_cpus": 1, "num_gpus": 0.25}
    with pool.local_instance(4, gpus=1) as address:
        os.environ[pool.ADDRESS] = address
        try:
            runs = pool.run_all(run, [(i,) for i in range(4)], need)
        finally:
            del os.environ[pool.ADDRESS]
    assert [device for *_, device in runs] == ["0"] * 4
    # all four at once
    assert max(start for start, *_ in runs) < min(end for _, end, _ in runs), runs


def test_what_a_run_asks_the_pool_for():
    from omegaconf import OmegaConf

    def cfg(**trainer):
        return OmegaConf.create({"trainer": trainer, "pool": {"gpu_share": 0.5}})

    assert pool.needs(cfg(accelerator="cpu")) == {"num_cpus": 1}
    assert pool.needs(cfg(accelerator="gpu")) == {"num_cpus": 1, "num_gpus": 0.5}
    # Lightning starts a data-parallel run's
    assert pool.needs(cfg(accelerator="cpu", strategy="ddp")) is None
