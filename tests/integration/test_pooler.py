"""The reference Postgres store behind PgBouncer in transaction pooling mode.

A transaction pooler hands each transaction of a client whichever server connection is
free, and gives that server connection to other clients afterwards. So a store must keep
nothing in the server session: psycopg's automatic prepared statements (``_pg3_0`` after
five executions) collide or go missing (``DuplicatePreparedStatement``), and a session
``SET`` stays behind for the next client while this client's next transaction runs
without it. Here:

* many calls, on several store connections, go through the pooler without an error and
  with the right answers (the old store failed here with DuplicatePreparedStatement);
* every call sees the store's own ``statement_timeout`` (``SET LOCAL`` in its transaction);
* after the store's calls, no server connection of the pool shows a TimeZone or a
  ``statement_timeout`` other than its session default to a client that set neither.

The pooler is ``CHONGMING_TEST_PGBOUNCER`` (a DSN through PgBouncer with
``pool_mode = transaction``; ``.ci/pgbouncer.sh`` starts one). Without it every case
skips with the reason; ``CHONGMING_REQUIRE_PGBOUNCER=1`` turns that into a failure, as
``CHONGMING_REQUIRE_POSTGRES`` does for the Postgres tests (see conftest.py). The whole
gate through the pooler runs as its own step in ``.ci/run``, not here.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from chongming_conformance import TaskQuery, TaskStatus
from chongming_conformance.strategies.samples import at, snapshot

try:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from reference_stores import postgres as pgstore
except ImportError as exc:  # the driver is an optional extra
    if os.environ.get("CHONGMING_REQUIRE_PGBOUNCER", "").strip() not in ("", "0"):
        raise
    pytest.skip(
        f'psycopg is not installed ({exc}): pip install "chongming-conformance[postgres]"',
        allow_module_level=True,
    )

pytestmark = pytest.mark.postgres

PGBOUNCER_ENV = "CHONGMING_TEST_PGBOUNCER"
REQUIRE_PGBOUNCER_ENV = "CHONGMING_REQUIRE_PGBOUNCER"
STORES = 3
ROUNDS = 20  # well past psycopg's prepare_threshold (5)
WAIT = 60.0  # upper bound for a barrier; never a speed target
#: An unusual call_timeout, and the statement_timeout (90 % of it) the store then sets.
STORE_CALL_TIMEOUT = 7.0
STORE_STATEMENT_TIMEOUT = "6300ms"


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_PGBOUNCER_ENV, "").strip() not in ("", "0"):
        pytest.fail(f"{reason} (and {REQUIRE_PGBOUNCER_ENV}=1 forbids skipping)", pytrace=False)
    pytest.skip(reason)


def _admin_dsn(dsn: str) -> str:
    """The pooler's admin console: the same address and user, database ``pgbouncer``."""
    params = conninfo_to_dict(dsn)
    params["dbname"] = "pgbouncer"
    return make_conninfo("", **params)


def _pooler_config(dsn: str) -> dict[str, str]:
    """``SHOW CONFIG`` of the pooler (admin console; simple protocol, autocommit)."""
    with psycopg.connect(_admin_dsn(dsn), autocommit=True, connect_timeout=10) as admin:
        rows = admin.execute("SHOW CONFIG").fetchall()
    return {str(row[0]): str(row[1]) for row in rows}


@pytest.fixture(scope="module")
def pgbouncer() -> tuple[str, int]:
    """The pooler's DSN and its server pool size; skip (or fail when required) without it."""
    dsn = os.environ.get(PGBOUNCER_ENV, "").strip()
    if not dsn:
        _unavailable(
            f"pooler tests need {PGBOUNCER_ENV}=postgresql://user@host:6432/db "
            "(PgBouncer, pool_mode = transaction; .ci/pgbouncer.sh starts one)"
        )
    try:
        with psycopg.connect(dsn, connect_timeout=10, prepare_threshold=None) as conn:
            conn.execute("SELECT 1")
        config = _pooler_config(dsn)
    except psycopg.Error as exc:
        _unavailable(f"PgBouncer at {PGBOUNCER_ENV} is unreachable or has no admin console: {exc}")
        raise  # unreachable: _unavailable always raises
    # Not a skip: a pooler in another mode would make every case here prove nothing.
    assert config.get("pool_mode") == "transaction", (
        f"{PGBOUNCER_ENV} must point at PgBouncer with pool_mode = transaction, "
        f"got pool_mode = {config.get('pool_mode')!r}"
    )
    return dsn, int(config["default_pool_size"])


@pytest.fixture
def schema(pgbouncer: tuple[str, int]) -> Iterator[str]:
    """A fresh schema, installed and dropped through the pooler itself."""
    dsn, _ = pgbouncer
    name = f"chongming_pooler_{uuid.uuid4().hex[:12]}"
    pgstore.install_schema(dsn, name)
    try:
        yield name
    finally:
        pgstore.drop_schema(dsn, name)


