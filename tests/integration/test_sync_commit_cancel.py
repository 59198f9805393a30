"""The Postgres trap the failover partition tests rest on, shown on private servers.

A primary with ``synchronous_standby_names = '*'`` whose standby streams through the
kit's fault proxy; the link is blackholed, so a COMMIT waits for the standby:

* ``statement_timeout`` does not end that wait: the server turns it off before the
  commit proper (``finish_xact_command``), so the COMMIT is still waiting when a
  timer sends a cancel later (the test checks the order of events, not durations);
* a cancel (``conn.cancel()``: a driver's query timeout, ``pg_cancel_backend``) ends it
  with a WARNING (SQLSTATE 01000, "canceling wait for synchronous replication") and the
  COMMIT returns **success**: the row is committed on the primary and missing on the
  standby. A store that passes that success on acknowledges a write a failover loses
  (``CancelOnTimeout`` of tests/stress/fault_stores.py, run across a failover by
  tests/stress/failover_stores.py; docs/failover.md).

Skips visibly without the PostgreSQL binaries; ``CHONGMING_REQUIRE_POSTGRES=1`` fails.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import pytest
import throwaway_servers as ts

from chongming_conformance.faults.proxy import FaultProxy
from chongming_conformance.faults.toxics import Timeout

REQUIRE_ENV = "CHONGMING_REQUIRE_POSTGRES"
#: The statement_timeout set for the COMMIT, and the later moment the cancel is sent.
STATEMENT_TIMEOUT_MS = 300
CANCEL_AFTER = 1.5


def _psycopg() -> Any:
    absent = ts.missing(ts.postgres_binaries())
    reason = f"PostgreSQL binaries missing: {', '.join(map(str, absent))}" if absent else ""
    try:
        import psycopg
    except ImportError:
        reason = 'psycopg is not installed: pip install "chongming-conformance[postgres]"'
    if reason:
        if os.environ.get(REQUIRE_ENV, "").strip() not in ("", "0"):
            pytest.fail(f"{reason} (and {REQUIRE_ENV}=1 forbids skipping)", pytrace=False)
        pytest.skip(reason)
    return psycopg


def test_a_cancelled_commit_waiting_for_the_sync_standby_returns_success() -> None:
    psycopg = _psycopg()
    with ts.ThrowawayPostgres({"synchronous_standby_names": "*"}) as primary, \
            FaultProxy(("127.0.0.1", primary.port), name="replication link") as proxy, \
            ts.ThrowawayStandby(primary, upstream=proxy.address) as standby:
        with psycopg.connect(primary.dsn, autocommit=True, connect_timeout=10) as setup:
            setup.execute("CREATE TABLE t (x int)")  # waits for the standby: it is attached
        for direction in ("downstream", "upstream"):
            proxy.add_toxic(f"partition-{direction}", Timeout(0.0), direction=direction)
        notices: list[tuple[str | None, str | None, str | None]] = []
        cancelled = threading.Event()
        conn = psycopg.connect(primary.dsn, autocommit=True, connect_timeout=10)
        try:
            conn.add_notice_handler(lambda d: notices.append(
                (d.severity_nonlocalized, d.sqlstate, d.message_primary)))
            conn.execute(f"BEGIN; SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
            conn.execute("INSERT INTO t VALUES (1)")

            def cancel() -> None:
                cancelled.set()
                conn.cancel_safe(timeout=10.0)

            timer = threading.Timer(CANCEL_AFTER, cancel)
            timer.start()
            try:
                conn.execute("COMMIT")  # returns: no exception is the trap
            finally:
                timer.cancel()
            assert cancelled.is_set(), "statement_timeout ended a COMMIT waiting for the standby"
        finally:
            conn.close()
        assert [(s, c) for s, c, _ in notices] == [("WARNING", "01000")], notices
        assert "synchronous replication" in str(notices[0][2]), notices
        with psycopg.connect(primary.dsn, autocommit=True, connect_timeout=10) as check:
            assert check.execute("SELECT count(*) FROM t").fetchone() == (1,)
        with psycopg.connect(standby.dsn, autocommit=True, connect_timeout=10) as replica:
            assert replica.execute("SELECT count(*) FROM t").fetchone() == (0,)
