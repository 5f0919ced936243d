"""serving.app + registry + mlflow_models: the HTTP service on tiny exported models (FastAPI
TestClient)."""

from __future__ import annotations

import base64
import hashlib
import io
import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from attention_lab.serving.app import ServeSettings, create_app
from attention_lab.serving.registry import discover, load_model, model_folders
from tests.processes import run_python
from tests.tiny_models import CANVAS, DIGIT_WORDS, LABELS, canvas_png, export_tiny_models

SENTENCE = "the cat reads a book"
DOCUMENT = "The food was not good. We left early!\n\nThe room was lovely."
ENDPOINTS = ["/health", "/models", "/translate", "/classify", "/caption"]
CAPTIONER = "show_attend_tell"

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
# slow: it trains, exports or runs stages (`make test-fast` leaves it out)


@pytest.fixture(scope="module")
def models_root(tmp_path_factory):
    """models/ with bahdanau/onnx (translate), han/onnx (classify), show_attend_tell/onnx (caption)
    and a folder of a task no endpoint serves."""
    root = export_tiny_models(tmp_path_factory.mktemp("models"))
    (root / "det" / "onnx").mkdir(parents=True)
    (root / "det" / "onnx" / "meta.json").write_text(
        json.dumps({"task": "detect", "family": "yolo"})
    )
    return root


@pytest.fixture(scope="module")
def client(models_root):
    models, skipped = discover(models_root)
    with TestClient(
        create_app(
            models, ServeSettings(max_chars=200, max_body_bytes=2048, max_image_bytes=4096), skipped
        )
    ) as c:
        yield c


def test_discovery_skips_tasks_without_endpoint(models_root, client):
    assert set(model_folders(models_root)) == {"bahdanau", "han", CAPTIONER, "det"}
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["models"] == 3
    assert health["tasks"] == ["caption", "classify", "translate"]
    [skipped] = health["skipped"]
    assert (
        skipped["path"].endswith("det/onnx")
        and "'detect' has no serving endpoint" in skipped["reason"]
    )
    assert "(served: caption, classify, translate)" in skipped["reason"]
    assert model_folders(models_root / "han") == {"han": models_root / "han" / "onnx"}
    assert model_folders(models_root / "han" / "onnx") == {"han": models_root / "han" / "onnx"}


def test_models_lists_task_io_and_hashes(models_root, client):
    listed = {m["name"]: m for m in client.get("/models").json()}
    assert set(listed) == {"bahdanau", "han", CAPTIONER}
    tr, cl = listed["bahdanau"], listed["han"]
    assert (tr["task"], tr["family"], cl["task"], cl["family"]) == (
        "translate",
        "bahdanau",
        "classify",
        "han",
    )
    assert [g["file"] for g in tr["graphs"]] == ["encoder.onnx", "decoder_step.onnx"]
    assert [i["name"] for i in tr["graphs"][0]["inputs"]] == ["src", "src_mask"]
    assert [o["name"] for o in cl["graphs"][0]["outputs"]] == ["logits", "word", "sentence"]
    assert (
        cl["labels"] == LABELS
        and tr["labels"] is None
        and tr["has_attention"]
        and cl["has_attention"]
    )
    folder = models_root / "bahdanau" / "onnx"
    assert tr["files"] == {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
    }
    assert {"encoder.onnx.data", "meta.json", "tokenizer.json"} <= set(tr["files"])
    cap = listed[CAPTIONER]
    assert (cap["task"], cap["family"], cap["labels"], cap["has_attention"]) == (
        "caption",
        CAPTIONER,
        None,
        True,
    )
    assert [g["file"] for g in cap["graphs"]] == ["encoder.onnx", "decoder_step.onnx"]
    assert [i["name"] for i in cap["graphs"][0]["inputs"]] == ["image"]
    assert [o["name"] for o in cap["graphs"][1]["outputs"]][-1] == "attn"
    assert "canvas size" in cap["input"] and "overlay PNG" in cap["output"]
    folder = models_root / CAPTIONER / "onnx"
    assert cap["files"] == {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())
    }
    assert {"encoder.onnx", "decoder_step.onnx", "meta.json", "tokenizer.json"} <= set(cap["files"])


