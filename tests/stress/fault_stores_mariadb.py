"""Teeth of the fault run on MariaDB: stores that are correct on a healthy network and each
wrong in one realistic way once the network breaks -- the twins of the Postgres teeth in
``fault_stores.py``.

The mistakes about errors that any engine could make are written once, in
``fault_mistakes.py``, and put in front of the MariaDB reference store here; the ones that
live in the engine's plumbing are this module's own.

Each is the reference ``MariaDBTaskStore`` with one mistake, and each has a
``make_<name>(network=None)`` factory shaped like the reference ``make_shared_store``: a
fresh database installed and dropped on the direct DSN, the workers' opener routed through
``network.route(host, port)`` when the kit passes the seam (with the reference's short
network bounds). The openers are ``functools.partial`` of a classmethod of a class in this
module, so spawned workers unpickle them by importing ``fault_stores_mariadb``
(tests/stress is on ``sys.path``, see conftest.py).

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
* :class:`SplitCreate` -- XP-FAULT-SAFETY (a create half done: the task without its
  ``task_tags`` rows, so a query by its tag misses it);
* :class:`PruneZeroOnError` -- XP-FAULT-SAFETY (a prune that deleted reported as having
  deleted nothing);
* :class:`CancelOnTimeout` -- XP-FAULT-NO-HANG (``KILL QUERY`` where the connection should
  be dropped: nothing to kill on a blackhole, so the call waits for ever).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Generator
from typing import Any

import fault_mistakes as mistakes
import pymysql

from chongming_conformance import Command, StoreError, TaskSnapshot
from reference_stores.mariadb import (
    NETWORK_CALL_TIMEOUT,
    MariaDBTaskStore,
    _close_quietly,
    _count,
    _dropped_on_exit,
    _dsn_from_env,
    _fetchone,
    _is_duplicate,
    _Pool,
    _snapshot_params,
    install_schema,
    routed_dsn,
)
from reference_stores.mariadb_schema import failure

__all__ = [
    "CancelOnTimeout",
    "EmptyClaimOnError",
    "NoClientTimeout",
    "OneConnection",
    "PruneZeroOnError",
    "ReadBackInsert",
    "RetryingSave",
    "SplitCreate",
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
    "make_split_create",
    "make_swallowing_release",
    "make_swallowing_touch",
    "make_swallowing_writes",
]

_log = logging.getLogger(__name__)


def _lost_connection(exc: StoreError) -> bool:
    """Whether ``exc`` came from the connection failing, not from the statement: PyMySQL's
    InterfaceError, or an OperationalError with a client error code (2000-2999: lost
    connection, server gone away, cannot connect; a read timeout is 2013 too)."""
    cause = exc.__cause__
    if isinstance(cause, pymysql.err.InterfaceError):
        return True
    if not isinstance(cause, pymysql.err.OperationalError):
        return False
    code = cause.args[0] if cause.args and isinstance(cause.args[0], int) else None
    return code is not None and code >= 2000


def _pool_like(pool: _Pool, cls: type[_Pool], *, max_size: int | None = None) -> _Pool:
    """A pool of class ``cls`` with the settings of the reference's ``pool`` (which the
    reference ``__init__`` made and used for its schema check)."""
    return cls(pool._params, pool._database, pool._max_size if max_size is None else max_size,
               pool._timeout, pool._io_timeout)


class RetryingSave(mistakes.RetryingSave, MariaDBTaskStore):
    """``fault_mistakes.RetryingSave`` on the MariaDB reference store: a lost connection is
    a PyMySQL client error, code >= 2000, or an InterfaceError."""

    def _lost_connection(self, exc: StoreError) -> bool:
        return _lost_connection(exc)

class SwallowingWrites(mistakes.SwallowingWrites, MariaDBTaskStore):
    """``fault_mistakes.SwallowingWrites`` on the MariaDB reference store."""

class _OnePool(_Pool):
    """One connection, made at construction, lent to every call and never replaced."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._conn = self._connect()

    def acquire(self) -> Any:
        if self._closed:
            raise StoreError("the store is closed")
        return self._conn

    def release(self, conn: Any, *, broken: bool) -> None:
        del conn, broken  # kept whatever happened to it: the mistake modelled here

    def close(self) -> None:
        self._closed = True
        if os.getpid() == self._pid:
            _close_quietly(self._conn)


class OneConnection(MariaDBTaskStore):
    """One connection, opened at construction and never replaced: "a connection per store
    instance is enough, the store is used by one thread".

    It keeps the reference store's client-side timeout (PyMySQL's read and write
    timeouts), so no call hangs; but once a reset, a cut reply or a timeout has broken the
    connection (PyMySQL closes it), every later call of this instance raises StoreError,
    long after the network healed. XP-FAULT-RECOVERY. A correct store replaces a broken
    connection (the reference pool discards it and connects afresh).
    """

    def __init__(self, dsn: str, **kwargs: Any) -> None:
        super().__init__(dsn, **kwargs)
        reference = self._pool
        try:
            self._pool = _pool_like(reference, _OnePool, max_size=1)
        except pymysql.Error as exc:
            self._closed = True
            raise failure("open(): connecting to MariaDB", exc) from exc
        finally:
            reference.close()


