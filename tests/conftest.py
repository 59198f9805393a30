"""Project test configuration.

* Detailed assertion messages inside the kit's own checks.
* The Postgres gate, shared by every directory: ``CHONGMING_TEST_POSTGRES``
  names the server; without it (or without the driver, or with the server
  unreachable) tests that ask for ``postgres_dsn`` skip with the reason shown,
  so absent Postgres evidence is a visible skip, never green. With
  ``CHONGMING_REQUIRE_POSTGRES=1`` (set by ``.ci/run``) each of those is a
  failure instead.
"""

from __future__ import annotations

import os

import pytest

pytest.register_assert_rewrite(
    "chongming_conformance.contract",
    "chongming_conformance.properties",
    "chongming_conformance.stateful",
    "chongming_conformance.oracle",
)

DSN_ENV = "CHONGMING_TEST_POSTGRES"
REQUIRE_ENV = "CHONGMING_REQUIRE_POSTGRES"


def postgres_required() -> bool:
    """True when CI demands the Postgres evidence (a skip would hide its absence)."""
    return os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0")


def _unavailable(reason: str) -> None:
    if postgres_required():
        pytest.fail(f"{reason} (and {REQUIRE_ENV}=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The DSN of a reachable server; skip (or fail when required) otherwise."""
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        _unavailable(f"Postgres tests need {DSN_ENV}=postgresql://user@host:5432/db")
    try:
        import psycopg
    except ImportError:
        _unavailable('psycopg is not installed: pip install "chongming-conformance[postgres]"')
        raise  # unreachable: _unavailable always raises
    try:
        with psycopg.connect(dsn, connect_timeout=10) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        _unavailable(f"Postgres at {DSN_ENV} is unreachable: {exc}")
    return dsn
