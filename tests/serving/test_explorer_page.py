"""The attention explorer page (serving/static) in a real headless Chromium against a live
`attention-lab serve`."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from attention_lab.serving.app import STATIC
from tests.serving.test_app import DOCUMENT, SENTENCE
from tests.tiny_models import canvas_png, export_tiny_models, photo_png

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]
# slow: it trains, exports or runs stages (`make test-fast` leaves it out)


def test_page_loads_nothing_from_outside():
    for path in STATIC.iterdir():
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(https?:)?//[\w.-]+\.\w+/", text), (
            f"{path.name} refers to an external resource"
        )
        assert "@import" not in text and "cdn" not in text.lower()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(base: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(
        base + path, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


@pytest.fixture(scope="module")
def server(tmp_path_factory, photo_export):
    """`attention-lab serve` on 127.0.0.1:<free port> over tiny exports (and a photo model,
    `photo`); stopped after the module."""
    root = export_tiny_models(tmp_path_factory.mktemp("models"))
    shutil.copytree(photo_export()[1], root / "photo" / "onnx")
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "serve.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "attention_lab.cli",
                "serve",
                "--models",
                str(root),
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if json.load(r)["models"] == 4:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"server did not start:\n{log.read_text()}")
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run_page(browser, base: str, model: str, text: str, ready: str, image: str | None = None):
    """Open the page, choose `model`, type `text` (or choose the file `image`), submit, and wait
    until element `ready` has text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(base + "/")
    wait = WebDriverWait(browser, 30)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#model option")) == 4)
    Select(browser.find_element(By.ID, "model")).select_by_value(model)
    if image is None:
        box = browser.find_element(By.ID, "text")
        box.clear()
        box.send_keys(text)
    else:
        browser.find_element(By.ID, "image").send_keys(image)
    browser.find_element(By.ID, "submit").click()
    wait.until(
        lambda d: (
            d.find_element(By.ID, ready).text.strip()
            or d.find_element(By.ID, "error").is_displayed()
        )
    )
    return wait


