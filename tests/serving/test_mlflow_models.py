"""serving.mlflow_models: `attention-lab register` logs a pyfunc that `mlflow models serve` answers
over real HTTP as `attention-lab serve` does, without importing torch."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from attention_lab.serving.answers import search_defaults
from attention_lab.serving.app import create_app
from attention_lab.serving.mlflow_models import EXPORT, INPUT, input_example
from attention_lab.serving.registry import discover
from tests.processes import run_python
from tests.tiny_models import canvas_png, export_tiny_models, photo_png

pytestmark = pytest.mark.slow  # it trains, exports or runs stages: `make test-fast` leaves it out

NAMES = {"translate": "bahdanau", "classify": "han", "caption": "show_attend_tell"}
ANSWER = {"translate": "translation", "classify": "label", "caption": "caption"}
SENTENCES = ["the cat reads a book", "a dog runs"]
DOCUMENT = "The food was not good. We left early!\n\nThe room was lovely."
IMAGE = base64.b64encode(canvas_png()).decode("ascii")


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    """(tracking URI, models root): the tiny exports registered by `attention-lab register`."""
    from attention_lab.cli import main

    root = tmp_path_factory.mktemp("registry")
    models = export_tiny_models(root / "models")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", uri)
        patch.chdir(root)
        for name in NAMES.values():
            assert main(["register", "--model", str(models / name)]) == 0
    return uri, models


@pytest.fixture(scope="module")
def servers(registry, tmp_path_factory):
    """task -> the URL of `mlflow models serve -m models:/<name>/1` on loopback."""
    uri, _ = registry
    bin_dir = Path(sys.executable).parent
    # it runs `uvicorn`
    env = {
        **os.environ,
        "MLFLOW_TRACKING_URI": uri,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
    }
    logs = tmp_path_factory.mktemp("serve")
    started = {}
    for task, name in NAMES.items():
        port = free_port()
        log = open(logs / f"{task}.log", "wb")  # noqa: SIM115 (closed at teardown)
        command = [
            str(bin_dir / "mlflow"),
            "models",
            "serve",
            "-m",
            f"models:/{name}/1",
            "--env-manager",
            "local",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        proc = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        started[task] = (proc, log, f"http://127.0.0.1:{port}")
    try:
        for task, (proc, log, url) in started.items():
            wait_until_up(proc, url, logs / f"{task}.log")
        yield {task: url for task, (_, _, url) in started.items()}
    finally:
        for proc, log, _ in started.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)  # its own session: mlflow and its uvicorn
                proc.wait(timeout=30)
            log.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(proc: subprocess.Popen, url: str, log: Path, timeout: float = 180) -> None:
    """Until GET /ping answers 200; fails with the server's output if it exits or never answers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(
                f"mlflow models serve exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
            )
        try:
            with urllib.request.urlopen(f"{url}/ping", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"mlflow models serve did not answer in {timeout} s:\n{log.read_text()[-3000:]}")


