"""The throwaway servers: they start, survive their own crash with what they committed, replicate.

Each case starts its own private server (tests/integration/throwaway_servers.py),
so it may crash it without disturbing the shared servers other tests use.

* Postgres (fsync on, synchronous_commit on): a committed row survives
  ``crash()`` (``pg_ctl stop -m immediate``) and the crash recovery of the next
  ``start()``;
* MariaDB (durable defaults, ``innodb_flush_log_at_trx_commit=1``): a committed
  row survives ``crash()`` (SIGKILL of mariadbd);
* a ``ThrowawayStandby`` receives a row written to its primary (bounded wait);
* ``close()`` is idempotent and quiet on a server already down, and deletes the
  directory; a missing binary raises ``MissingBinaries`` naming it.

Where the binaries (or the drivers) are missing, the server cases skip with the
reason -- or fail under ``CHONGMING_REQUIRE_POSTGRES`` / ``CHONGMING_REQUIRE_MARIADB``
(set by ``.ci/run``), as tests/conftest.py does for the shared servers.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import throwaway_servers as ts

WAIT = 60.0  # bound on "wait until the standby shows the row"; never a speed target


def _required(env: str) -> bool:
    return os.environ.get(env, "").strip() not in ("", "0")


def _unavailable(reason: str, env: str) -> None:
    if _required(env):
        pytest.fail(f"{reason} (and {env}=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


def _need_postgres() -> Any:
    absent = ts.missing(ts.postgres_binaries())
    if absent:
        _unavailable(f"PostgreSQL binaries missing: {', '.join(map(str, absent))}",
                     "CHONGMING_REQUIRE_POSTGRES")  # fmt: skip
    try:
        import psycopg
    except ImportError:
        _unavailable('psycopg is not installed: pip install "chongming-conformance[postgres]"',
                     "CHONGMING_REQUIRE_POSTGRES")  # fmt: skip
        raise  # unreachable
    return psycopg


def _need_mariadb() -> Any:
    absent = ts.missing(ts.mariadb_binaries())
    if absent:
        _unavailable(f"MariaDB binaries missing: {', '.join(map(str, absent))}",
                     "CHONGMING_REQUIRE_MARIADB")  # fmt: skip
    try:
        import pymysql
    except ImportError:
        _unavailable('PyMySQL is not installed: pip install "chongming-conformance[mariadb]"',
                     "CHONGMING_REQUIRE_MARIADB")  # fmt: skip
        raise  # unreachable
    return pymysql


@pytest.fixture
def pg() -> Iterator[ts.ThrowawayPostgres]:
    _need_postgres()
    server = ts.ThrowawayPostgres()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def maria() -> Iterator[ts.ThrowawayMariaDB]:
    _need_mariadb()
    server = ts.ThrowawayMariaDB()
    try:
        yield server
    finally:
        server.close()


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {WAIT:g} s waiting for {what}")
        time.sleep(0.02)


@pytest.mark.postgres
def test_postgres_committed_row_survives_crash(pg: ts.ThrowawayPostgres) -> None:
    psycopg = _need_postgres()
    with psycopg.connect(pg.dsn, autocommit=True, connect_timeout=10) as conn:
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings"
                " WHERE name IN ('fsync', 'synchronous_commit', 'wal_level')"
            ).fetchall()
        )
        assert settings == {"fsync": "on", "synchronous_commit": "on", "wal_level": "replica"}
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, note text)")
        conn.execute("INSERT INTO t VALUES (1, 'committed before the crash')")
        before = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    pg.crash()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(pg.dsn, connect_timeout=5).close()
    pg.start()
    with psycopg.connect(pg.dsn, autocommit=True, connect_timeout=10) as conn:
        assert conn.execute("SELECT id, note FROM t").fetchall() == [
            (1, "committed before the crash")
        ]
        after = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    assert after != before  # it really was a new server process
    # and its start ran crash recovery, as after a real crash
    assert "not properly shut down; automatic recovery in progress" in pg.log.read_text()


@pytest.mark.postgres
def test_postgres_settings_and_restart(pg: ts.ThrowawayPostgres) -> None:
    psycopg = _need_postgres()
    with ts.ThrowawayPostgres({"synchronous_commit": "off", "work_mem": "8MB"}) as other:
        assert other.port != pg.port
        with psycopg.connect(other.dsn, autocommit=True, connect_timeout=10) as conn:
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
            assert conn.execute("SHOW work_mem").fetchone() == ("8MB",)
            conn.execute("CREATE TABLE t (id int)")
            conn.execute("INSERT INTO t VALUES (7)")
        other.restart()  # a clean stop writes everything, whatever synchronous_commit says
        with psycopg.connect(other.dsn, autocommit=True, connect_timeout=10) as conn:
            assert conn.execute("SELECT id FROM t").fetchall() == [(7,)]
        root = other.root
    assert not root.exists()


@pytest.mark.postgres
def test_standby_receives_a_row_written_to_the_primary(pg: ts.ThrowawayPostgres) -> None:
    psycopg = _need_postgres()
    with psycopg.connect(pg.dsn, autocommit=True, connect_timeout=10) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY)")
    with ts.ThrowawayStandby(pg) as standby:
        assert standby.port != pg.port
        with psycopg.connect(standby.dsn, autocommit=True, connect_timeout=10) as replica:
            assert replica.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
            with psycopg.connect(pg.dsn, autocommit=True, connect_timeout=10) as conn:
                conn.execute("INSERT INTO t VALUES (42)")

            def arrived() -> bool:
                return bool(replica.execute("SELECT id FROM t").fetchall() == [(42,)])

            _wait_until(arrived, "the row written to the primary on the standby")
            with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
                replica.execute("INSERT INTO t VALUES (43)")


@pytest.mark.postgres
def test_postgres_close_is_idempotent_on_a_crashed_server(pg: ts.ThrowawayPostgres) -> None:
    _need_postgres()
    pg.crash()
    assert not pg.running()
    pg.close()
    pg.close()
    assert not pg.root.exists()
    with pytest.raises(ts.ServerError, match="closed"):
        pg.start()


@pytest.mark.mariadb
def test_mariadb_committed_row_survives_crash(maria: ts.ThrowawayMariaDB) -> None:
    _need_mariadb()
    conn = maria.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@innodb_flush_log_at_trx_commit, DATABASE()")
            assert cur.fetchone() == (1, "test")
            cur.execute("CREATE TABLE t (id INT PRIMARY KEY, note TEXT) ENGINE=InnoDB")
            cur.execute("INSERT INTO t VALUES (1, 'committed before the crash')")
    finally:
        conn.close()
    pid = maria.pid
    assert pid is not None
    maria.crash()
    assert maria.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    maria.start()
    conn = maria.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT id, note FROM t")
            assert cur.fetchall() == ((1, "committed before the crash"),)
    finally:
        conn.close()


@pytest.mark.mariadb
def test_mariadb_settings_restart_and_close(maria: ts.ThrowawayMariaDB) -> None:
    _need_mariadb()
    with ts.ThrowawayMariaDB({"innodb_flush_log_at_trx_commit": "2"}) as other:
        assert other.port != maria.port
        assert other.dsn == f"mysql://root@127.0.0.1:{other.port}/test"
        other.restart()
        conn = other.connect()
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT @@innodb_flush_log_at_trx_commit")
                assert cur.fetchone() == (2,)
        finally:
            conn.close()
        other.crash()
        root = other.root
    assert not root.exists()


def test_missing_binaries_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(ts, "PG_BIN", tmp_path / "no-such-bin")
    monkeypatch.setattr(ts, "MARIADBD", tmp_path / "no-mariadbd")
    with pytest.raises(ts.MissingBinaries, match=r"no-such-bin/initdb"):
        ts.ThrowawayPostgres()
    with pytest.raises(ts.MissingBinaries, match=r"no-mariadbd"):
        ts.ThrowawayMariaDB()
