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
* The factory guard (:func:`_factories_finished`): at the end of the session every
  ``make_store`` / ``make_shared_store`` generator must have finished, and no schema
  or database the reference factories made in this process may be left behind.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.util
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chongming_conformance.seam import reuse

pytest.register_assert_rewrite(
    "chongming_conformance.checking.contract",
    "chongming_conformance.checking.properties",
    "chongming_conformance.checking.stateful",
    "chongming_conformance.oracle",
)


def pytest_configure(config: pytest.Config) -> None:
    """Every kit module loaded before the first draw, as the plugin does for a store's run:
    hypothesis mixes the constants of loaded local modules into its draws, so without this a
    derandomized check drew other inputs depending on which test files ran before it in the
    process (tests/test_draws.py; src/chongming_conformance/plugin/draws.py)."""
    from chongming_conformance.plugin.draws import import_kit_modules

    import_kit_modules()


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


# -- the factory guard --------------------------------------------------------------------------
#: The names of the kit's factory seams: a generator of one holds a store and its teardown.
FACTORY_NAMES = frozenset({"make_store", "make_shared_store"})
#: The reference factories' name makers, wrapped for the session to learn what this process made.
_NAME_MAKERS = (
    ("postgres", "reference_stores.postgres", "_fresh_schema_name", "psycopg"),
    ("mariadb", "reference_stores.mariadb", "_fresh_database_name", "pymysql"),
)


def unfinished_factories() -> list[str]:
    """Every factory generator of this process that started and has not finished.

    One is a store whose teardown has not run: its schema or database stays until the
    interpreter exits, when the generator is finalised with module globals already torn
    down (the teardown then fails, and the schema is never dropped). A generator that is
    created but never started holds nothing, and one that nothing references any more is
    finalised -- its teardown run -- by the collection below, so neither is listed.
    """
    # The last failure's traceback, kept for post-mortem debugging (pytester's in-process
    # runs set it too), holds frames and so generators; nobody uses it after the tests.
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        with contextlib.suppress(AttributeError):
            delattr(sys, name)
    gc.collect()
    found = []
    for obj in gc.get_objects():
        if (inspect.isgenerator(obj) and obj.gi_code.co_name in FACTORY_NAMES
                and inspect.getgeneratorstate(obj) == inspect.GEN_SUSPENDED):
            frame = obj.gi_frame
            found.append(f"{obj.gi_code.co_qualname}() suspended at "
                         f"{frame.f_code.co_filename}:{frame.f_lineno}")
    return sorted(found)


def _close_kept_stores() -> None:
    """Close the stores the kit's reuse seam keeps for this process, as a kit run does last.

    ``StoreContract`` subclasses with a ``reset_function`` keep their stores open between
    tests (``chongming_conformance.seam.reuse``); the plugin closes them at session finish, but
    only in a kit run (``--chongming-store``), which this project's own runs are not --
    so nothing else ever would. ``shutdown()`` per reuser, not ``reuse.shutdown_all()``:
    the registry and its counts stay, for a kit run's report to read afterwards.
    """
    for reuser in list(reuse._REUSERS.values()):
        reuser.shutdown()


def _recording(made: list[str], make: Callable[..., str]) -> Callable[..., str]:
    def recorded(*args: Any, **kwargs: Any) -> str:
        name = make(*args, **kwargs)
        made.append(name)
        return name

    return recorded


def _left_behind(made: dict[str, list[str]]) -> list[str]:
    """The schemas (Postgres) and databases (MariaDB) of ``made`` that still exist; dropped.

    Only names this process's reference factories made are looked at: other sessions
    (xdist workers, other people's runs) share the server and keep live ones of their own.
    """
    found: list[str] = []
    pg_dsn = os.environ.get(DSN_ENV, "").strip()
    if made["postgres"] and pg_dsn:
        import psycopg
        from psycopg import sql

        with psycopg.connect(pg_dsn, autocommit=True, connect_timeout=10) as conn:
            rows = conn.execute("SELECT nspname FROM pg_namespace WHERE nspname = ANY(%s)",
                                [made["postgres"]]).fetchall()
            for (name,) in rows:
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE")
                             .format(sql.Identifier(name)))
                found.append(f"PostgreSQL schema {name} (dropped now)")
    my_dsn = os.environ.get(MARIADB_DSN_ENV, "").strip()
    if made["mariadb"] and my_dsn:
        from reference_stores import mariadb_schema

        conn = mariadb_schema.parse_dsn(my_dsn).connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT schema_name FROM information_schema.schemata "
                            "WHERE schema_name IN %s", [tuple(made["mariadb"])])
                for (name,) in cur.fetchall():
                    cur.execute(f"DROP DATABASE IF EXISTS {mariadb_schema.quote_ident(name)}")
                    found.append(f"MariaDB database {name} (dropped now)")
        finally:
            conn.close()
    return found


@pytest.fixture(scope="session", autouse=True)
def _factories_finished() -> Iterator[None]:
    """Fail the session when a store factory was left open, or its schema left behind.

    A test that calls ``next(make_store())`` and never closes the generator leaves the
    store's teardown to the interpreter's exit, where it fails and the schema stays in the
    test database (issue 33). Autouse and session-scoped, so it is set up first and torn
    down last, after every other fixture; the kit's kept stores are closed first (they are
    the kit's, not a leak). Under xdist each worker checks its own process, and the
    failure is an error of the worker's last test, which the controller reports.
    """
    made: dict[str, list[str]] = {"postgres": [], "mariadb": []}
    problems: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        for kind, module_name, attr, driver in _NAME_MAKERS:
            if importlib.util.find_spec(driver) is None:
                continue
            module = importlib.import_module(module_name)
            patch.setattr(module, attr, _recording(made[kind], getattr(module, attr)))
        yield
        try:
            _close_kept_stores()
        except Exception as exc:  # the checks below still run: they say what it left
            problems.append(f"closing the kit's kept stores raised {type(exc).__name__}: {exc}")
    problems += [f"a factory generator was left unfinished: {g}" for g in unfinished_factories()]
    problems += [f"left behind by this session: {n}" for n in _left_behind(made)]
    if problems:
        pytest.fail("this session left store factories or their schemas behind (close every "
                    "factory generator: contextlib.closing, or try/finally gen.close()):\n  "
                    + "\n  ".join(problems), pytrace=False)
