"""Teeth of the fault run: Postgres stores that are correct on a healthy network and each
wrong in one realistic way once the network breaks (their MariaDB twins are in
``fault_stores_mariadb.py``).

The mistakes about errors that any engine could make are written once, in
``fault_mistakes.py``, and put in front of the Postgres reference store here; the ones that
live in the engine's plumbing are this module's own.

Each is the reference ``PostgresTaskStore`` with one mistake, and each has a
``make_<name>(network=None)`` factory shaped like the reference ``make_shared_store``: a
fresh schema installed and dropped on the direct DSN, the workers' opener routed through
``network.route(host, port)`` when the kit passes the seam. The openers are
``functools.partial`` of a classmethod of a class in this module, so spawned workers
unpickle them by importing ``fault_stores`` (tests/stress is on ``sys.path``, see
conftest.py).

Which fault clause each must fail, and only that one (tests/stress/test_fault_teeth.py):

* :class:`RetryingSave` -- XP-FAULT-SAFETY (a conflict reported for a save that happened);
* :class:`SwallowingWrites` -- XP-FAULT-SAFETY (a write reported done that never happened);
* :class:`OneConnection` -- XP-FAULT-RECOVERY (a dead connection kept for ever);
* :class:`NoClientTimeout` -- XP-FAULT-NO-HANG (a call waiting for ever on a blackhole);
* :class:`EmptyClaimOnError` -- XP-FAULT-SAFETY (commands leased to nobody after a lost
  reply, or left out of a claim after a lost request);
* :class:`SwallowingRelease` -- XP-FAULT-SAFETY (a release reported done that never
  happened: the command stays leased);
* :class:`SwallowingTouch` -- XP-FAULT-SAFETY (a heartbeat, lease or progress reported
  written that is not there);
* :class:`ReadBackInsert` -- XP-FAULT-SAFETY (an insert whose request was lost reported as
  created because another process inserted the same id);
* :class:`PruneZeroOnError` -- XP-FAULT-SAFETY (a prune that deleted reported as having
  deleted nothing);
* :class:`CancelOnTimeout` -- XP-FAULT-NO-HANG (a cancel request where the socket should
  be cut: nothing to cancel on a blackhole, so the call waits for ever).

No split create here (MariaDB has one, ``fault_stores_mariadb.SplitCreate``): the Postgres
schema keeps a task's tags in its row, so a create split over two transactions (the row
with no tags, then the tags) shows its half-done row to every reader, and the mixed
workload's queries, which overlap other workers' creates, see it on a healthy network (red
in 4 of 7 runs without faults). MariaDB's tag rows are read only by a query by tag, which
no create overlaps.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from typing import Any

import fault_mistakes as mistakes
import psycopg
from psycopg import sql

from chongming_conformance import Command, StoreError, TaskSnapshot
from reference_stores.postgres import (
    NETWORK_CALL_TIMEOUT,
    PostgresTaskStore,
    _begin_statement,
    _configure,
    _dropped_on_exit,
    _dsn_from_env,
    _Lease,
    _Watchdog,
    install_schema,
    open_pool,
    routed_dsn,
)
from reference_stores.postgres_schema import _failure, _ident, validate_schema_name

__all__ = [
    "CancelOnTimeout",
    "EmptyClaimOnError",
    "NoClientTimeout",
    "OneConnection",
    "PruneZeroOnError",
    "ReadBackInsert",
    "RetryingSave",
    "SwallowingRelease",
    "SwallowingTouch",
    "SwallowingWrites",
    "make_cancel_on_timeout",
    "make_empty_claim_on_error",
    "make_no_client_timeout",
    "make_one_connection",
    "make_prune_zero_on_error",
    "make_read_back_insert",
    "make_retrying_save",
    "make_swallowing_release",
    "make_swallowing_touch",
    "make_swallowing_writes",
]

_log = logging.getLogger(__name__)


class RetryingSave(mistakes.RetryingSave, PostgresTaskStore):
    """``fault_mistakes.RetryingSave`` on the Postgres reference store: a lost connection is
    psycopg's OperationalError: a reset, a cut reply, the watchdog's timeout."""

    def _lost_connection(self, exc: StoreError) -> bool:
        return _lost_connection(exc)

class SwallowingWrites(mistakes.SwallowingWrites, PostgresTaskStore):
    """``fault_mistakes.SwallowingWrites`` on the Postgres reference store."""

class OneConnection(PostgresTaskStore):
    """One connection, opened at construction and never replaced: "a connection per store
    instance is enough, the store is used by one thread".

    It keeps the reference store's client-side timeout (the watchdog cuts a call that
    waits too long), so no call hangs; but once a reset, a cut reply or a timeout has
    broken the connection, every later call of this instance raises StoreError, long after
    the network healed. A correct store replaces a broken connection (the reference
    store's pool checks and discards them).
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str,
        min_size: int = 1,
        max_size: int = 1,
        timeout: float = 15.0,
        close_pool: bool | None = None,
        call_timeout: float | None = 30.0,
    ) -> None:
        del min_size, max_size, close_pool  # one connection, no pool
        self._schema = validate_schema_name(schema)
        self._closed = False
        self._owns_pool = False
        self._watchdog = (
            None if call_timeout is None else _Watchdog(call_timeout, f"one:{schema}")
        )
        limit = timeout if call_timeout is None else min(timeout, call_timeout)
        try:
            self._conn = psycopg.connect(
                dsn, autocommit=True, connect_timeout=max(2, math.ceil(limit))
            )
            _configure(
                self._conn,
                statement_timeout_ms=None if call_timeout is None else int(call_timeout * 900),
            )
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect to PostgreSQL: {exc}") from exc
        self._build_statements()
        try:
            self._check_schema()
        except BaseException:
            self.close()
            raise

    @contextmanager
    def _connection(self, operation: str) -> Iterator[psycopg.Connection[Any]]:
        if self._closed:
            raise StoreError(f"{operation}() on a closed OneConnection store")
        lease: _Lease | None = None
        try:
            if self._watchdog is None:
                yield self._conn
            else:
                with self._watchdog.watch(self._conn) as lease:
                    yield self._conn
        except psycopg.Error as exc:
            if lease is not None and lease.cut:
                raise StoreError(f"{operation}() exceeded its client-side timeout") from exc
            raise _failure(f"{operation}()", exc) from exc

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.stop()
        self._conn.close()


