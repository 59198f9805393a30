"""A tooth of the stress harness: the reference Postgres store reading from a streaming replica.

"Reads scale out to the replicas" is a common deployment: writes go to the
primary, reads to a hot standby fed by asynchronous streaming replication. The
standby replays the primary's WAL a little later -- milliseconds on an idle
loopback, more under load -- so a read sent to it right after a ``save``
returned can answer the row as it was before the save: a stale read. The guide
forbids it (a read after a write returned must see it; docs/replicas.md).

:class:`ReplicaReads` is the reference ``PostgresTaskStore`` (every write, and
``claim_commands``, on the primary) whose reads -- ``get``, ``query``,
``counts`` and ``history`` by default, ``reads=`` picks -- go to a second pool
on the replica. Nothing else differs. With the replica DSN pointing at the
primary itself it *is* the reference store (the control of
tests/stress/test_replica_tooth.py).

:func:`make_replica_reads` is a ``make_shared_store`` for the stress harness:
a fresh schema installed (and dropped) on the primary, waited for on the
replica, and a picklable opener -- a ``functools.partial`` of a classmethod of
this module, which spawned workers unpickle by importing ``replica_store``
(tests/stress is on ``sys.path``, see conftest.py). The servers are a
``ThrowawayPostgres`` and its ``ThrowawayStandby``
(tests/integration/throwaway_servers.py), started by the test, never the shared
server on 5432.
"""

from __future__ import annotations

import functools
import sys
import time
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path

import psycopg
from psycopg import sql

from chongming_conformance import StoreError, TaskQuery, TaskSnapshot, TaskStatus, Transition
from reference_stores.postgres import PostgresTaskStore, _dropped_on_exit, install_schema

_INTEGRATION = str(Path(__file__).resolve().parent.parent / "integration")
if _INTEGRATION not in sys.path:  # throwaway_servers, for the tests that build the servers
    sys.path.insert(0, _INTEGRATION)

__all__ = ["READS", "ReplicaReads", "make_replica_reads", "wait_for_schema"]

#: The calls that only read, and so may be sent to a replica.
READS = ("get", "query", "counts", "history")
#: Bound on the wait for the schema to reach the replica; never a speed target.
SCHEMA_WAIT = 60.0


class ReplicaReads(PostgresTaskStore):
    """The reference store, its reads (``reads``, a subset of :data:`READS`) sent to the
    replica at ``replica_dsn``: "reads scale out to the standbys".

    Every write -- and ``claim_commands``, which writes -- goes to the primary, as the
    reference store does it; a read sent to the replica sees what the replica has
    replayed so far, which may lag a write that already returned.
    """

    def __init__(
        self,
        dsn: str,
        *,
        replica_dsn: str,
        schema: str,
        reads: Sequence[str] = READS,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 15.0,
        call_timeout: float | None = 30.0,
    ) -> None:
        unknown = set(reads) - set(READS)
        if unknown:
            raise ValueError(f"not read calls: {sorted(unknown)}; choose among {READS}")
        self._reads = frozenset(reads)
        super().__init__(dsn, schema=schema, min_size=min_size, max_size=max_size,
                         timeout=timeout, call_timeout=call_timeout)  # fmt: skip
        try:
            self._replica = PostgresTaskStore(replica_dsn, schema=schema, min_size=min_size,
                                              max_size=max_size, timeout=timeout,
                                              call_timeout=call_timeout)  # fmt: skip
        except BaseException:
            super().close()
            raise

    @classmethod
    def open_replica(
        cls,
        dsn: str,
        *,
        replica_dsn: str,
        schema: str,
        reads: Sequence[str] = READS,
        max_size: int = 2,
        call_timeout: float | None = 30.0,
        timeout: float = 15.0,
    ) -> ReplicaReads:
        """An independent store with its own two small pools (the shared-store opener)."""
        return cls(dsn, replica_dsn=replica_dsn, schema=schema, reads=reads, min_size=1,
                   max_size=max_size, timeout=timeout, call_timeout=call_timeout)  # fmt: skip

    # -- the reads: to the replica (the mistake modelled here) -----------------------------
    def get(self, task_id: str) -> TaskSnapshot | None:
        if "get" in self._reads:
            return self._replica.get(task_id)
        return super().get(task_id)

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        if "query" in self._reads:
            return self._replica.query(query)
        return super().query(query)

    def counts(self) -> Mapping[TaskStatus, int]:
        if "counts" in self._reads:
            return self._replica.counts()
        return super().counts()

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        if "history" in self._reads:
            return self._replica.history(task_id, since_version=since_version)
        return super().history(task_id, since_version=since_version)

    def close(self) -> None:
        try:
            super().close()
        finally:
            replica = getattr(self, "_replica", None)
            if replica is not None:
                replica.close()


def wait_for_schema(replica_dsn: str, schema: str, *, timeout: float = SCHEMA_WAIT) -> None:
    """Wait (bounded) until the replica has replayed the installation of ``schema``."""
    deadline = time.monotonic() + timeout
    query = sql.SQL("SELECT 1 FROM {}.{} LIMIT 1").format(
        sql.Identifier(schema), sql.Identifier("tasks")
    )
    last = ""
    while time.monotonic() < deadline:
        try:
            with psycopg.connect(replica_dsn, autocommit=True, connect_timeout=10) as conn:
                conn.execute(query)
                return
        except psycopg.Error as exc:
            last = str(exc).strip()
        time.sleep(0.05)
    raise StoreError(f"schema {schema!r} did not reach the replica within {timeout:g} s: {last}")


def make_replica_reads(
    primary_dsn: str,
    replica_dsn: str,
    reads: Sequence[str] = READS,
) -> Generator[Callable[[], ReplicaReads], None, None]:
    """A ``make_shared_store`` body: bind the DSNs with ``functools.partial`` and hand the
    partial to ``run_all`` / ``run_scenario``. A fresh schema on the primary (dropped
    afterwards), present on the replica before the opener is handed out."""
    schema = f"chongming_t_{uuid.uuid4().hex[:16]}"
    with _dropped_on_exit(primary_dsn, schema):  # as the reference: a failed set-up leaves nothing
        install_schema(primary_dsn, schema)
        if replica_dsn != primary_dsn:
            wait_for_schema(replica_dsn, schema)
        yield functools.partial(
            ReplicaReads.open_replica,
            primary_dsn,
            replica_dsn=replica_dsn,
            schema=schema,
            reads=tuple(reads),
        )
