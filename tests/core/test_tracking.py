"""Remote tracking: a training run logged to a real `mlflow server` records what the same run
records locally.

The server is started the way the README tells users to (one worker, no job runner, artifacts
proxied by the server).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import mlflow
import pytest

from attention_lab.core.files import read_json
from attention_lab.core.paths import seed_dir
from attention_lab.stages import prepare, tokenizer, train
from attention_lab.stages.common import stage_config
from tests.stages.test_train import SMALL

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out

# wall-clock figures: present in both runs, never equal
TIMING = {"train_seconds", "train_tokens_per_s"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def group_alive(pgid: int) -> list[int]:
    """Running (not zombie) processes of a process group, from /proc."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # after "pid (comm)": state, ppid, pgrp, ...
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (the server and its uvicorn worker), SIGKILL to what is
    left."""
    for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + grace
        while (proc.poll() is None or group_alive(proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.poll() is not None and not group_alive(proc.pid):
            return


class Server:
    """A started `mlflow server`: its URL, its --artifacts-destination, and ready() to wait for its
    /health."""

    def __init__(self, proc: subprocess.Popen, url: str, artifacts: Path, log: Path):
        self.proc, self.url, self.artifacts, self.log = proc, url, artifacts, log

    def ready(self, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2):
                    return self.url
            except OSError:
                if self.proc.poll() is not None:
                    pytest.fail(
                        f"mlflow server exited with {self.proc.returncode}:\n{self.log.read_text()}"
                    )
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"mlflow server gave no /health within {timeout:g} s:\n"
                        f"{self.log.read_text()}"
                    )
                time.sleep(0.25)


@contextlib.contextmanager
def serve(root: Path, db: Path):
    """`mlflow server` on 127.0.0.1:<free port> over the sqlite store `db`, artifacts proxied into
    root/artifacts; stopped, with every process it started, on exit."""
    artifacts = root / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    port, log = free_port(), root / "server.log"
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlflow",
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
                "--backend-store-uri",
                f"sqlite:///{db}",
                "--artifacts-destination",
                str(artifacts),
            ],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield Server(proc, f"http://127.0.0.1:{port}", artifacts, log)
    finally:
        stop(proc)
        assert proc.returncode is not None and not group_alive(proc.pid), (
            "mlflow server processes left running"
        )


@pytest.fixture
def mlflow_server(tmp_path):
    """A server over an empty store in tmp_path/server; it boots while the test prepares data (call
    ready() before using it)."""
    root = tmp_path / "server"
    root.mkdir()
    with serve(root, root / "mlflow.db") as server:
        url = server.url
        try:
            yield server
        finally:
            # the stage set it process-wide: later tests must not retry it
            if mlflow.get_tracking_uri() == url:
                saved = os.environ.get("MLFLOW_TRACKING_URI")
                # this also unsets the variable, which monkeypatch has already restored
                mlflow.set_tracking_uri(None)
                if saved is not None:
                    os.environ["MLFLOW_TRACKING_URI"] = saved


def get(url: str, endpoint: str, **query) -> dict:
    with urllib.request.urlopen(
        f"{url}{endpoint}?{urllib.parse.urlencode(query)}", timeout=30
    ) as r:
        return json.load(r)


def post(url: str, endpoint: str, body: dict) -> dict:
    headers = {"Content-Type": "application/json"}
    req = urllib.request.Request(url + endpoint, json.dumps(body).encode(), headers)
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def remote_artifacts(url: str, run_id: str, path: str = "") -> list[str]:
    """Every file path of a run, through the server's artifacts/list."""
    files = get(url, "/api/2.0/mlflow/artifacts/list", run_id=run_id, path=path).get("files", [])
    return sorted(
        p
        for f in files
        for p in (remote_artifacts(url, run_id, f["path"]) if f["is_dir"] else [f["path"]])
    )


def local_artifacts(client, run_id: str, path: str | None = None) -> list[str]:
    """Every file path of a run, through the MLflow client."""
    return sorted(
        p
        for f in client.list_artifacts(run_id, path)
        for p in (local_artifacts(client, run_id, f.path) if f.is_dir else [f.path])
    )


@pytest.fixture
def prepared(project):
    prepare.main(["data.n_train=200", "data.n_valid=30"])
    tokenizer.main(["data.n_train=200", "tokenize.vocab_size=200"])
    return project


def train_run() -> str:
    train.main(["family=bahdanau", *SMALL, "train.max_epochs=1", "trainer.log_every_n_steps=1"])
    return read_json(seed_dir(stage_config(["family=bahdanau"]), 0) / "run.json")["run_id"]