class NoClientTimeout(PostgresTaskStore):
    """The reference store with its client-side timeout turned off (``call_timeout=None``):
    "the server has statement_timeout and TCP has keepalives".

    Neither fires for a request a blackhole swallowed: the server never saw it, and the
    proxy's kernel still acknowledges, so the call waits for a reply for ever. Everything
    else is the reference store's (the pool's wait for a connection stays bounded).
    """

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        schema: str,
        max_size: int = 2,
        call_timeout: float | None = None,
        timeout: float = 15.0,
    ) -> PostgresTaskStore:
        return cls(dsn, schema=schema, min_size=1, max_size=max_size, timeout=timeout,
                   call_timeout=None)


class EmptyClaimOnError(mistakes.EmptyClaimOnError, PostgresTaskStore):
    """``fault_mistakes.EmptyClaimOnError`` on the Postgres reference store."""

class SwallowingRelease(mistakes.SwallowingRelease, PostgresTaskStore):
    """``fault_mistakes.SwallowingRelease`` on the Postgres reference store."""

class SwallowingTouch(mistakes.SwallowingTouch, PostgresTaskStore):
    """``fault_mistakes.SwallowingTouch`` on the Postgres reference store."""

def _lost_connection(exc: StoreError) -> bool:
    """Whether ``exc`` came from the connection failing (psycopg's OperationalError: a
    reset, a cut reply, the watchdog's timeout), not from the statement."""
    return isinstance(exc.__cause__, psycopg.OperationalError)


class ReadBackInsert(PostgresTaskStore):
    """"The reply was lost, but the row is there, so it committed": when ``create`` or
    ``submit_command`` fails on the connection (the StoreError's cause is psycopg's
    OperationalError), the store reads the id back on another pooled connection and, if
    the row exists, returns as if its insert had succeeded; if it is absent, StoreError.

    Right when the reply of this very insert was lost. Wrong when the request was lost
    (or the COMMIT never arrived, rolling the insert back) and another process inserted
    the same id meanwhile -- the workload's workers race to create the same key tasks and
    to submit the same shared command ids: the read-back finds the other one's row, and a
    duplicate is reported as created (two creates of one id both succeed).
    XP-FAULT-SAFETY. A correct store raises StoreError (unknown outcome).
    """

    def _build_statements(self) -> None:
        super()._build_statements()
        self._sql_command_exists = sql.SQL("SELECT 1 FROM {} WHERE command_id = %s").format(
            _ident(self._schema, "commands"))

    def _read_back(self, exc: StoreError, operation: str, statement: sql.Composed,
                   key: str) -> None:
        """Return if the row ``key`` is there (the mistake), else raise ``exc``."""
        if self._closed or not _lost_connection(exc):
            raise exc
        try:
            found = self._fetch(operation, statement, [key])
        except StoreError:
            raise exc from None
        if not found:
            raise exc
        _log.warning("%s(%s): reply lost, the row is there, so it committed", operation, key)

    def create(self, snapshot: TaskSnapshot) -> None:
        try:
            super().create(snapshot)
        except StoreError as exc:
            self._read_back(exc, "create", self._sql_version, snapshot.task_id)

    def submit_command(self, command: Command) -> None:
        try:
            super().submit_command(command)
        except StoreError as exc:
            self._read_back(exc, "submit_command", self._sql_command_exists,
                            command.command_id)