@pytest.mark.parametrize("beam", [1, 3])
def test_translate_matches_the_translator(models_root, client, beam):
    from attention_lab.translate.serve import OnnxTranslator

    got = client.post("/translate", json={"model": "bahdanau", "text": SENTENCE, "beam": beam})
    assert got.status_code == 200, got.text
    body = got.json()
    [want] = OnnxTranslator(models_root / "bahdanau" / "onnx").translate([SENTENCE], beam=beam)
    assert (
        body["tokens"] == want.tokens
        and body["translation"] == want.text
        and len(body["tokens"]) > 0
    )
    assert (
        body["source_words"] == SENTENCE.split() and body["beam"] == beam and body["latency_ms"] > 0
    )
    attn = np.array(body["attention"])
    assert attn.shape == (5, len(body["tokens"]))
    # each token's weights over the source words
    np.testing.assert_allclose(attn.sum(0), 1.0, atol=2e-3)


def test_translate_defaults_to_the_exported_beam(client):
    body = client.post("/translate", json={"model": "bahdanau", "text": SENTENCE}).json()
    assert body["beam"] == 2  # tiny_models exports beam=2


def test_classify_returns_label_and_attention(models_root, client):
    from attention_lab.classify.serve import OnnxClassifier

    got = client.post("/classify", json={"model": "han", "text": DOCUMENT})
    assert got.status_code == 200, got.text
    body = got.json()
    [want] = OnnxClassifier(models_root / "han" / "onnx").classify([DOCUMENT])
    assert body["label"] == want.label in LABELS and body["sentences"] == want.sentences
    assert body["probabilities"] == pytest.approx(want.probabilities, abs=1e-6)
    assert sum(body["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
    assert len(body["sentence_weights"]) == 3 and sum(body["sentence_weights"]) == pytest.approx(
        1.0, abs=1e-4
    )
    assert [len(w) for w in body["word_weights"]] == [len(s) for s in body["sentences"]]
    assert body["has_attention"] and body["family"] == "han"


@pytest.mark.parametrize(
    ("path", "kwargs", "status", "message"),
    [
        (
            "/translate",
            {
                "content": b'{"model": "bahdanau", "text": ',
                "headers": {"content-type": "application/json"},
            },
            422,
            "JSON decode error",
        ),
        (
            "/translate",
            {"content": b"\xff\xfe{}", "headers": {"content-type": "application/json"}},
            422,
            (
                "request body is not UTF-8: byte 0xff at offset 0 (invalid start byte); send JSON"
                " encoded as UTF-8"
            ),
        ),
        (
            "/translate",
            {
                "content": b'{"model": "bahdanau", "text": "caf\xe9"}',
                "headers": {"content-type": "application/json"},
            },
            422,
            "request body is not UTF-8: byte 0xe9 at offset 34",
        ),
        (
            "/translate",
            {
                "content": b'{"model": "bahdanau", "text": "\\ud800 cat"}',
                "headers": {"content-type": "application/json"},
            },
            422,
            "unable to parse raw data as a unicode string",
        ),
        (
            "/classify",
            {
                "content": b'{"model": "han", "text": "a \\udc80."}',
                "headers": {"content-type": "application/json"},
            },
            422,
            "unable to parse raw data as a unicode string",
        ),
        (
            "/translate",
            {"json": {"model": "bahdanau", "text": "hi", "len_penalty": -1}},
            422,
            "greater than or equal to 0",
        ),
        (
            "/translate",
            {"json": {"model": "bahdanau", "text": "hi", "len_penalty": "nan"}},
            422,
            "finite number",
        ),
        ("/translate", {"json": {"model": "", "text": "hi"}}, 422, "at least 1 character"),
        ("/health", {}, 405, "Method Not Allowed"),
        ("/nope", {"json": {}}, 404, "Not Found"),
        ("/translate", {}, 422, "Field required"),
        ("/translate", {"json": ["not", "an", "object"]}, 422, "valid dictionary"),
        ("/translate", {"json": {"model": "bahdanau", "text": 42}}, 422, "valid string"),
        (
            "/translate",
            {"json": {"model": "bahdanau", "text": "hi", "beam": "wide"}},
            422,
            "valid integer",
        ),
        (
            "/translate",
            {"json": {"model": "bahdanau", "text": "hi", "beam": 0}},
            422,
            "greater than or equal to 1",
        ),
        (
            "/translate",
            {"json": {"model": "bahdanau", "text": "hi", "beam": 99}},
            422,
            "less than or equal to 16",
        ),
        (
            "/translate",
            {"json": {"model": "bahdanau", "text": "hi", "temperature": 2}},
            422,
            "Extra inputs",
        ),
        ("/translate", {"json": {"model": "bahdanau"}}, 422, "Field required"),
        ("/translate", {"json": {"model": "bahdanau", "text": ""}}, 422, "at least 1 character"),
        ("/classify", {"json": {"model": "han", "text": " \n\t "}}, 422, "text is empty"),
        (
            "/translate",
            {"json": {"model": "bahdanau", "text": "word " * 50}},
            422,
            "at most 200 (--max-chars)",
        ),
        (
            "/translate",
            {"json": {"model": "nope", "text": "hi"}},
            404,
            "unknown model 'nope'; served: bahdanau, han, show_attend_tell",
        ),
        (
            "/translate",
            {"json": {"model": CAPTIONER, "text": "hi"}},
            422,
            "a caption model; use POST /caption",
        ),
        (
            "/classify",
            {"json": {"model": "bahdanau", "text": "hi"}},
            422,
            "a translate model; use POST /translate",
        ),
        (
            "/translate",
            {"json": {"model": "han", "text": "hi"}},
            422,
            "a classify model; use POST /classify",
        ),
        (
            "/translate",
            {"json": {"model": "bahdanau", "text": "x" * 3000}},
            413,
            "over this server's limit of 2048",
        ),
        (
            "/translate",
            {"content": b"1", "headers": {"content-length": "abc"}},
            400,
            "bad Content-Length",
        ),
        (
            "/translate",
            {"content": b"x", "headers": {"content-type": "text/plain"}},
            422,
            "valid dictionary",
        ),
    ],
)
def test_bad_requests_get_4xx_with_a_message(client, path, kwargs, status, message):
    got = client.post(path, **kwargs)
    assert got.status_code == status, got.text
    detail = got.json()["detail"]
    text = detail if isinstance(detail, str) else " ".join(d["msg"] for d in detail)
    assert text and message in text


def upload(data: bytes, name: str = "canvas.png", **fields) -> dict:
    return {"files": {"image": (name, data, "image/png")}, "data": {"model": CAPTIONER, **fields}}


def png(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(array).save(buf, format="PNG")
    return buf.getvalue()


@pytest.mark.parametrize("beam", [None, 1, 3])
def test_caption_matches_the_captioner(models_root, client, beam):
    from attention_lab.caption.serve import OnnxCaptioner, overlay

    data = canvas_png()
    got = client.post("/caption", **upload(data, **({} if beam is None else {"beam": str(beam)})))
    assert got.status_code == 200, got.text
    body = got.json()
    captioner = OnnxCaptioner(models_root / CAPTIONER / "onnx")
    image = captioner.read(data)
    [want] = captioner.caption([image], beam=beam)
    assert body["words"] == want.words and body["caption"] == want.text == " ".join(want.words)
    assert len(body["words"]) == 5 and set(body["words"]) <= set(DIGIT_WORDS)
    assert (
        body["model"] == body["family"] == CAPTIONER
        and body["has_attention"]
        and body["grid"] == [4, 16]
    )
    assert body["beam"] == (beam or 1) and body["score"] == pytest.approx(want.score, abs=1e-5)
    assert body["latency_ms"] > 0
    attn = np.array(body["attention"])
    assert attn.shape == (5, 4, 16)
    np.testing.assert_allclose(attn, want.attention, atol=1e-4)
    # each word's weights over the grid
    np.testing.assert_allclose(attn.sum((1, 2)), 1.0, atol=2e-3)
    prefix = "data:image/png;base64,"
    assert body["overlay"].startswith(prefix)
    picture = Image.open(io.BytesIO(base64.b64decode(body["overlay"][len(prefix) :])))
    assert picture.format == "PNG"
    assert (
        picture.size
        == overlay(image, want.words, want.attention).size
        == (70 + 3 * CANVAS[1], 5 * (3 * CANVAS[0] + 4))
    )


@pytest.mark.parametrize(
    ("kwargs", "status", "message"),
    [
        (upload(b""), 422, "canvas.png: empty file, expected a 64×16 image"),
        (upload(b"not an image at all", "notes.png"), 422, "notes.png: not a readable image"),
        (
            upload(png(np.zeros((20, 64), np.uint8)), "tall.png"),
            422,
            "tall.png: the image is 64×20 pixels, expected 64×16",
        ),
        (
            upload(png(np.zeros((16, 64, 3), np.uint8))[:60], "cut.png"),
            422,
            "cut.png: not a readable image",
        ),
        ({"data": {"model": CAPTIONER}}, 422, "Field required"),
        ({"files": {"image": ("canvas.png", canvas_png(), "image/png")}}, 422, "Field required"),
        (upload(canvas_png(), beam="0"), 422, "greater than or equal to 1"),
        (upload(canvas_png(), beam="wide"), 422, "valid integer"),
        (upload(canvas_png(), model="nope"), 404, "unknown model 'nope'"),
        (upload(canvas_png(), model="bahdanau"), 422, "a translate model; use POST /translate"),
        (upload(canvas_png(), model="han"), 422, "a classify model; use POST /classify"),
        (
            upload(png(np.random.default_rng(0).integers(0, 256, (64, 64), dtype=np.uint8))),
            413,
            "over this server's limit of 4096 bytes (--max-image-body)",
        ),
        ({"json": {"model": CAPTIONER, "image": "canvas.png"}}, 422, "Field required"),
    ],
    ids=[
        "empty",
        "not-an-image",
        "wrong-size",
        "truncated",
        "no-image",
        "no-model",
        "beam-0",
        "beam-word",
        "unknown-model",
        "translate-model",
        "classify-model",
        "too-big",
        "json-body",
    ],
)
def test_bad_caption_uploads_get_4xx_with_a_message(client, kwargs, status, message):
    got = client.post("/caption", **kwargs)
    assert got.status_code == status, got.text
    detail = got.json()["detail"]
    text = detail if isinstance(detail, str) else " ".join(d["msg"] for d in detail)
    assert text and message in text, text


@pytest.mark.parametrize(
    ("path", "kind", "head", "message"),
    [
        (
            "/translate",
            "application/json",
            b'{"model": "bahdanau", "text": "',
            "limit of 2048 bytes (--max-body)",
        ),
        (
            "/caption",
            "multipart/form-data; boundary=b",
            b'--b\r\nContent-Disposition: form-data; name="image"; filename="c.png"\r\n\r\n',
            "limit of 4096 bytes (--max-image-body)",
        ),
    ],
)
def test_streamed_body_over_the_limit_is_refused(client, path, kind, head, message):
    """A chunked body (no Content-Length) gets 413 once the bytes read pass the limit."""

    def chunks():
        yield head
        for _ in range(12):
            yield b"a" * 400

    got = client.post(path, content=chunks(), headers={"content-type": kind})
    assert "content-length" not in got.request.headers
    assert got.request.headers["transfer-encoding"] == "chunked"
    assert got.status_code == 413 and message in got.json()["detail"], got.text


def test_openapi_lists_endpoints_and_schemas(client):
    spec = client.get("/openapi.json").json()
    assert set(ENDPOINTS) <= set(spec["paths"]) and "/" not in spec["paths"]
    schemas = spec["components"]["schemas"]
    for name in [
        "TranslateRequest",
        "TranslateResponse",
        "ClassifyRequest",
        "ClassifyResponse",
        "CaptionResponse",
        "ModelInfo",
        "Health",
    ]:
        assert name in schemas, name
    post = spec["paths"]["/translate"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/TranslateRequest"
    )
    assert post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/TranslateResponse"
    )
    assert {"404", "413", "422"} <= set(post["responses"])
    assert set(schemas["TranslateResponse"]["properties"]) >= {
        "tokens",
        "translation",
        "attention",
        "latency_ms",
    }
    assert set(schemas["ClassifyResponse"]["properties"]) >= {
        "label",
        "probabilities",
        "word_weights",
        "sentence_weights",
    }
    post = spec["paths"]["/caption"]["post"]
    form = post["requestBody"]["content"]["multipart/form-data"]["schema"]["$ref"].rsplit("/", 1)[
        -1
    ]
    assert (
        set(schemas[form]["required"]) == {"image", "model"}
        and "beam" in schemas[form]["properties"]
    )
    assert post["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/CaptionResponse"
    )
    assert {"404", "413", "422"} <= set(post["responses"])
    assert set(schemas["CaptionResponse"]["properties"]) >= {
        "caption",
        "words",
        "attention",
        "overlay",
        "latency_ms",
    }


def test_explorer_page_and_static_files(client):
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert 'src="/static/explorer.js"' in page.text
    assert client.get("/static/explorer.js").status_code == 200
    assert client.get("/static/explorer.css").status_code == 200
    assert client.get("/static/missing.js").status_code == 404


def test_serving_path_never_imports_torch(models_root):
    proc = run_python(f"""
        import json, sys
        from fastapi.testclient import TestClient
        import attention_lab.cli
        from attention_lab.serving.app import create_app
        from attention_lab.serving.registry import discover
        client = TestClient(create_app(discover({str(models_root)!r})[0]))
        image = {{"image": ("c.png", {canvas_png()!r}, "image/png")}}
        review = {{"model": "han", "text": "The room was lovely."}}
        codes = [
            client.post("/translate", json={{"model": "bahdanau", "text": "the cat"}}).status_code,
            client.post("/classify", json=review).status_code,
            client.post("/caption", data={{"model": {CAPTIONER!r}}}, files=image).status_code,
            client.get("/").status_code,
        ]
        heavy = [m for m in ("torch", "lightning") if m in sys.modules]
        print(json.dumps({{"codes": codes, "heavy": heavy}}))
    """)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report == {"codes": [200, 200, 200, 200], "heavy": []}


def test_mlflow_registry_round_trip(models_root, tmp_path, monkeypatch):
    from attention_lab.cli import main
    from attention_lab.serving.mlflow_models import fetch_folder

    monkeypatch.chdir(tmp_path)  # anything written to the working directory lands here
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    for family in ("bahdanau", "han"):
        assert main(["register", "--model", str(models_root / family)]) == 0
    # version 2
    assert main(["register", "--model", str(models_root / "han" / "onnx"), "--name", "han"]) == 0
    assert not (tmp_path / "mlruns").exists() and (tmp_path / "mlartifacts" / "registry").is_dir()
    name, source, folder = fetch_folder("bahdanau", tmp_path / "dl1", uri)
    assert (name, source) == ("bahdanau", "models:/bahdanau/latest")
    served = load_model(folder, name, source=source)
    original = load_model(models_root / "bahdanau" / "onnx", "bahdanau")
    # byte-identical graphs and tokenizer
    assert served.files == original.files and served.task == "translate"
    _, source, folder = fetch_folder("han/2", tmp_path / "dl2", uri)
    han = load_model(folder, "han", source=source)
    app = TestClient(create_app({"bahdanau": served, "han": han}))
    assert [m["source"] for m in app.get("/models").json()] == [
        "models:/bahdanau/latest",
        "models:/han/2",
    ]
    got = app.post("/translate", json={"model": "bahdanau", "text": SENTENCE, "beam": 1}).json()
    want = original.runner.translate([SENTENCE], beam=1)[0]
    assert got["tokens"] == want.tokens
    assert app.post("/classify", json={"model": "han", "text": DOCUMENT}).status_code == 200
    with pytest.raises(ValueError, match="Registered Model with name=nope not found"):
        fetch_folder("nope", tmp_path / "dl3", uri)
    started = {}
    monkeypatch.setattr("uvicorn.run", lambda app, **kw: started.update(app=app, **kw))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    # name taken by a folder
    assert main(["serve", "--models", str(models_root), "--registry-model", "han/1"]) == 2
    assert (
        main(
            [
                "serve",
                "--models",
                str(tmp_path / "none"),
                "--registry-model",
                "han/1",
                "--port",
                "8123",
            ]
        )
        == 0
    )
    assert not any(scratch.iterdir())  # the fetched copies are removed when the server stops
    # loopback unless --host says otherwise
    assert (started["host"], started["port"]) == ("127.0.0.1", 8123)
    [listed] = TestClient(started["app"]).get("/models").json()
    assert (
        listed["source"] == "models:/han/1"
        and listed["files"] == load_model(models_root / "han" / "onnx", "han").files
    )
