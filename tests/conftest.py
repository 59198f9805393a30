"""Project test configuration.

* Detailed assertion messages inside the kit's own checks.
* The Postgres gate, shared by every directory: ``CHONGMING_TEST_POSTGRES``
  names the server; without it (or without the driver, or with the server
  unreachable) tests that ask for ``postgres_dsn`` skip with the reason shown,
  so absent Postgres evidence is a visible skip, never green. With
  ``CHONGMING_REQUIRE_POSTGRES=1`` (set by ``.ci/run``) each of those is a
  failure instead.
* The MariaDB gate, the same way: ``CHONGMING_TEST_MARIADB`` and
  ``CHONGMING_REQUIRE_MARIADB`` for tests that ask for ``mariadb_dsn``.
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
MARIADB_DSN_ENV = "CHONGMING_TEST_MARIADB"
MARIADB_REQUIRE_ENV = "CHONGMING_REQUIRE_MARIADB"


def postgres_required() -> bool:
    """True when CI demands the Postgres evidence (a skip would hide its absence)."""
    return os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0")


def mariadb_required() -> bool:
    """True when CI demands the MariaDB evidence (a skip would hide its absence)."""
    return os.environ.get(MARIADB_REQUIRE_ENV, "").strip() not in ("", "0")


def _unavailable(reason: str, *, required: bool | None = None, env: str = REQUIRE_ENV) -> None:
    if postgres_required() if required is None else required:
        pytest.fail(f"{reason} (and {env}=1 forbids skipping)", pytrace=False)
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


@pytest.fixture(scope="session")
def mariadb_dsn() -> str:
    """The DSN of a reachable MariaDB server; skip (or fail when required) otherwise."""

    def unavailable(reason: str) -> None:
        _unavailable(reason, required=mariadb_required(), env=MARIADB_REQUIRE_ENV)

    dsn = os.environ.get(MARIADB_DSN_ENV, "").strip()
    if not dsn:
        unavailable(f"MariaDB tests need {MARIADB_DSN_ENV}=mysql://user@host:3306/db")
    try:
        import pymysql

        from reference_stores.mariadb_schema import parse_dsn
    except ImportError:
        unavailable('PyMySQL is not installed: pip install "chongming-conformance[mariadb]"')
        raise  # unreachable: unavailable always raises
    try:
        conn = parse_dsn(dsn).connect()
        conn.close()
    except pymysql.Error as exc:
        unavailable(f"MariaDB at {MARIADB_DSN_ENV} is unreachable: {exc}")
    return dsn