class PruneZeroOnError(mistakes.PruneZeroOnError, PostgresTaskStore):
    """``fault_mistakes.PruneZeroOnError`` on the Postgres reference store."""

class _CancellingWatchdog(_Watchdog):
    """The reference watchdog, except that a call past its deadline gets a cancel request
    (``conn.cancel_safe()``: a new connection to the same host and port asks the server to
    stop the backend's running statement) instead of its socket shut down."""

    def __init__(self, limit: float, name: str) -> None:
        super().__init__(limit, name)
        self._cancelled: set[int] = set()

    def _run(self) -> None:
        while not self._stop.wait(self._tick):
            now = time.monotonic()
            late: list[_Lease] = []
            with self._lock:
                for lease in self._lent.values():
                    if lease.deadline > now:
                        break
                    if id(lease) not in self._cancelled:
                        self._cancelled.add(id(lease))
                        late.append(lease)
                self._cancelled &= set(self._lent)
            for lease in late:  # outside the lock: a cancel is a round trip of its own
                with contextlib.suppress(psycopg.Error, OSError):
                    lease.conn.cancel_safe(timeout=self.limit)


class CancelOnTimeout(PostgresTaskStore):
    """"Cancel the statement, don't kill the connection": on its client-side timeout the
    store sends the server a cancel request (psycopg's ``cancel_safe()``, a new connection
    to the same routed host and port) instead of cutting the socket, and keeps waiting for
    the reply -- which then comes as ``QueryCanceled``, and the connection stays usable.

    Right for a statement the server is running (a lock wait; the server's own
    ``statement_timeout`` does the same a little earlier). Wrong for a request a blackhole
    swallowed, or a reply it dropped: the server is not running anything of this
    connection's, the cancel finds nothing to cancel, and the call waits for a reply that
    never comes. XP-FAULT-NO-HANG. The pool's connect timeout stays bounded (the
    reference's ``open_pool``); only a call in flight is left waiting.
    """

    def __init__(
        self,
        dsn: str,
        *,
        schema: str,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 15.0,
        close_pool: bool | None = None,
        call_timeout: float | None = 30.0,
    ) -> None:
        # The reference __init__ for a DSN, with the cancelling watchdog in its place.
        self._schema = validate_schema_name(schema)
        self._closed = False
        self._watchdog = (
            None if call_timeout is None
            else _CancellingWatchdog(call_timeout, f"cancel:{schema}")
        )
        self._begin = None
        self._pool = open_pool(dsn, name=f"cancel:{schema}", min_size=min_size,
                               max_size=max_size, timeout=timeout, watchdog=self._watchdog)
        self._owns_pool = True if close_pool is None else close_pool
        if self._watchdog is not None:
            self._begin = _begin_statement(int(self._watchdog.limit * 900))
        self._build_statements()
        try:
            self._check_schema()
        except BaseException:
            self.close()
            raise


# -- factories ------------------------------------------------------------------------------
def _shared(
    cls: type[PostgresTaskStore], network: Any, *, call_timeout: float | None = 30.0
) -> Generator[Callable[[], PostgresTaskStore], None, None]:
    """The reference ``make_shared_store`` with ``cls`` as the store: install and drop on the
    direct DSN, the workers routed through ``network`` (with the reference's short network
    bounds) when given."""
    dsn = _dsn_from_env()
    opener_dsn = None if network is None else routed_dsn(dsn, network)  # refuse before install
    schema = f"chongming_t_{uuid.uuid4().hex[:16]}"
    with _dropped_on_exit(dsn, schema):  # as the reference: a failed install leaves nothing
        install_schema(dsn, schema)
        if opener_dsn is None:
            yield functools.partial(cls.open, dsn, schema=schema, call_timeout=call_timeout)
        else:
            yield functools.partial(
                cls.open,
                opener_dsn,
                schema=schema,
                call_timeout=None if call_timeout is None else NETWORK_CALL_TIMEOUT,
                timeout=NETWORK_CALL_TIMEOUT,
            )


def make_retrying_save(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(RetryingSave, network)


def make_swallowing_writes(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(SwallowingWrites, network)


def make_one_connection(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(OneConnection, network)


def make_no_client_timeout(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(NoClientTimeout, network, call_timeout=None)


def make_empty_claim_on_error(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(EmptyClaimOnError, network)


def make_swallowing_release(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(SwallowingRelease, network)


def make_swallowing_touch(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(SwallowingTouch, network)


def make_read_back_insert(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(ReadBackInsert, network)


def make_prune_zero_on_error(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(PruneZeroOnError, network)


def make_cancel_on_timeout(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(CancelOnTimeout, network)
