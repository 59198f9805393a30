"""A real browser for the HTML report's tests: Debian's Chromium driven by Selenium.

Nothing here downloads a browser or a driver: the executables are the system's
(``/usr/bin/chromium``, ``/usr/bin/chromedriver``, or ``CHONGMING_CHROMIUM`` and
``CHONGMING_CHROMEDRIVER``), handed to Selenium explicitly so that its driver manager
never looks for one on the network. Without them (or without the ``selenium`` package of
the ``dev`` extra) every browser test is skipped with the reason; ``.ci/run`` installs
both and sets ``CHONGMING_REQUIRE_BROWSER=1``, which turns that skip into a failure.

Screenshots go to ``CHONGMING_ARTIFACTS`` (``.ci/run`` sets it and lists what is there)
or the test's temporary directory.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The broken stores the tests draw live beside the stress tests; spawned workers import
# them by name, so the directory goes on sys.path (as tests/stress/conftest.py does).
STRESS = str(Path(__file__).resolve().parents[1] / "stress")
if STRESS not in sys.path:
    sys.path.insert(0, STRESS)

REQUIRE_ENV = "CHONGMING_REQUIRE_BROWSER"


def _executable(env: str, name: str) -> str | None:
    return os.environ.get(env) or shutil.which(name) or (
        f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None)


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0"):
        pytest.fail(f"{reason} (and {REQUIRE_ENV}=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """A headless Chromium session (one per test process)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _unavailable("the browser tests need selenium: pip install -e '.[dev]'")
        raise  # unreachable
    chromium = _executable("CHONGMING_CHROMIUM", "chromium")
    driver = _executable("CHONGMING_CHROMEDRIVER", "chromedriver")
    if chromium is None or driver is None:
        _unavailable("the browser tests need Debian's chromium and chromium-driver "
                     "(apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    session = webdriver.Chrome(service=Service(executable_path=str(driver)), options=options)
    session.set_page_load_timeout(60)
    try:
        yield session
    finally:
        session.quit()


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    """Where a test keeps what CI should show (screenshots)."""
    where = os.environ.get("CHONGMING_ARTIFACTS")
    path = Path(where) if where else tmp_path
    path.mkdir(parents=True, exist_ok=True)
    return path