class NoClientTimeout(MariaDBTaskStore):
    """The reference store with its client-side timeout turned off (``call_timeout=None``:
    no ``read_timeout`` / ``write_timeout`` on the PyMySQL connections): "the server has
    ``innodb_lock_wait_timeout`` and TCP has keepalives".

    Neither fires for a request a blackhole swallowed: the server never saw it, and the
    proxy's kernel still acknowledges, so the call waits for a reply for ever.
    XP-FAULT-NO-HANG. Everything else is the reference store's (the TCP connect and the
    wait for a pooled connection stay bounded).
    """

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        database: str,
        max_size: int = 2,
        call_timeout: float | None = None,
        timeout: float = 30.0,
    ) -> MariaDBTaskStore:
        del call_timeout  # the mistake modelled here
        return cls(dsn, database=database, max_size=max_size, timeout=timeout,
                   call_timeout=None)


class EmptyClaimOnError(mistakes.EmptyClaimOnError, MariaDBTaskStore):
    """``fault_mistakes.EmptyClaimOnError`` on the MariaDB reference store."""

class SwallowingRelease(mistakes.SwallowingRelease, MariaDBTaskStore):
    """``fault_mistakes.SwallowingRelease`` on the MariaDB reference store."""

class SwallowingTouch(mistakes.SwallowingTouch, MariaDBTaskStore):
    """``fault_mistakes.SwallowingTouch`` on the MariaDB reference store."""

class ReadBackInsert(MariaDBTaskStore):
    """"The reply was lost, but the row is there, so it committed": when ``create`` or
    ``submit_command`` fails on the connection (the StoreError's cause is a PyMySQL client
    error, code >= 2000, or an InterfaceError), the store reads the id back on a fresh
    pooled connection and, if the row exists, returns as if its insert had succeeded; if
    it is absent, StoreError.

    Right when the reply of this very insert was lost. Wrong when the request was lost
    (or the COMMIT never arrived, rolling the insert back) and another process inserted
    the same id meanwhile -- the workload's workers race to create the same key tasks and
    to submit the same shared command ids: the read-back finds the other one's row, and a
    duplicate is reported as created (two creates of one id both succeed).
    XP-FAULT-SAFETY. A correct store raises StoreError (unknown outcome).
    """

    def _build_statements(self) -> None:
        super()._build_statements()
        self._sql_task_exists = f"SELECT 1 AS found FROM {self._tasks} WHERE task_id = %s"
        self._sql_command_exists = (
            f"SELECT 1 AS found FROM {self._commands} WHERE command_id = %s")

    def _read_back(self, exc: StoreError, operation: str, statement: str, key: str) -> None:
        """Return if the row ``key`` is there (the mistake), else raise ``exc``."""
        if self._closed or not _lost_connection(exc):
            raise exc
        try:
            found = self._call(operation, lambda cur: _fetchone(cur, statement, [key]))
        except StoreError:
            raise exc from None
        if found is None:
            raise exc
        _log.warning("%s(%s): reply lost, the row is there, so it committed", operation, key)

    def create(self, snapshot: TaskSnapshot) -> None:
        try:
            super().create(snapshot)
        except StoreError as exc:
            self._read_back(exc, "create", self._sql_task_exists, snapshot.task_id)

    def submit_command(self, command: Command) -> None:
        try:
            super().submit_command(command)
        except StoreError as exc:
            self._read_back(exc, "submit_command", self._sql_command_exists,
                            command.command_id)


class SplitCreate(MariaDBTaskStore):
    """"Tags are an index, written after the task": ``create`` commits the task row and its
    status counter first, then the task's ``task_tags`` rows in a second transaction
    ("the task is safe once its row is in; the tag index follows").

    On a healthy network the second transaction always follows, so every create ends
    complete (only a reader concurrent with the create could see it between the two).
    When the second transaction's request is lost (or its COMMIT never arrives) the create
    raises StoreError but leaves a task without its tag rows for good: ``get`` shows it
    with its tags, a query by one of them misses it -- neither "not created" nor
    "created". XP-FAULT-SAFETY. A correct store writes the row, its tags and its counter
    in one transaction.
    """

    def create(self, snapshot: TaskSnapshot) -> None:
        params = _snapshot_params(snapshot)
        created = params["created_at"]

        def row(cur: Any) -> None:
            cur.execute(self._sql_create, params)
            _count(cur, self._sql_count_one, [1, snapshot.status.value], rows=1)

        try:
            self._call("create", row, transaction=True)
        except StoreError as exc:
            if _is_duplicate(exc):
                raise StoreError(f"task {snapshot.task_id!r} already exists") from exc
            raise
        tag_rows = [(snapshot.task_id, tag, created) for tag in sorted(snapshot.tags)]
        if tag_rows:  # the second transaction: the mistake modelled here
            self._call("create", lambda cur: cur.executemany(self._sql_tags_insert, tag_rows),
                       transaction=True)