def test_a_run_on_a_tracking_server_records_what_a_local_run_records(
    mlflow_server, prepared, monkeypatch, one_torch_thread
):
    """Same small bahdanau run twice, to <project>/mlflow.db and to the server (read back over plain
    HTTP): the same params, tags, metric histories (seeded: identical values) and artifact files."""
    local_id = train_run()  # the project fixture points MLFLOW_TRACKING_URI at <project>/mlflow.db
    config_file = seed_dir(stage_config(["family=bahdanau"]), 0) / "config.yaml"
    config_text = config_file.read_text(encoding="utf-8")
    url, artifact_store = mlflow_server.ready(), mlflow_server.artifacts
    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    remote_id = train_run()

    # the local run, through the client on the sqlite store
    client = mlflow.MlflowClient(f"sqlite:///{prepared / 'mlflow.db'}")
    local = client.get_run(local_id)
    local_history = {
        k: [
            (m.step, m.value)
            for m in sorted(
                client.get_metric_history(local_id, k), key=lambda m: (m.step, m.timestamp)
            )
        ]
        for k in local.data.metrics
    }

    # the server's run, through its REST API only
    experiment = get(url, "/api/2.0/mlflow/experiments/get-by-name", experiment_name="translate")[
        "experiment"
    ]
    # the server's default, not a local path
    assert experiment["artifact_location"].startswith("mlflow-artifacts:/")
    found = post(
        url, "/api/2.0/mlflow/runs/search", {"experiment_ids": [experiment["experiment_id"]]}
    )["runs"]
    assert [r["info"]["run_id"] for r in found] == [remote_id]
    remote = get(url, "/api/2.0/mlflow/runs/get", run_id=remote_id)["run"]
    assert remote["info"]["status"] == local.info.status == "FINISHED"
    assert remote["info"]["run_name"] == local.info.run_name == "bahdanau-seed0"
    params = {p["key"]: p["value"] for p in remote["data"]["params"]}
    tags = {t["key"]: t["value"] for t in remote["data"]["tags"]}
    remote_history = {}
    for m in remote["data"]["metrics"]:
        history = get(
            url,
            "/api/2.0/mlflow/metrics/get-history",
            run_id=remote_id,
            metric_key=m["key"],
            max_results=1000,
        )["metrics"]
        # proto3 JSON omits step 0
        history.sort(key=lambda h: (int(h.get("step", 0)), int(h["timestamp"])))
        remote_history[m["key"]] = [(int(h.get("step", 0)), h["value"]) for h in history]

    assert params == local.data.params
    assert params["model.attn_dim"] == "16" and params["train.max_epochs"] == "1"
    # tracking.run_tags
    ours = {k: v for k, v in local.data.tags.items() if not k.startswith("mlflow.")}
    assert {k: tags.get(k) for k in ours} == ours and tags["mlflow.runName"] == local.data.tags[
        "mlflow.runName"
    ]
    assert (tags["family"], tags["seed"], tags["stage"]) == ("bahdanau", "0", "train")

    assert (
        remote_history.keys()
        == local_history.keys()
        >= {"train/loss", "val/loss", "val/bleu", *TIMING}
    )
    assert len(local_history["train/loss"]) > 1  # logged every step, not only the epoch's last
    for key, values in local_history.items():
        if key in TIMING:
            assert len(remote_history[key]) == len(values) == 1, key
        else:  # same seed, same data: identical values at identical steps
            assert remote_history[key] == values, key

    paths = remote_artifacts(url, remote_id)
    assert paths == local_artifacts(client, local_id) and "config.yaml" in paths
    # the artifact went through the server's proxy into --artifacts-destination, byte for byte
    stored = [p for p in artifact_store.rglob("config.yaml") if remote_id in p.parts]
    assert len(stored) == 1 and stored[0].read_text(encoding="utf-8") == config_text
    relative = remote["info"]["artifact_uri"].removeprefix("mlflow-artifacts:/").strip("/")
    download = f"{url}/api/2.0/mlflow-artifacts/artifacts/{relative}/config.yaml"
    with urllib.request.urlopen(download, timeout=30) as r:
        assert r.read().decode("utf-8") == config_text
    # nothing beside the local store
    assert not (prepared / "mlartifacts" / "translate" / remote_id).exists()


def test_a_pretrained_family_s_data_hash_names_its_encoder(project):
    """data_hash (a run's key, a study's name) covers the encoder a pretrained family starts from:
    another pretraining is other data, so a kept run or study is not taken for it."""
    from attention_lab.core.paths import pretrained_dir
    from attention_lab.core.tracking import data_hash

    cfg = stage_config(["task=classify", "family=bert"], tuned=False)
    encoder = pretrained_dir(cfg) / "encoder.safetensors"
    encoder.parent.mkdir(parents=True, exist_ok=True)
    encoder.write_bytes(b"one pretraining")
    first = data_hash(cfg)
    encoder.write_bytes(b"another pretraining")
    assert data_hash(cfg) != first
    # a family of its own: the encoder is not its data
    own = stage_config(["task=classify", "family=han"], tuned=False)
    before = data_hash(own)
    encoder.write_bytes(b"a third pretraining")
    assert not own.get("pretrained") and data_hash(own) == before
