"""The factories the kit runs the PostgreSQL store through: test plumbing, not the store.

``reference_stores.postgres`` exposes them as ``make_store``, ``make_fresh_store`` and
``make_shared_store`` (what ``--chongming-store`` names); they live here so the store's
own module stays the part worth copying. What they add:

* the DSN comes from ``$CHONGMING_TEST_POSTGRES``, with a message naming the variable
  when it is unset;
* ``make_store`` hands out recycled schemas (installed once, emptied on release) over
  one shared pool, because installing and dropping a schema per hypothesis example
  dominated the whole Postgres run (docs/benchmarks.md); every store still starts
  empty, which tests/integration/test_postgres_store.py proves;
* ``make_shared_store`` installs one fresh schema per scenario and yields a picklable
  opener (``PostgresTaskStore.open`` bound to the DSN and schema) for other processes.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
import uuid
from collections.abc import Callable, Generator
from typing import Any

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from chongming_conformance import StoreError

from .postgres import DSN_ENV, PostgresTaskStore, open_pool
from .postgres_schema import _driver_errors, _ident, drop_schema, install_schema

__all__ = ["fresh_store", "recycled_store", "shared_store_opener"]


def _dsn_from_env() -> str:
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        raise StoreError(
            f"set {DSN_ENV} to a PostgreSQL DSN (e.g. postgresql://user@127.0.0.1:5432/test) "
            "to run the kit against reference_stores.postgres"
        )
    return dsn


def _fresh_schema_name(prefix: str = "chongming_t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


# -- recycled schemas for make_store --------------------------------------------------------
#: Tables emptied when a recycled schema goes back to the pool (children first).
_RECYCLED_TABLES = ("transitions", "commands", "tasks", "task_counts")


class _SchemaPool:
    """This process's installed, empty schemas, and one connection pool to reach them.

    Installing a schema (a dozen DDL statements) and dropping it cost ~200 ms,
    and a fresh connection pool ~20 ms: per hypothesis example that dominated
    the whole Postgres run. A released schema is emptied instead (DELETE in one
    transaction: ~2 ms, where TRUNCATE takes ~90 ms because it swaps every
    table's and index's files) and handed to the next ``make_store``, which
    first checks that it really is empty. The stores share one pool: every
    statement names its schema, so a connection serves any of them, and a
    closed store refuses calls by itself whoever owns the pool.

    Schemas are per process (a forked child starts its own pool) and dropped
    at interpreter exit.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = os.getpid()
        self._free: dict[str, list[str]] = {}
        self._owned: dict[str, set[str]] = {}
        self._pools: dict[str, ConnectionPool[Any]] = {}
        atexit.register(self.shutdown)

    def _fork_check(self) -> None:
        if os.getpid() != self._pid:  # inherited from the parent: not ours to use
            self._pid = os.getpid()
            self._free, self._owned, self._pools = {}, {}, {}

    def connection_pool(self, dsn: str) -> ConnectionPool[Any]:
        with self._lock:
            self._fork_check()
            pool = self._pools.get(dsn)
            if pool is None:
                pool = open_pool(dsn, name="chongming:make_store", max_size=8)
                self._pools[dsn] = pool
            return pool

    def acquire(self, dsn: str) -> str:
        """An installed schema with no rows in any table (recycled, or new)."""
        pool = self.connection_pool(dsn)
        while True:
            with self._lock:
                free = self._free.get(dsn, [])
                schema = free.pop() if free else None
            if schema is None:
                schema = _fresh_schema_name()
                install_schema(dsn, schema)
                with self._lock:
                    self._owned.setdefault(dsn, set()).add(schema)
                return schema
            with _driver_errors(f"checking recycled schema {schema!r}"):
                empty = _is_empty(pool, schema)
            if empty:
                return schema
            # A write landed after the release (a call in flight at close): never
            # hand that out; drop it and try the next one.
            self._discard(dsn, schema)

    def release(self, dsn: str, schema: str) -> None:
        """Empty ``schema`` and make it available again; drop it if emptying fails."""
        try:
            with self.connection_pool(dsn).connection() as conn, conn.transaction():
                conn.execute("SET LOCAL lock_timeout = '30s'")
                for table in _RECYCLED_TABLES:
                    conn.execute(sql.SQL("DELETE FROM {}").format(_ident(schema, table)))
        except (psycopg.Error, StoreError):
            self._discard(dsn, schema)
            return
        with self._lock:
            if os.getpid() == self._pid:
                self._free.setdefault(dsn, []).append(schema)

    def _discard(self, dsn: str, schema: str) -> None:
        with self._lock:
            self._owned.get(dsn, set()).discard(schema)
        drop_schema(dsn, schema)

    def shutdown(self) -> None:
        """Drop every schema this process installed and close the pools (atexit)."""
        with self._lock:
            if os.getpid() != self._pid:
                return
            owned, pools = self._owned, self._pools
            self._free, self._owned, self._pools = {}, {}, {}
        for dsn, schemas in owned.items():
            for schema in schemas:
                # The server may be gone at exit: then there is nothing to clean.
                with contextlib.suppress(psycopg.Error, StoreError):
                    drop_schema(dsn, schema)
        for pool in pools.values():
            pool.close()


def _is_empty(pool: ConnectionPool[Any], schema: str) -> bool:
    checks = sql.SQL(" OR ").join(
        sql.SQL("EXISTS (SELECT 1 FROM {})").format(_ident(schema, table))
        for table in _RECYCLED_TABLES
    )
    with pool.connection() as conn:
        row = conn.execute(sql.SQL("SELECT NOT ({})").format(checks)).fetchone()
    return bool(row and row[0])


_SCHEMAS = _SchemaPool()


def recycled_store() -> Generator[PostgresTaskStore, None, None]:
    """Generator factory: a store on an empty schema, recycled (emptied) on teardown.

    Every store starts with no tasks, history, commands or counters, exactly
    like a fresh schema (tests/integration/test_postgres_store.py proves it),
    at a fraction of the cost; :func:`fresh_store` is the old way.
    """
    dsn = _dsn_from_env()
    schema = _SCHEMAS.acquire(dsn)
    try:
        store = PostgresTaskStore(_SCHEMAS.connection_pool(dsn), schema=schema)
        try:
            yield store
        finally:
            store.close()
    finally:
        _SCHEMAS.release(dsn, schema)


def fresh_store() -> Generator[PostgresTaskStore, None, None]:
    """Generator factory: a store on a newly installed schema, dropped on teardown."""
    dsn = _dsn_from_env()
    schema = _fresh_schema_name()
    install_schema(dsn, schema)
    try:
        store = PostgresTaskStore(dsn, schema=schema)
        try:
            yield store
        finally:
            store.close()
    finally:
        drop_schema(dsn, schema)


def shared_store_opener() -> Generator[Callable[[], PostgresTaskStore], None, None]:
    """Generator factory: a fresh schema, and a picklable opener for other processes."""
    dsn = _dsn_from_env()
    schema = _fresh_schema_name()
    install_schema(dsn, schema)
    try:
        yield functools.partial(PostgresTaskStore.open, dsn, schema=schema)
    finally:
        drop_schema(dsn, schema)
