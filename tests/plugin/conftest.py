"""Helpers for the plugin's dogfood tests: run pytest in a subprocess, as a third party would."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs below must see only the settings each test gives them."""
    for name in ("CHONGMING_STORE", "CHONGMING_SHARED_STORE", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(name, raising=False)