def _settings(conn: psycopg.Connection[Any]) -> tuple[int, str, str, str, str]:
    """(backend pid, TimeZone now / at session start, statement_timeout now / at start)."""
    row = conn.execute(
        "SELECT pg_backend_pid(), current_setting('TimeZone'), "
        "(SELECT reset_val FROM pg_settings WHERE name = 'TimeZone'), "
        "current_setting('statement_timeout'), "
        "(SELECT reset_val FROM pg_settings WHERE name = 'statement_timeout')"
    ).fetchone()
    assert row is not None
    return int(row[0]), str(row[1]), str(row[2]), str(row[3]), str(row[4])


def _work(store: pgstore.PostgresTaskStore, name: str) -> None:
    """ROUNDS rounds of the store's hot calls, each checked, on task ``name``."""
    store.create(snapshot(name, version=1))
    for i in range(ROUNDS):
        store.touch(name, heartbeat_at=at(i))
        got = store.get(name)
        assert got is not None
        assert got == snapshot(name, version=i + 1, heartbeat_at=at(i)), (i, got)
        store.save(snapshot(name, version=i + 2, heartbeat_at=at(i)), expect_version=i + 1)
        assert name in [t.task_id for t in store.query(TaskQuery(name=got.name))]
        assert store.counts()[TaskStatus.PENDING] >= 1


def test_many_calls_on_several_connections_through_a_transaction_pooler(
    pgbouncer: tuple[str, int], schema: str
) -> None:
    """The old store failed here: DuplicatePreparedStatement "_pg3_0" (psycopg prepares
    a statement after five executions; the pooler then runs it on other server
    connections, where another client's ``_pg3_0`` exists or this one does not)."""
    dsn, _ = pgbouncer
    stores = [pgstore.PostgresTaskStore(dsn, schema=schema, max_size=2) for _ in range(STORES)]
    try:
        # Interleaved on one thread first: every store's statements alternate over the
        # pool's server connections in the same order on every run.
        for i in range(ROUNDS):
            for k, store in enumerate(stores):
                name = f"seq-{k}"
                if i == 0:
                    store.create(snapshot(name, version=1))
                store.touch(name, lease_owner=f"w{i}")
                assert store.get(name) == snapshot(name, version=1, lease_owner=f"w{i}")
        # Then concurrently, each store on its own thread.
        with ThreadPoolExecutor(STORES) as pool:
            for future in [
                pool.submit(_work, store, f"par-{k}") for k, store in enumerate(stores)
            ]:
                future.result(timeout=WAIT)
        assert stores[0].counts()[TaskStatus.PENDING] == 2 * STORES
    finally:
        for store in stores:
            store.close()


def test_each_call_sees_its_own_statement_timeout(
    pgbouncer: tuple[str, int], schema: str
) -> None:
    """statement_timeout is SET LOCAL in the call's transaction, so it is there on
    whichever server connection the pooler picked for that call."""
    dsn, _ = pgbouncer
    store = pgstore.PostgresTaskStore(dsn, schema=schema, max_size=2, call_timeout=10.0)
    try:
        seen: set[str] = set()
        for _ in range(ROUNDS):
            with store._connection("probe") as conn:
                _, _, _, timeout, _ = _settings(conn)
            seen.add(timeout)
        assert seen == {"9s"}, seen  # 90 % of call_timeout
    finally:
        store.close()


def test_no_session_state_is_left_for_other_clients(
    pgbouncer: tuple[str, int], schema: str
) -> None:
    """After the store's calls, a client that SETs nothing never sees the store's
    settings: the old store's session ``SET statement_timeout`` stayed on the server
    connection it ran on, for whoever got it next.

    The store runs with an unusual call_timeout, so its statement_timeout (90 % of it)
    is recognisable: a server connection may carry leftovers of other clients that
    ran through the same pooler earlier, which are not this store's doing. TimeZone
    must be the session default (PgBouncer itself re-sets it per client).
    """
    dsn, pool_size = pgbouncer
    stores = [
        pgstore.PostgresTaskStore(dsn, schema=schema, max_size=2, call_timeout=STORE_CALL_TIMEOUT)
        for _ in range(STORES)
    ]
    try:
        for k, store in enumerate(stores):
            store.create(snapshot(f"t-{k}"))
            for i in range(ROUNDS):
                store.touch(f"t-{k}", heartbeat_at=at(i))
    finally:
        for store in stores:
            store.close()
    # As many transactions at once as the pool has server connections: each holds
    # one, so together they look at every server connection the store's calls used.
    barrier = threading.Barrier(pool_size, timeout=WAIT)

    def probe() -> tuple[int, str, str, str, str]:
        with psycopg.connect(dsn, prepare_threshold=None, connect_timeout=10) as conn:
            seen = _settings(conn)  # opens a transaction: the server connection is held
            barrier.wait()
            return seen

    with ThreadPoolExecutor(pool_size) as pool:
        probes = [f.result(timeout=WAIT) for f in [pool.submit(probe) for _ in range(pool_size)]]
    assert len({pid for pid, *_ in probes}) == pool_size, probes
    leaked = [p for p in probes if p[1] != p[2] or p[3] == STORE_STATEMENT_TIMEOUT]
    assert not leaked, (
        "server connections keep another client's session settings "
        f"(pid, TimeZone, default, statement_timeout, default): {leaked}"
    )
