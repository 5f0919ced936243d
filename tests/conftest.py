"""Shared fixtures: the repo root, the optional test corpora, a browser, and a throw-away copy of
the project for stage runs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import yaml

from attention_lab.pipeline import scratch

ROOT = Path(__file__).resolve().parents[1]
# Optional real corpora (BBC News, Tatoeba English-Korean) in a folder beside the checkout; without
# it the tests that read them skip (CI has it).
SHARED_DATA = ROOT.parent / "shared" / "data"
SHARED_DATA_MISSING = (
    f"{SHARED_DATA} is missing: it holds the optional real test corpora (BBC News, Tatoeba "
    "English-Korean) that this test reads; without it the test is skipped"
)
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
# `make test` (REQUIRE_BROWSER=1) and CI need the browser: a missing one fails there, elsewhere its
# tests skip. Read at import, before the `project` fixture drops CI from the environment.
BROWSER_REQUIRED = any(
    os.environ.get(name, "").lower() not in ("", "0", "false", "no")
    for name in ("CI", "REQUIRE_BROWSER")
)
CHROME_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
    "--window-size=1200,1000",
]


@pytest.fixture
def one_torch_thread():
    """Tiny models: one intra-op thread, so OpenMP spin-waits do not stall when other processes
    share the cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def photo_export(tmp_path_factory):
    """photo_export(family="show_attend_tell") -> (torch path, onnx folder, parity) of
    tiny_models.export_photo_caption, exported once per session and family (the real
    EfficientNet-Lite0 export takes seconds)."""
    import torch

    from tests.tiny_models import export_photo_caption

    done: dict[str, tuple] = {}

    def get(family: str = "show_attend_tell") -> tuple:
        if family not in done:
            threads = torch.get_num_threads()
            torch.set_num_threads(1)
            try:
                done[family] = export_photo_caption(
                    tmp_path_factory.mktemp(f"photo-{family}"), family
                )
            finally:
                torch.set_num_threads(threads)
        return done[family]

    return get


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The folder of the optional test corpora; the test skips without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(SHARED_DATA_MISSING)
    return SHARED_DATA


@pytest.fixture(scope="module")
def browser():
    """Debian's chromium + chromedriver, headless and offline (Selenium never downloads a driver
    here). Without them the test skips, but fails under `make test` or CI (BROWSER_REQUIRED)."""
    if not (CHROMIUM and CHROMEDRIVER):
        missing = (
            "chromium and chromedriver are needed: `make browser` (apt-get install chromium"
            " chromium-driver)"
        )
        if BROWSER_REQUIRED:
            pytest.fail(missing)
        pytest.skip(f"{missing}; skipped outside `make test` and CI")
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
    """A copy of this checkout for a stage run (pipeline.scratch.copy_project): `profile`, and one
    seed (the tests' time); params.yaml keeps its comments and layout, as a user's does (tests edit
    them and check they are kept)."""
    return scratch.copy_project(dest, root=ROOT, profile=profile, seeds=[0])


def edit_params(project: Path, edit) -> None:
    """Apply `edit(params dict)` to the project's params.yaml."""
    path = project / "params.yaml"
    params = yaml.safe_load(path.read_text())
    edit(params)
    path.write_text(yaml.safe_dump(params, sort_keys=False))


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A tiny-profile copy of the project; the test runs with it as working directory."""
    dest = copy_project(tmp_path / "project")
    monkeypatch.chdir(dest)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{dest / 'mlflow.db'}")
    os.environ.pop("CI", None)
    return dest


# The longest files, longest first (minutes of one CI worker, 2026-11-26: 24 and 17; the next is
# under 6; the real ledgers' two pipelines, 2026-12-07: about 20 on a loaded 2-core machine).
LONGEST = ("e2e/test_pipeline.py", "e2e/test_user_corpora.py", "e2e/test_corpus_ledger.py")


def pytest_collection_modifyitems(items):
    """The longest files first, then the other end-to-end ones: `make test` hands whole files to two
    workers in this order (--no-loadscope-reorder; xdist's default order, most tests first, started
    both long files late on one worker)."""

    def rank(item) -> tuple[int, bool]:
        longest = next(
            (
                i
                for i, name in enumerate(LONGEST)
                if item.path.as_posix().endswith(f"/tests/{name}")
            ),
            len(LONGEST),
        )
        return longest, item.get_closest_marker("slow") is None

    items.sort(key=rank)