class PruneZeroOnError(mistakes.PruneZeroOnError, MariaDBTaskStore):
    """``fault_mistakes.PruneZeroOnError`` on the MariaDB reference store."""

class _KillQueryPool(_Pool):
    """The reference pool, except that a call's wait for the server is bounded by a
    ``KILL QUERY`` instead of the socket's read and write timeouts: the timeouts bound
    the connect (handshake and session set-up) only, and a watchdog thread sends
    ``KILL QUERY <connection id>`` over a fresh connection to the same address once a
    connection has been lent longer than ``call_timeout`` (as MySQL Connector/J does for
    a query timeout)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._limit = self._io_timeout
        self._watch = threading.Lock()
        self._lent: dict[int, tuple[float, int]] = {}  # id(conn) -> (deadline, thread id)
        self._killed: set[int] = set()
        self._stopped = threading.Event()
        self._watcher: threading.Thread | None = None

    def _connect(self) -> Any:
        conn = super()._connect()
        # From here on, no socket timeout: a slow call is ended by KILL QUERY.
        conn._read_timeout = None
        conn._write_timeout = None
        return conn

    def acquire(self) -> Any:
        conn = super().acquire()
        if self._limit is not None:
            with self._watch:
                if self._watcher is None and not self._stopped.is_set():
                    self._watcher = threading.Thread(target=self._run, daemon=True,
                                                     name=f"kill-query:{self._database}")
                    self._watcher.start()
                self._lent[id(conn)] = (time.monotonic() + self._limit, conn.thread_id())
        return conn

    def release(self, conn: Any, *, broken: bool) -> None:
        with self._watch:
            self._lent.pop(id(conn), None)
        super().release(conn, broken=broken)

    def _run(self) -> None:
        assert self._limit is not None
        tick = min(1.0, max(0.02, self._limit / 10))
        while not self._stopped.wait(tick):
            now = time.monotonic()
            with self._watch:
                late = [(key, thread) for key, (deadline, thread) in self._lent.items()
                        if deadline <= now and key not in self._killed]
                self._killed = {key for key in self._killed if key in self._lent}
                self._killed.update(key for key, _ in late)
            for _, thread in late:  # outside the lock: a kill is a connection of its own
                self._kill_query(thread)

    def _kill_query(self, thread: int) -> None:
        try:
            conn = self._params.connect(io_timeout=self._limit)
        except pymysql.Error:
            return
        try:
            with conn.cursor() as cur:
                cur.execute(f"KILL QUERY {int(thread)}")
        except pymysql.Error:
            pass  # the query ended meanwhile (1094: unknown thread id)
        finally:
            _close_quietly(conn)

    def close(self) -> None:
        self._stopped.set()
        super().close()


class CancelOnTimeout(MariaDBTaskStore):
    """"Cancel the statement, don't kill the connection": on its client-side timeout the
    store sends ``KILL QUERY <connection id>`` over a fresh connection through the same
    (routed) address instead of giving up on the socket, and keeps waiting for the reply
    -- which then comes as error 1317 ("query execution was interrupted"), and the
    connection stays usable. The socket timeouts bound only the connect.

    Right for a statement the server is running (a lock wait; ``innodb_lock_wait_timeout``
    does the same a little earlier). Wrong for a request a blackhole swallowed, or a
    reply it dropped: the server runs nothing for that connection, ``KILL QUERY`` finds
    nothing to kill, and the call waits for a reply that never comes. XP-FAULT-NO-HANG.
    """

    def __init__(self, dsn: str, **kwargs: Any) -> None:
        super().__init__(dsn, **kwargs)
        reference = self._pool
        self._pool = _pool_like(reference, _KillQueryPool)
        reference.close()


# -- factories ------------------------------------------------------------------------------
def _shared(
    cls: type[MariaDBTaskStore], network: Any, *, call_timeout: float | None = 30.0
) -> Generator[Callable[[], MariaDBTaskStore], None, None]:
    """The reference ``make_shared_store`` with ``cls`` as the store: install and drop on the
    direct DSN, the workers routed through ``network`` (with the reference's short network
    bounds) when given."""
    dsn = _dsn_from_env()
    opener_dsn = None if network is None else routed_dsn(dsn, network)  # refuse before install
    database = f"chongming_t_{uuid.uuid4().hex[:16]}"
    with _dropped_on_exit(dsn, database):  # as the reference: a failed install leaves nothing
        install_schema(dsn, database)
        if opener_dsn is None:
            yield functools.partial(cls.open, dsn, database=database, call_timeout=call_timeout)
        else:
            yield functools.partial(
                cls.open,
                opener_dsn,
                database=database,
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


def make_split_create(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(SplitCreate, network)


def make_prune_zero_on_error(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(PruneZeroOnError, network)


def make_cancel_on_timeout(network: Any = None) -> Generator[Callable[[], Any], None, None]:
    yield from _shared(CancelOnTimeout, network)
