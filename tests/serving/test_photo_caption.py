"""POST /caption with a photo model (the whole photo path exported): photos of any size and format,
bodies over
--max-body but under --max-image-body, the same caption and attention as the captioner, bad photos
as 422 / 413."""

from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from attention_lab.caption.serve import OnnxCaptioner
from attention_lab.serving.app import ServeSettings, create_app
from attention_lab.serving.registry import discover
from tests.caption.test_photo_export import bad_photo
from tests.tiny_models import photo_png

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
# slow: it trains, exports or runs stages (`make test-fast` leaves it out)
MODEL = "show_attend_tell"


@pytest.fixture(scope="module")
def photo_client(photo_export):
    models, _ = discover(photo_export()[1].parent.parent)
    with TestClient(
        create_app(models, ServeSettings(max_body_bytes=2048, max_image_bytes=200_000))
    ) as c:
        yield c


def upload(data: bytes, name: str = "photo.jpg") -> dict:
    return {"files": {"image": (name, data, "image/jpeg")}, "data": {"model": MODEL}}


def test_models_say_it_takes_photos(photo_client):
    [info] = photo_client.get("/models").json()
    assert info["image_input"] == "photo" and "JPEG or PNG photo of any size" in info["input"]
    assert info["graphs"][0]["inputs"][0]["type"] == "tensor(uint8)"


@pytest.mark.parametrize(("size", "fmt"), [((640, 480), "JPEG"), ((97, 301), "PNG")])
def test_a_photo_of_any_size_is_captioned(photo_export, photo_client, size, fmt):
    data = photo_png(*size, fmt)
    if fmt == "PNG":  # noise: a body over --max-body (2048), under --max-image-body
        noisy = np.random.default_rng(0).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        buf = io.BytesIO()
        Image.fromarray(noisy).save(buf, format="PNG")
        data = buf.getvalue()
    assert len(data) > 2048
    got = photo_client.post("/caption", **upload(data))
    assert got.status_code == 200, got.text
    body = got.json()
    captioner = OnnxCaptioner(photo_export()[1])
    [want] = captioner.caption([captioner.read(data)])
    assert body["words"] == want.words and len(want.words) == 4 and body["grid"] == [7, 7]
    np.testing.assert_allclose(np.array(body["attention"]), want.attention, atol=1e-4)
    overlay = Image.open(io.BytesIO(base64.b64decode(body["overlay"].split(",", 1)[1])))
    assert overlay.size == (70 + 224, 4 * (224 + 4))


@pytest.mark.parametrize(
    ("kind", "status", "message"),
    [
        ("not-an-image", 422, "photo.jpg: not an image Pillow can read (expected JPEG or PNG)"),
        ("truncated", 422, "photo.jpg: truncated image"),
        ("zero", 422, "photo.jpg: not an image Pillow can read"),
        (
            "huge",
            422,
            (
                "photo.jpg: 1200×900 = 1,080,000 pixels, over the cap max_pixels (meta.json) ="
                " 1,000,000"
            ),
        ),
        ("empty", 422, "photo.jpg: empty file, expected a JPEG or PNG photo"),
        ("over-limit", 413, "over this server's limit of 200000 bytes (--max-image-body)"),
    ],
    ids=["not-an-image", "truncated", "0x0", "huge", "empty", "over-limit"],
)
def test_bad_photos_get_a_named_error(photo_client, kind, status, message):
    data = np.random.default_rng(1).bytes(300_000) if kind == "over-limit" else bad_photo(kind)
    got = photo_client.post("/caption", **upload(data))
    assert got.status_code == status and message in got.json()["detail"], got.text