def test_translate_draws_one_heatmap_row_per_token(server, browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    run_page(browser, server, "bahdanau", SENTENCE, "translation")
    assert not browser.find_element(By.ID, "error").is_displayed()
    want = post(server, "/translate", {"model": "bahdanau", "text": SENTENCE, "beam": 1})
    assert browser.find_element(By.ID, "translation").text == want["translation"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#heatmap tr.heat-row")
    assert len(rows) == len(want["tokens"]) > 0
    assert [r.find_element(By.TAG_NAME, "th").text for r in rows] == want["tokens"]
    assert all(
        len(r.find_elements(By.CSS_SELECTOR, "td.cell")) == len(want["source_words"]) for r in rows
    )
    cell = rows[0].find_elements(By.CSS_SELECTOR, "td.cell")[1]
    ActionChains(browser).move_to_element(cell).perform()
    tip = browser.find_element(By.ID, "tooltip")
    assert tip.is_displayed()
    assert (
        tip.text
        == f"{want['tokens'][0]} ← {want['source_words'][1]}: {want['attention'][1][0]:.3f}"
    )
    shot = tmp_path / "explorer-translate.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 1000
    print(f"screenshot: {shot}")


def test_classify_highlights_words_and_sentences(server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    run_page(browser, server, "han", DOCUMENT, "label")
    want = post(server, "/classify", {"model": "han", "text": DOCUMENT})
    assert browser.find_element(By.ID, "label").text == want["label"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#probabilities .prob")) == 3
    sentences = browser.find_elements(By.CSS_SELECTOR, "#document .sentence")
    assert len(sentences) == len(want["sentences"]) == 3
    assert [s.find_element(By.CLASS_NAME, "weight").text for s in sentences] == [
        f"{w:.2f}" for w in want["sentence_weights"]
    ]
    words = browser.find_elements(By.CSS_SELECTOR, "#document .word")
    assert [w.text for w in words] == [w for s in want["sentences"] for w in s]
    assert [float(w.get_attribute("data-weight")) for w in words] == pytest.approx(
        [x for s in want["word_weights"] for x in s], abs=1e-6
    )
    browser.save_screenshot(str(tmp_path / "explorer-classify.png"))


def test_bad_input_shows_the_message(server, browser):
    from selenium.webdriver.common.by import By

    run_page(browser, server, "bahdanau", "   ", "translation")
    error = browser.find_element(By.ID, "error")
    assert error.is_displayed() and "text is empty" in error.text


def post_image(base: str, model: str, data: bytes, name: str = "canvas.png") -> dict:
    boundary = "attention-lab-test"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\n{model}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="beam"\r\n\r\n1\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="image"; filename="{name}"\r\n'
            "Content-Type: image/png\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    req = urllib.request.Request(
        base + "/caption", body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)


def test_caption_shows_the_caption_overlay_and_word_strip(server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    canvas = tmp_path / "canvas.png"
    canvas.write_bytes(canvas_png())
    wait = run_page(browser, server, "show_attend_tell", "", "caption", image=str(canvas))
    assert not browser.find_element(By.ID, "error").is_displayed()
    assert not browser.find_element(By.ID, "text").is_displayed()
    assert browser.find_element(By.ID, "image-hint").text == "64×16 pixels"
    want = post_image(server, "show_attend_tell", canvas.read_bytes())
    assert browser.find_element(By.ID, "caption").text == want["caption"] != ""
    overlay = browser.find_element(By.ID, "overlay")
    assert overlay.get_attribute("src") == want["overlay"]
    wait.until(
        lambda d: d.execute_script(
            "const i = arguments[0]; return i.complete && i.naturalWidth > 0;", overlay
        )
    )
    assert browser.execute_script("return arguments[0].naturalWidth;", overlay) == 70 + 3 * 64
    cards = browser.find_elements(By.CSS_SELECTOR, "#word-strip .word-card")
    assert [c.find_element(By.CLASS_NAME, "strip-word").text for c in cards] == want["words"]
    assert all(len(c.find_elements(By.CSS_SELECTOR, ".attn-grid div")) == 4 * 16 for c in cards)
    shot = tmp_path / "explorer-caption.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 1000
    print(f"screenshot: {shot}")


def test_wrong_size_image_shows_the_message(server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    wrong = tmp_path / "wide.png"
    wrong.write_bytes(canvas_png(size=(16, 80)))
    run_page(browser, server, "show_attend_tell", "", "caption", image=str(wrong))
    error = browser.find_element(By.ID, "error")
    assert (
        error.is_displayed() and "wide.png: the image is 80×16 pixels, expected 64×16" in error.text
    )


def test_photo_model_draws_each_words_attention_over_the_photo(server, browser, tmp_path):
    """A photo model: the page shows the photo once per word with that word's 7×7 attention drawn
    over it (a canvas stretched over the photo, its pixel alphas the weights scaled to their
    maximum), and names each region on hover."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    photo = tmp_path / "circle.jpg"
    photo.write_bytes(photo_png(300, 200, "JPEG"))
    wait = run_page(browser, server, "photo", "", "caption", image=str(photo))
    assert not browser.find_element(By.ID, "error").is_displayed()
    assert browser.find_element(By.ID, "image-hint").text == "a JPEG or PNG photo, any size"
    want = post_image(server, "photo", photo.read_bytes(), "circle.jpg")
    assert browser.find_element(By.ID, "caption").text == want["caption"] != ""
    assert not browser.find_element(By.ID, "overlay").is_displayed()
    cards = browser.find_elements(By.CSS_SELECTOR, "#word-strip .word-card")
    assert [c.find_element(By.CLASS_NAME, "strip-word").text for c in cards] == want["words"]
    for card, attention in zip(cards, want["attention"]):
        img, heat = (
            card.find_element(By.TAG_NAME, "img"),
            card.find_element(By.CSS_SELECTOR, "canvas.heat"),
        )
        wait.until(
            lambda d, img=img: (
                d.execute_script("return arguments[0].complete && arguments[0].naturalWidth;", img)
                == 300
            )
        )
        # the photo's aspect
        assert heat.size == img.size and img.size["width"] == 180 and img.size["height"] == 120
        alphas = browser.execute_script(
            "const c = arguments[0]; return Array.from(c.getContext('2d').getImageData(0, 0,"
            " c.width, c.height).data).filter((_, k) => k % 4 === 3);",
            heat,
        )
        a = np.array(attention).ravel()
        assert len(alphas) == 49 and int(np.argmax(alphas)) == int(np.argmax(a))
        np.testing.assert_allclose(alphas, np.round(200 * a / a.max()), atol=1)
    heat = cards[0].find_element(By.CSS_SELECTOR, "canvas.heat")
    # region (0, 0), near the top left
    ActionChains(browser).move_to_element_with_offset(heat, -80, -50).perform()
    tip = browser.find_element(By.ID, "tooltip")
    assert (
        tip.is_displayed()
        and tip.text == f"{want['words'][0]} ← region (0, 0): {want['attention'][0][0][0]:.3f}"
    )
    shot = tmp_path / "explorer-photo.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 1000
    print(f"screenshot: {shot}")


def test_a_bad_photo_shows_its_named_error(server, browser, tmp_path):
    from selenium.webdriver.common.by import By

    text = tmp_path / "notes.jpg"
    text.write_text("not a photo")
    run_page(browser, server, "photo", "", "caption", image=str(text))
    error = browser.find_element(By.ID, "error")
    assert (
        error.is_displayed()
        and "notes.jpg: not an image Pillow can read (expected JPEG or PNG)" in error.text
    )