def invoke(url: str, payload: dict) -> tuple[int, dict]:
    """POST /invocations with a JSON body -> (status, JSON answer)."""
    request = urllib.request.Request(
        f"{url}/invocations",
        json.dumps(payload).encode("utf-8"),
        {"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.fixture(scope="module")
def client(registry):
    """`attention-lab serve`'s app over the same exported folders."""
    with TestClient(create_app(discover(registry[1])[0])) as c:
        yield c


def served(client: TestClient, path: str, **kwargs) -> dict:
    """`attention-lab serve`'s answer, but its latency."""
    answer = client.post(path, **kwargs)
    assert answer.status_code == 200, answer.text
    return {k: v for k, v in answer.json().items() if k != "latency_ms"}


def test_register_logs_a_pyfunc_with_signature_and_example(registry):
    import mlflow
    from mlflow.models import get_model_info

    uri, models = registry
    mlflow.set_tracking_uri(uri)
    loaded = discover(models)[0]
    for task, name in NAMES.items():
        info = get_model_info(f"models:/{name}/1")
        assert set(info.flavors) == {"python_function"}
        assert info.metadata == {"task": task, "family": name}
        pyfunc = info.flavors["python_function"]
        assert pyfunc["config"] == {"name": name}
        assert pyfunc["model_code_path"].endswith("pyfunc_model.py")
        assert pyfunc["artifacts"][EXPORT]["path"] == "artifacts/onnx"
        assert info.signature.inputs.input_names() == [INPUT[task]]
        [column] = info.signature.inputs.to_dict()
        assert column["type"] == ("binary" if task == "caption" else "string")
        params = {p.name: p.default for p in info.signature.params or []}
        assert params == search_defaults(loaded[name])
        assert {"model", "family", ANSWER[task]} <= set(info.signature.outputs.input_names())
        example = mlflow.artifacts.load_dict(f"models:/{name}/1/serving_input_example.json")
        [[logged]] = example["dataframe_split"]["data"]
        want = input_example(loaded[name])[INPUT[task]][0]
        assert (base64.b64decode(logged) if task == "caption" else logged) == want
    version = mlflow.MlflowClient().get_model_version("han", "1")
    assert mlflow.get_run(version.run_id).data.tags["stage"] == "register"


@pytest.mark.parametrize(
    ("task", "payload", "path", "request_"),
    [
        (
            "translate",
            {"inputs": {"text": SENTENCES}},
            "/translate",
            [{"text": s} for s in SENTENCES],
        ),
        (
            "translate",
            {
                "dataframe_split": {"columns": ["text"], "data": [[SENTENCES[0]]]},
                "params": {"beam": 3, "len_penalty": 0.6},
            },
            "/translate",
            [{"text": SENTENCES[0], "beam": 3, "len_penalty": 0.6}],
        ),
        (
            "classify",
            {"dataframe_records": [{"text": DOCUMENT}]},
            "/classify",
            [{"text": DOCUMENT}],
        ),
        (
            "caption",
            {"dataframe_split": {"columns": ["image"], "data": [[IMAGE]]}},
            "/caption",
            [{}],
        ),
        (
            "caption",
            {"inputs": {"image": [IMAGE]}, "params": {"beam": 2}},
            "/caption",
            [{"beam": "2"}],
        ),
    ],
    ids=["translate-default", "translate-beam3", "classify", "caption-default", "caption-beam2"],
)
def test_mlflow_models_serve_answers_as_attention_lab_serve(
    servers, client, task, payload, path, request_
):
    status, answer = invoke(servers[task], payload)
    assert status == 200, answer
    model = NAMES[task]
    if task == "caption":
        upload = {"image": ("canvas.png", canvas_png(), "image/png")}
        want = [served(client, path, data={"model": model, **r}, files=upload) for r in request_]
    else:
        want = [served(client, path, json={"model": model, **r}) for r in request_]
    assert answer == {"predictions": want}


@pytest.mark.parametrize(
    ("task", "payload", "message"),
    [
        ("classify", {"inputs": {"text": [" \n "]}}, "empty document: no words to classify"),
        (
            "caption",
            {"inputs": {"image": [base64.b64encode(b"not a png").decode("ascii")]}},
            "image 0: not a readable image",
        ),
        ("translate", {"inputs": {"sentence": ["hi"]}}, "Model is missing inputs ['text']"),
        (
            "caption",
            {"inputs": {"image": [IMAGE]}, "params": {"beam": 99}},
            "beam must be in [1, 16], got 99",
        ),
    ],
    ids=["no-words", "not-an-image", "no-column", "beam-99"],
)
def test_a_refused_input_is_a_400_with_the_reason(servers, task, payload, message):
    status, answer = invoke(servers[task], payload)
    assert status == 400 and message in answer["message"], answer


def test_the_pyfunc_never_imports_torch(registry):
    uri, _ = registry
    proc = run_python(f"""
        import base64, json, sys
        import mlflow
        import pandas as pd
        mlflow.set_tracking_uri({uri!r})
        inputs = {{"bahdanau": {{"text": ["the cat"]}}, "han": {{"text": ["The room was lovely."]}},
                  "show_attend_tell": {{"image": [base64.b64decode({IMAGE!r})]}}}}
        answers = {{name: mlflow.pyfunc.load_model(f"models:/{{name}}/1")
                   .predict(pd.DataFrame(rows))[0] for name, rows in inputs.items()}}
        print(json.dumps({{"keys": {{n: sorted(a) for n, a in answers.items()}},
                          "heavy": [m for m in ("torch", "lightning") if m in sys.modules]}}))
    """)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["heavy"] == []
    assert {"translation", "attention"} <= set(report["keys"]["bahdanau"])
    assert {"label", "probabilities"} <= set(report["keys"]["han"])
    assert {"caption", "words", "overlay"} <= set(report["keys"]["show_attend_tell"])


def test_a_photo_model_answers_a_photo_as_serve_does(photo_export, tmp_path):
    import mlflow
    import pandas as pd

    from attention_lab.serving.mlflow_models import log_folder

    folder = photo_export()[1]
    version = log_folder(folder, "photo", f"sqlite:///{tmp_path / 'mlflow.db'}")
    pyfunc = mlflow.pyfunc.load_model(f"models:/photo/{version}")
    assert pyfunc.input_example["image"][0][:4] == b"\x89PNG"  # a black photo of the input size
    photo = photo_png(97, 301)
    [answer] = pyfunc.predict(pd.DataFrame({"image": [photo]}))
    with TestClient(create_app(discover(folder.parent.parent)[0])) as app:
        want = served(
            app,
            "/caption",
            data={"model": folder.parent.name},
            files={"image": ("photo.png", photo, "image/png")},
        )
    assert answer == {**want, "model": "photo"} and len(answer["words"]) == 4
