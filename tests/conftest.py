"""Shared fixtures: the repo root, ../shared/data, and a throw-away copy of the project for stage runs."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
CHROME_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                "--disable-extensions", "--disable-background-networking", "--window-size=1200,1000"]


@pytest.fixture
def one_torch_thread():
    """Tiny models: one intra-op thread, so OpenMP spin-waits do not stall when other processes share the cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def photo_export(tmp_path_factory):
    """photo_export(family="show_attend_tell") -> (torch path, onnx folder, parity) of tiny_models.export_photo_caption,
    exported once per session and family (the real EfficientNet-Lite0 export takes seconds)."""
    import torch

    from tests.tiny_models import export_photo_caption

    done: dict[str, tuple] = {}

    def get(family: str = "show_attend_tell") -> tuple:
        if family not in done:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                done[family] = export_photo_caption(tmp_path_factory.mktemp(f"photo-{family}"), family)
            finally:
                torch.set_num_threads(threads)
        return done[family]

    return get


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"{SHARED_DATA} is missing: the tests need ../shared/data beside the repository")
    return SHARED_DATA


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium + chromedriver, headless and offline (Selenium never downloads a driver here)."""
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.fail("chromium and chromedriver are needed: `make browser` (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


def copy_project(dest: Path, profile: str = "tiny") -> Path:
    """Copy what the pipeline needs (no data, models, .git) into `dest` and select `profile` in params.yaml."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("conf", "src", "dvc.yaml", "params.yaml", "pyproject.toml", ".dvcignore", ".gitignore"):
        src = ROOT / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / name)
    params = (dest / "params.yaml").read_text().replace("profile: quick", f"profile: {profile}", 1)
    params = re.sub(r"^seeds: \[[0-9, ]*\]", "seeds: [0]", params, count=1, flags=re.MULTILINE)  # one seed: tests' time
    (dest / "params.yaml").write_text(params)
    return dest


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A tiny-profile copy of the project; the test runs with it as working directory."""
    dest = copy_project(tmp_path / "project")
    monkeypatch.chdir(dest)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{dest / 'mlflow.db'}")
    os.environ.pop("CI", None)
    return dest


# The longest files, longest first (minutes of one CI worker, 2026-11-26: 24 and 17; the next is under 6).
LONGEST = ("e2e/test_pipeline.py", "e2e/test_user_corpora.py")


def pytest_collection_modifyitems(items):
    """The longest files first, then the other end-to-end ones: `make test` hands whole files to two workers in this
    order (--no-loadscope-reorder; xdist's default order, most tests first, started both long files late on one worker)."""
    def rank(item) -> tuple[int, bool]:
        longest = next((i for i, name in enumerate(LONGEST) if item.path.as_posix().endswith(f"/tests/{name}")),
                       len(LONGEST))
        return longest, item.get_closest_marker("slow") is None

    items.sort(key=rank)
