"""Stress tests: make the helper modules importable by spawned workers, gate Postgres.

The directory is put on ``sys.path`` explicitly (not only by pytest's rootdir
insertion) because spawned workers inherit the parent's ``sys.path`` and must
import ``stress_stores`` by name to unpickle the broken stores' openers.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = str(Path(__file__).resolve().parent)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

DSN_ENV = "CHONGMING_TEST_POSTGRES"
REQUIRE_ENV = "CHONGMING_REQUIRE_POSTGRES"


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0"):
        pytest.fail(f"{reason} (and {REQUIRE_ENV}=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def stress_postgres_dsn() -> str:
    """A reachable server's DSN; skip visibly (or fail when required) otherwise."""
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        _unavailable(f"Postgres stress tests need {DSN_ENV}=postgresql://user@host:5432/db")
    try:
        import psycopg
    except ImportError:
        _unavailable('psycopg is not installed: pip install "chongming-conformance[postgres]"')
        raise
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        _unavailable(f"Postgres at {DSN_ENV} is unreachable: {exc}")
    return dsn
