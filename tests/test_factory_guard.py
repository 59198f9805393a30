"""The factory guard of tests/conftest.py fails a session that leaves a store factory open.

Issue 33: a ``make_store()`` generator left suspended until the interpreter exits has its
teardown run during shutdown, with module globals already gone; it fails there
(``Exception ignored in: <generator object make_store ...>``) and the schema stays in
the test database. Each run below is a real pytest session in a fresh interpreter, with
a copy of this project's conftest.py, so what is proved is the guard itself, at its true
place: the end of a session. Plus the teardown half: ``_driver_errors`` never raises an
error of its own when the module's globals are torn down.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chongming_conformance import StoreError

CONFTEST = Path(__file__).with_name("conftest.py")


@pytest.fixture
def guarded(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    return pytester


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # A fresh interpreter: a generator left open must not land in this process.
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=600)


LEAKY = '''
KEPT = []


def make_store():
    yield "a store"


def test_leaves_the_factory_open():
    gen = make_store()
    next(gen)
    KEPT.append(gen)  # kept for the whole session, as the kit's reuse registry did


def test_closes_it():
    gen = make_store()
    next(gen)
    gen.close()
'''
_YIELD_LINE = LEAKY.strip().splitlines().index('    yield "a store"') + 1


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["in-process", "xdist"])
def test_a_factory_left_open_fails_the_session(guarded: pytest.Pytester,
                                               workers: list[str]) -> None:
    guarded.makepyfile(test_leaky=LEAKY)
    result = _run(guarded, *workers)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines([
        "*this session left store factories or their schemas behind*",
        "*a factory generator was left unfinished: make_store() suspended at "
        f"*test_leaky.py:{_YIELD_LINE}",
    ])


def test_closed_and_never_started_factories_pass(guarded: pytest.Pytester) -> None:
    guarded.makepyfile(test_tidy='''
        import contextlib

        UNSTARTED = []


        def make_shared_store():
            yield "an opener"


        def test_closing():
            with contextlib.closing(make_shared_store()) as gen:
                next(gen)


        def test_created_only():
            UNSTARTED.append(make_shared_store())  # holds nothing until started
    ''')
    result = _run(guarded)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.assert_outcomes(passed=2)


def test_the_kits_kept_stores_are_closed_first_not_reported(
    guarded: pytest.Pytester, tmp_path: Path
) -> None:
    """A contract with a reset function keeps its stores open between tests (the reuse
    seam); nothing but a kit run closes them. The guard closes them before it looks: no
    false alarm, and the factory's teardown really ran."""
    marker = tmp_path / "torn-down"
    guarded.makepyfile(test_kept=f'''
        from chongming_conformance.checking.contract import StoreContract
        from chongming_conformance.seam.timeouts import unwrap
        from reference_stores.memory import InMemoryTaskStore


        def empty(store):
            inner = unwrap(store)
            inner._tasks.clear()
            inner._history.clear()
            inner._commands.clear()


        class TestKept(StoreContract):
            def make_store(self):
                yield InMemoryTaskStore()
                with open({str(marker)!r}, "a") as f:
                    f.write("x")

            def reset_function(self):
                return empty
    ''')
    result = _run(guarded, "-k", "roundtrip")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    assert result.parseoutcomes()["passed"] >= 2
    assert marker.read_text() != ""  # kept between tests, torn down at the session's end


@pytest.mark.postgres
def test_a_schema_left_behind_is_named_and_dropped(
    guarded: pytest.Pytester, postgres_dsn: str
) -> None:
    """Only what the reference factories made in this session counts; the guard drops it."""
    import psycopg

    guarded.makepyfile(test_schema='''
        from reference_stores import postgres as pgstore


        def test_installs_and_forgets(tmp_path):
            name = pgstore._fresh_schema_name()
            pgstore.install_schema(pgstore._dsn_from_env(), name)
            print("SCHEMA", name)
    ''')
    result = _run(guarded, "-s")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    [name] = re.findall(r"SCHEMA (chongming_t_\w+)", result.stdout.str())
    result.stdout.fnmatch_lines([f"*left behind by this session: PostgreSQL schema {name} "
                                 "(dropped now)*"])
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s",
                           [name]).fetchone()
    assert row == (0,)


# -- the teardown at interpreter shutdown ----------------------------------------------------------
@pytest.mark.parametrize("kind", ["postgres", "mariadb"])
def test_driver_errors_raise_nothing_of_their_own_once_globals_are_gone(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At interpreter exit a module's globals may already be None; ``except None`` was a
    TypeError that hid the real error (and left the schema). Now the driver's error, or
    the StoreError made from it, is what propagates."""
    if kind == "postgres":
        driver = pytest.importorskip("psycopg", reason="psycopg is an optional extra")
        schema = pytest.importorskip("reference_stores.postgres_schema")
        guard, driver_error, module_attr = schema._driver_errors, driver.OperationalError, "psycopg"
    else:
        driver = pytest.importorskip("pymysql", reason="PyMySQL is an optional extra")
        schema = pytest.importorskip("reference_stores.mariadb_schema")
        guard, driver_error, module_attr = schema.driver_errors, driver.OperationalError, "pymysql"
    dsn = "postgresql://app:s3cr3t-pw@db.example/x"
    monkeypatch.setattr(schema, module_attr, None)
    masked = r"drop failed: OperationalError: .*app:\*\*\*@db"
    with pytest.raises(StoreError, match=masked) as e, guard("drop"):
        raise driver_error(f"cannot reach {dsn}")
    assert isinstance(e.value.__cause__, driver_error)
    for name in ("StoreError", "_mask_secrets", "re"):
        monkeypatch.setattr(schema, name, None)
    with pytest.raises(driver_error), guard("drop"):
        raise driver_error("the server went away")
    with pytest.raises(ValueError), guard("drop"):
        raise ValueError("not the driver's")
