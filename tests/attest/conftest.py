"""Fixtures: the real reports, and a store package to attest.

The attested store is a copy of the memory reference store under a package name no
other test imports, so ``find_spec`` reads it from disk and a test may change its bytes.
"""

from __future__ import annotations

import itertools
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from attest_reports import MEMORY_STORE, report

_names = itertools.count()


@pytest.fixture
def memory_report() -> dict[str, Any]:
    """Catalogue 1.8, memory store: not proven (its XP clauses NOT VERIFIED)."""
    return report("kit-cat1.8-memory.json")


@pytest.fixture
def broken_report() -> dict[str, Any]:
    """Catalogue 1.8, TruncatedText: LENGTH-TEXT FAIL (a MUST clause)."""
    return report("kit-cat1.8-broken.json")


@pytest.fixture
def old_report() -> dict[str, Any]:
    """Catalogue 1.6 (an older kit), memory store."""
    return report("kit-cat1.6-memory.json")


@pytest.fixture
def store_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[], Path]:
    """Make a fresh copy of the memory store as package ``attested_N`` on sys.path; returns
    its directory (``<dir>.name`` is the module to name in a spec)."""

    def make() -> Path:
        name = f"attested_{next(_names)}_{tmp_path.name.replace('-', '_')}"
        package = tmp_path / "site" / name
        package.mkdir(parents=True)
        shutil.copy(MEMORY_STORE, package / "__init__.py")
        (package / "extra.txt").write_text("data shipped with the store\n")
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        assert name not in sys.modules
        return package

    return make
