"""PostgreSQL TaskStore on psycopg 3 + psycopg_pool: the multi-node template.

What it guarantees, and why:

* **save is one statement.** ``UPDATE tasks SET <every column but the lease>
  WHERE task_id = %s AND status_version = %s``; the row count says whether it
  won. Check and write cannot be split by another writer: a concurrent UPDATE
  of the same row waits for the row lock and then re-evaluates the WHERE
  against the committed row, so of N savers at one version exactly one wins.
  The lease columns are absent from the SET list, so a save never clobbers
  the lease that ``touch`` wrote.
* **claim_commands is one statement**: a CTE picks the oldest claimable rows
  ``FOR UPDATE SKIP LOCKED ... LIMIT n`` and the outer UPDATE leases exactly
  those (``RETURNING``). Rows another consumer is leasing right now are
  skipped instead of waited for, and a row is never handed to two consumers.
  The ``WHERE id IN (subselect ... LIMIT)`` form is avoided on purpose: the
  planner may re-run or flatten the subselect and lease more than ``limit``.
* **A killed connection never reports success.** Every ``psycopg.Error``
  (including a backend killed by ``pg_terminate_backend`` or a server restart)
  becomes ``StoreError`` for the call in flight. The pool checks a connection
  before lending it (``ConnectionPool.check_connection``) and drops broken
  ones, so the next call gets a fresh connection. A statement cut off before
  its COMMIT changed nothing; one cut off after it (reply lost) *did* commit
  and still raises StoreError -- the caller must treat StoreError as "unknown".
* **No call waits for ever** (``call_timeout``, 30 s by default). A server that
  stops answering without closing the socket -- a hung or paused server, a
  link whose packets are dropped -- would otherwise block a call for good:
  psycopg has no per-query client timeout, TCP keepalives and libpq's
  ``tcp_user_timeout`` stay silent while the peer's kernel (or a userspace
  proxy in between) still ACKs, and the server's ``statement_timeout`` never
  fires for a request that never arrived. So one watchdog thread per store
  shuts down the socket of any connection lent for longer than
  ``call_timeout``: the blocked call fails at once with StoreError ("exceeded
  its client-side timeout"), its outcome unknown, and the pool replaces the
  connection. ``statement_timeout`` is set a little lower (``SET LOCAL`` in
  each call's transaction), so a statement merely stuck on a lock is stopped
  by the server first, with a clean error and a usable connection. Waiting
  for a pooled connection (``timeout``) and making one (``connect_timeout``)
  are bounded too.
* **Filters run in SQL, on indexes**: created_at, bucket, pipeline_run_id,
  status, tags (GIN, exact element match with ``tags ? %s`` -- never LIKE on
  the text), and a partial index over unfinished commands for the claim.
  ``name_prefix`` uses ``starts_with()`` (PostgreSQL >= 11), so ``%`` and
  ``_`` are literal.
* **counts() reads counters**, not the tasks: ``task_counts`` is kept by
  triggers on ``tasks`` in the writing transaction, striped per backend so
  concurrent writers do not queue on one row (docs/postgres.md).
* **timestamptz everywhere**, values returned UTC-aware: the codec converts
  what psycopg reads to UTC, so the session's TimeZone never matters.
* **No session state**, so it works behind a pooler in transaction mode
  (PgBouncer ``pool_mode = transaction``), where each transaction may run on
  another server connection that other clients share: no server-side prepared
  statements (``prepare_threshold=None``), no session ``SET`` (timeouts are
  ``SET LOCAL``), only transaction-scoped advisory locks, no LISTEN, temporary
  tables or WITH HOLD cursors. Session mode behaves like a direct connection.
  Statement mode cannot work: ``prune``, ``reset_store`` and ``install_schema``
  need multi-statement transactions (docs/postgres.md, "Behind a pooler").
* **Schema management is separate** (``reference_stores/postgres_schema.py``):
  :func:`install_schema` (idempotent, versioned via a ``schema_version`` table)
  needs CREATE; the store itself only runs SELECT/INSERT/UPDATE/DELETE, so it
  works under a role with DML grants only. Identifiers are quoted with
  ``psycopg.sql.Identifier``, never formatted into the text.

To copy it: take this file and ``postgres_schema.py``; keep the statements,
change the table layout if you must (the column names come from
``chongming_conformance.protocol.codec``), and keep the ``_connection`` wrapper that
turns driver errors into StoreError. The SQL and the reasoning are in
docs/postgres.md. The factories the kit runs it through (``make_store``,
``reset_store`` and ``make_shared_store``, at the bottom) read the DSN from the
environment; copy them as the pattern for your own store's factory module.

Of the kit, the two files import only its public model, errors and codec, so a
copy in a production store depends on nothing else (secrets in error messages
are masked by ``postgres_schema._mask_secrets``). The kit's other seams -- its
progress notes and ``chongming_deployment()``'s ``Deployment`` -- are imported
inside the functions the kit calls, when it calls them
(``tests/test_reference_store_imports.py`` keeps it so).
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import select
import socket
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

try:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict, make_conninfo
    from psycopg.rows import DictRow, dict_row
    from psycopg.types.json import Jsonb
    from psycopg_pool import ConnectionPool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "reference_stores.postgres needs psycopg 3 and psycopg_pool: "
        'pip install "chongming-conformance[postgres]"'
    ) from exc

from chongming_conformance import (
    TERMINAL_STATUSES,
    Command,
    ConcurrencyConflict,
    Progress,
    StoreError,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from chongming_conformance.protocol.codec import (
    COMMAND_COLUMNS,
    SAVE_COLUMNS,
    SNAPSHOT_COLUMNS,
    TRANSITION_COLUMNS,
    command_to_row,
    progress_to_row,
    row_to_command,
    row_to_snapshot,
    row_to_transition,
    snapshot_to_row,
    transition_to_row,
)

from .postgres_schema import (
    MAX_SCHEMA_BYTES,
    SCHEMA_VERSION,
    _failure,
    _ident,
    _mask_secrets,
    drop_schema,
    install_schema,
    validate_schema_name,
)

if TYPE_CHECKING:  # the kit's deployment seam, imported when the kit calls it (below)
    from chongming_conformance.faults import Deployment

__all__ = [
    "DSN_ENV",
    "MAX_SCHEMA_BYTES",
    "NETWORK_CALL_TIMEOUT",
    "SCHEMA_VERSION",
    "PostgresTaskStore",
    "claim_statement",
    "drop_schema",
    "install_schema",
    "make_shared_store",
    "make_store",
    "open_pool",
    "query_statement",
    "reset_store",
    "routed_dsn",
    "validate_schema_name",
]

#: Environment variable holding the DSN used by make_store()/make_shared_store().
DSN_ENV = "CHONGMING_TEST_POSTGRES"
#: call_timeout of the worker stores make_shared_store(network=...) opens (see there).
NETWORK_CALL_TIMEOUT = 5.0
_TASK_DT = ("created_at", "updated_at", "started_at", "finished_at", "heartbeat_at", "lease_until")
_COMMAND_DT = ("created_at", "lease_until", "finished_at")


# -- statements -----------------------------------------------------------------------------
def _column_list(columns: Sequence[str]) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(c) for c in columns)


def _placeholders(columns: Sequence[str]) -> sql.Composable:
    return sql.SQL(", ").join(sql.Placeholder(c) for c in columns)


def query_statement(schema: str, q: TaskQuery) -> tuple[sql.Composed, dict[str, Any]] | None:
    """The SELECT for ``q``, or None when ``q`` can match nothing (no round trip).

    Public so the tests can EXPLAIN exactly what the store runs.
    """
    if q.limit == 0 or q.statuses == frozenset() or q.buckets == frozenset():
        return None
    where: list[sql.Composable] = []
    params: dict[str, Any] = {}
    # One value is written as "=", not "= ANY(array)": the planner cannot know
    # a parameter array has one element, and only an equality lets the
    # (status, bucket, created_at) and (bucket, created_at) indexes deliver the
    # ORDER BY, so that a LIMIT stops early instead of sorting the bucket.
    if q.statuses is not None and len(q.statuses) == 1:
        where.append(sql.SQL("status = %(status)s"))
        params["status"] = next(iter(q.statuses)).value
    elif q.statuses is not None:
        where.append(sql.SQL("status = ANY(%(statuses)s)"))
        params["statuses"] = sorted(s.value for s in q.statuses)
    if q.name is not None:
        where.append(sql.SQL("name = %(name)s"))
        params["name"] = q.name
    if q.name_prefix is not None:
        # A literal prefix: no LIKE, so % _ and \ mean themselves. Byte-wise
        # under the default deterministic collation, hence case-sensitive.
        where.append(sql.SQL("starts_with(name, %(name_prefix)s)"))
        params["name_prefix"] = q.name_prefix
    if q.tag is not None:
        # jsonb ``?``: is the string a top-level element of the array. Exact,
        # and served by the GIN index.
        where.append(sql.SQL("tags ? %(tag)s"))
        params["tag"] = q.tag
    # NULL = x and NULL = ANY(...) are never true: a task without a bucket never matches.
    if q.buckets is not None and len(q.buckets) == 1:
        where.append(sql.SQL("bucket = %(bucket)s::bigint"))
        params["bucket"] = next(iter(q.buckets))
    elif q.buckets is not None:
        where.append(sql.SQL("bucket = ANY(%(buckets)s::bigint[])"))
        params["buckets"] = sorted(q.buckets)
    if q.pipeline_run_id is not None:
        where.append(sql.SQL("pipeline_run_id = %(pipeline_run_id)s"))
        params["pipeline_run_id"] = q.pipeline_run_id
    direction = sql.SQL("DESC" if q.newest_first else "ASC")
    statement = sql.SQL("SELECT * FROM {table}{where} ORDER BY created_at {d}, task_id {d}").format(
        table=_ident(schema, "tasks"),
        where=sql.SQL(" WHERE ") + sql.SQL(" AND ").join(where) if where else sql.SQL(""),
        d=direction,
    )
    if q.limit is not None:
        statement = statement + sql.SQL(" LIMIT %(limit)s")
        params["limit"] = q.limit
    return statement, params


def claim_statement(schema: str) -> sql.Composed:
    """The single claim statement; parameters ``now``, ``until``, ``limit``."""
    return sql.SQL(
        "WITH candidates AS ("
        "SELECT command_id FROM {commands} "
        "WHERE finished_at IS NULL AND (lease_until IS NULL OR lease_until <= %(now)s) "
        "ORDER BY created_at, command_id LIMIT %(limit)s "
        "FOR UPDATE SKIP LOCKED) "
        "UPDATE {commands} AS c SET lease_until = %(until)s FROM candidates "
        "WHERE c.command_id = candidates.command_id "
        "RETURNING c.*"
    ).format(commands=_ident(schema, "commands"))


def complete_statement(schema: str) -> sql.Composed:
    """Finish an unfinished command; parameters ``now``, ``outcome``, ``command_id``."""
    return sql.SQL(
        "UPDATE {} SET finished_at = %(now)s, outcome = %(outcome)s "
        "WHERE command_id = %(command_id)s AND finished_at IS NULL"
    ).format(_ident(schema, "commands"))


def _snapshot_params(snapshot: TaskSnapshot) -> dict[str, Any]:
    """Codec row with real datetimes (timestamptz columns) and tags as jsonb."""
    row = snapshot_to_row(snapshot)
    for column in _TASK_DT:
        row[column] = getattr(snapshot, column)
    row["tags"] = Jsonb(sorted(snapshot.tags))
    return row


def _command_params(command: Command) -> dict[str, Any]:
    row = command_to_row(command)
    for column in _COMMAND_DT:
        row[column] = getattr(command, column)
    return row


def _check_connection(conn: psycopg.Connection[Any]) -> None:
    """Pool ``check``: refuse a connection the server has dropped, cheaply.

    ``ConnectionPool.check_connection`` costs a round trip on every borrow,
    which doubles the cost of a one-statement call. An idle connection has
    nothing to read, so a readable socket means the server spoke while nobody
    was listening: the FATAL of ``pg_terminate_backend`` or a shutdown, EOF
    after a crash, or a harmless notice. Only then pay for the real check;
    if it raises, the pool discards the connection and lends another.
    (A peer that vanished silently is not detected here; the call then fails
    with StoreError -- use libpq keepalives to bound how long that takes.)
    """
    if conn.closed:
        raise psycopg.OperationalError("the connection is closed")
    fd = conn.fileno()
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        readable = bool(poller.poll(0))
    else:  # Windows: select() works on sockets
        readable = bool(select.select([fd], [], [], 0)[0])
    if readable:
        ConnectionPool.check_connection(conn)


def _connect_problem(dsn: str) -> str:
    """Why a plain connection fails (the pool only says it timed out)."""
    try:
        with psycopg.connect(dsn, connect_timeout=5):
            return "a direct connection works, so the pool timed out under load"
    except psycopg.Error as exc:
        return _mask_secrets(f"a direct connection fails: {exc}")


@dataclass(eq=False)
class _Lease:
    """One connection lent to one call, and until when (``time.monotonic()``)."""

    conn: psycopg.Connection[Any]
    deadline: float
    cut: bool = field(default=False)


class _Watchdog:
    """Ends a call that outlives ``limit`` seconds by shutting its connection's socket down.

    One daemon thread per store, not a timer per call: calls take about a
    millisecond, so lending a connection only records it (a lock and a dict
    insert) and the thread looks, every ``limit / 10`` seconds (at most 1 s),
    for a lease past its deadline. Leases are kept in lending order, so their
    deadlines are in order and a look stops at the first one still running.

    Shutting the socket down (``shutdown(SHUT_RDWR)`` on a duplicate of libpq's
    descriptor, never ``close``, which would free the descriptor number under
    libpq's feet) wakes the call blocked on it at once: libpq reads EOF,
    psycopg raises OperationalError, the connection is BAD and the pool drops
    it. A cut is made under the lock and only while the lease is out, so a
    connection already given back is never touched. The lease remembers the
    cut, which is how the call tells "timed out" from any other lost
    connection. (POSIX: on Windows ``os.dup`` of a socket fails and nothing
    is cut.)
    """

    def __init__(self, limit: float, name: str) -> None:
        if not limit > 0:
            raise StoreError(f"call_timeout must be > 0 seconds or None, got {limit!r}")
        self.limit = limit
        self._tick = min(1.0, max(0.02, limit / 10))
        self._name = name
        self._lock = threading.Lock()
        self._lent: dict[int, _Lease] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @contextmanager
    def watch(self, conn: psycopg.Connection[Any]) -> Iterator[_Lease]:
        with self._lock:
            if self._thread is None and not self._stop.is_set():
                # Lazily: a store that never calls costs no thread.
                self._thread = threading.Thread(
                    target=self._run, name=f"{self._name} watchdog", daemon=True
                )
                self._thread.start()
            lease = _Lease(conn, time.monotonic() + self.limit)
            self._lent[id(lease)] = lease
        try:
            yield lease
        finally:
            with self._lock:
                del self._lent[id(lease)]

    def _run(self) -> None:
        while not self._stop.wait(self._tick):
            now = time.monotonic()
            with self._lock:
                for lease in self._lent.values():
                    if lease.deadline > now:
                        break
                    if not lease.cut:
                        lease.cut = True
                        _shut_down(lease.conn)

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)


def _shut_down(conn: psycopg.Connection[Any]) -> None:
    """Shut down the socket under ``conn`` without closing libpq's descriptor."""
    try:
        if conn.closed:
            return
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    except (OSError, psycopg.Error):
        return
    with sock, contextlib.suppress(OSError):  # closes the duplicate only
        sock.shutdown(socket.SHUT_RDWR)


def _configure(
    conn: psycopg.Connection[Any], *, statement_timeout_ms: int | None = None
) -> None:
    """Make a new connection fit for the store, without sending anything to the server.

    Nothing here may leave state in the server session: behind a pooler in
    transaction mode (PgBouncer ``pool_mode = transaction``) the next
    transaction of this connection may run on another server connection, and
    this one then serves other clients. So:

    * no server-side prepared statements (``prepare_threshold = None``):
      psycopg would prepare a statement after its fifth execution, on one
      server connection, and then either find it missing on another one or
      collide with another client's ``_pg3_0`` ("DuplicatePreparedStatement").
      The pool opens its connections with this already; set here too for a
      connection you made yourself;
    * no ``SET TIME ZONE``: the codec (``decode_dt``) converts every timestamptz
      it reads to UTC, so the session's TimeZone never shows;
    * no session ``SET statement_timeout``: the store sets it per transaction
      (``SET LOCAL``, see ``PostgresTaskStore._connection``), so
      ``statement_timeout_ms`` is ignored here and kept only for callers of the
      old signature.

    Behind a pooler in session mode, or directly, all of this is merely
    harmless.
    """
    del statement_timeout_ms  # per transaction now, never per session
    conn.prepare_threshold = None


def _begin_statement(statement_timeout_ms: int) -> sql.Composed:
    """Open a transaction whose statements the server stops after ``statement_timeout_ms``.

    One round trip: a query without parameters goes over the simple protocol,
    which runs several statements. ``SET LOCAL`` ends with the transaction, so
    it works behind a transaction pooler and never reaches another client.
    """
    return sql.SQL("BEGIN; SET LOCAL statement_timeout = {}").format(
        sql.Literal(int(statement_timeout_ms))
    )


def _guarded(
    step: Callable[[psycopg.Connection[Any]], None], watchdog: _Watchdog | None
) -> Callable[[psycopg.Connection[Any]], None]:
    """``step`` under the watchdog: a pool's check or configure is a round trip too."""
    if watchdog is None:
        return step

    def run(conn: psycopg.Connection[Any]) -> None:
        with watchdog.watch(conn):
            step(conn)

    return run


def open_pool(
    dsn: str,
    *,
    name: str,
    min_size: int = 1,
    max_size: int = 4,
    timeout: float = 15.0,
    watchdog: _Watchdog | None = None,
) -> ConnectionPool[Any]:
    """An open pool of autocommit connections, each checked before it is lent.

    The check means a backend killed while idle (``pg_terminate_backend``, a
    server restart) is replaced instead of failing the next call.

    One plain connection comes first: a DSN that does not parse, a server that
    refuses, a wrong password fail at once with libpq's reason (masked), where a
    pool would retry in the background for ``timeout`` seconds, logging every
    attempt, and then say only that it timed out.

    Every wait is bounded: a caller waits at most ``timeout`` for a connection,
    and making one gives up after ``connect_timeout`` -- the DSN's, else
    ``timeout`` or the watchdog's limit, whichever is shorter (psycopg's own
    default is 130 s, and the pool makes connections on one worker thread, so
    one connect stuck on a dead link would stall every replacement that long).
    With a ``watchdog`` (the store's call_timeout), the borrow-time check runs
    under it too.

    The connections keep no state in the server session (see :func:`_configure`):
    psycopg never prepares a statement (``prepare_threshold=None``), and nothing
    is SET. So the pool works through PgBouncer in transaction mode as well as
    directly; the store sets ``statement_timeout`` per transaction instead.
    """
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise StoreError(_mask_secrets(f"invalid PostgreSQL DSN: {exc}")) from exc
    limit = timeout if watchdog is None else min(timeout, watchdog.limit)
    connect_timeout = max(2, math.ceil(limit))  # libpq counts whole seconds, at least 2
    # prepare_threshold=None: never a server-side prepared statement, whose name
    # and life belong to one server session (see _configure).
    kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": None}
    if params.get("connect_timeout") is None:
        kwargs["connect_timeout"] = connect_timeout
    try:
        psycopg.connect(dsn, **kwargs).close()
    except psycopg.Error as exc:
        raise StoreError(_mask_secrets(f"cannot connect to PostgreSQL: {exc}")) from exc
    pool: ConnectionPool[Any] = ConnectionPool(
        dsn,
        min_size=min_size,
        max_size=max_size,
        kwargs=kwargs,
        configure=_configure,  # client-side only: no round trip to guard
        check=_guarded(_check_connection, watchdog),
        timeout=timeout,
        name=name,
        num_workers=1,
        open=False,
    )
    try:
        pool.open(wait=True, timeout=timeout)
    except psycopg.Error as exc:
        pool.close()
        raise StoreError(_mask_secrets(
            f"cannot connect to PostgreSQL: {exc}; {_connect_problem(dsn)}"
        )) from exc
    return pool


class PostgresTaskStore:
    """TaskStore over a psycopg connection pool; see the module docstring.

    ``dsn_or_pool`` is a DSN (the store creates and owns a small pool) or a
    ``psycopg_pool.ConnectionPool`` you own (the store borrows it and, unless
    ``close_pool=True``, leaves it open on close()). The schema must have been
    installed with :func:`install_schema`; opening checks its version.

    ``call_timeout`` bounds each call once it holds a connection (module
    docstring); ``None`` turns the watchdog off. With it, on a pool the store
    builds, each call runs in a transaction that first sets ``statement_timeout``
    (``SET LOCAL``) to 90% of ``call_timeout``; without it, each call is
    autocommit statements, as before. On a pool you pass in, the
    watchdog still guards the calls, but the pool's own set-up and check, and
    ``statement_timeout``, are whatever that pool was built with (build it with
    :func:`open_pool` and no watchdog, or your own; behind a transaction pooler
    it must not prepare statements or SET anything per session). ``timeout``
    bounds the wait for a pooled connection.
    """

    def __init__(
        self,
        dsn_or_pool: str | ConnectionPool[Any],
        *,
        schema: str,
        min_size: int = 1,
        max_size: int = 4,
        timeout: float = 15.0,
        close_pool: bool | None = None,
        call_timeout: float | None = 30.0,
    ) -> None:
        self._schema = validate_schema_name(schema)
        self._closed = False
        self._watchdog = (
            None if call_timeout is None else _Watchdog(call_timeout, f"chongming:{schema}")
        )
        # What opens each call's transaction (None: autocommit statements).
        self._begin: sql.Composed | None = None
        if isinstance(dsn_or_pool, ConnectionPool):
            self._pool: ConnectionPool[Any] = dsn_or_pool
            self._owns_pool = bool(close_pool)
        else:
            self._pool = open_pool(
                dsn_or_pool,
                name=f"chongming:{schema}",
                min_size=min_size,
                max_size=max_size,
                timeout=timeout,
                watchdog=self._watchdog,
            )
            self._owns_pool = True if close_pool is None else close_pool
            if self._watchdog is not None:
                self._begin = _begin_statement(int(self._watchdog.limit * 900))
        self._build_statements()
        try:
            self._check_schema()
        except BaseException:
            self.close()
            raise

    @classmethod
    def open(
        cls,
        dsn: str,
        *,
        schema: str,
        max_size: int = 2,
        call_timeout: float | None = 30.0,
        timeout: float = 15.0,
    ) -> PostgresTaskStore:
        """An independent store with its own small pool (the shared-store opener)."""
        return cls(
            dsn,
            schema=schema,
            min_size=1,
            max_size=max_size,
            timeout=timeout,
            call_timeout=call_timeout,
        )

    # -- plumbing -------------------------------------------------------------------------
    def _build_statements(self) -> None:
        tasks = _ident(self._schema, "tasks")
        transitions = _ident(self._schema, "transitions")
        commands = _ident(self._schema, "commands")
        set_columns = [c for c in SAVE_COLUMNS if c != "task_id"]
        self._sql_create = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            tasks, _column_list(SNAPSHOT_COLUMNS), _placeholders(SNAPSHOT_COLUMNS)
        )
        # The lease columns are not in SAVE_COLUMNS: save never writes them.
        self._sql_save = sql.SQL(
            "UPDATE {} SET {} WHERE task_id = %(task_id)s AND status_version = %(expect)s"
        ).format(
            tasks,
            sql.SQL(", ").join(
                sql.SQL("{} = {}").format(sql.Identifier(c), sql.Placeholder(c))
                for c in set_columns
            ),
        )
        self._sql_version = sql.SQL("SELECT status_version FROM {} WHERE task_id = %s").format(
            tasks
        )
        self._sql_get = sql.SQL("SELECT * FROM {} WHERE task_id = %s").format(tasks)
        # The trigger-maintained counters (see _DDL_V2): a few rows per status.
        self._sql_counts = sql.SQL("SELECT status, sum(n) AS n FROM {} GROUP BY status").format(
            _ident(self._schema, "task_counts")
        )
        self._sql_append = sql.SQL(
            "INSERT INTO {} ({}) VALUES ({}) ON CONFLICT (task_id, version) DO NOTHING"
        ).format(transitions, _column_list(TRANSITION_COLUMNS), _placeholders(TRANSITION_COLUMNS))
        self._sql_history = sql.SQL(
            "SELECT * FROM {} WHERE task_id = %s AND version > %s ORDER BY version"
        ).format(transitions)
        self._sql_submit = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            commands, _column_list(COMMAND_COLUMNS), _placeholders(COMMAND_COLUMNS)
        )
        self._sql_claim = claim_statement(self._schema)
        self._sql_complete = complete_statement(self._schema)
        self._sql_release = sql.SQL(
            "UPDATE {} SET lease_until = NULL WHERE command_id = %s AND finished_at IS NULL"
        ).format(commands)
        self._sql_prune_pick = sql.SQL(
            "SELECT task_id FROM {} WHERE status = ANY(%(terminal)s) "
            "ORDER BY created_at DESC, task_id DESC OFFSET %(keep)s FOR UPDATE"
        ).format(tasks)
        self._sql_prune = [
            sql.SQL("DELETE FROM {} WHERE task_id = ANY(%s)").format(table)
            for table in (transitions, commands, tasks)
        ]
        self._sql_schema_version = sql.SQL("SELECT max(version) FROM {}").format(
            _ident(self._schema, "schema_version")
        )

    def _check_schema(self) -> None:
        try:
            with self._connection("open") as conn:
                row = conn.execute(self._sql_schema_version).fetchone()
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UndefinedTable):
                raise StoreError(
                    f"schema {self._schema!r} is not installed; run "
                    f"install_schema(dsn, {self._schema!r}) as a role that may CREATE"
                ) from exc
            raise
        version = None if row is None else row[0]
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"schema {self._schema!r} is at version {version}, this store needs "
                f"{SCHEMA_VERSION}; run install_schema()"
            )

    @contextmanager
    def _connection(self, operation: str) -> Iterator[psycopg.Connection[Any]]:
        """Lend a pooled connection; every driver error becomes StoreError.

        The connection's context commits on success and rolls back on error;
        giving it back discards it if it is no longer usable, which is how the
        store heals after a killed backend or a call the watchdog cut. The
        watchdog's lease covers the whole use, that final commit or rollback
        included.

        With a watchdog, the call is one transaction opened by ``BEGIN; SET LOCAL
        statement_timeout = ...`` (one round trip), set a little below
        ``call_timeout``: a statement merely stuck on a lock is stopped by the
        server first, with a clean error and a usable connection. Per
        transaction, never per session: behind PgBouncer in transaction mode a
        session ``SET`` would stay on a server connection that other clients get
        next, and be missing from the one this store gets for its next call.
        It costs two round trips per call (BEGIN and COMMIT; docs/postgres.md).
        Without a watchdog each statement is its own transaction (autocommit);
        with it the call's statements share one, and see the same (READ
        COMMITTED: each statement sees what was committed when it started).
        """
        if self._closed:
            raise StoreError(f"{operation}() on a closed PostgresTaskStore")
        lease: _Lease | None = None
        try:
            conn = self._pool.getconn()
            try:
                if self._watchdog is None:
                    with conn:
                        yield conn
                else:
                    with self._watchdog.watch(conn) as lease, conn:
                        if self._begin is not None:
                            conn.execute(self._begin)
                        yield conn
            finally:
                self._pool.putconn(conn)
        except psycopg.Error as exc:
            if self._closed:
                raise StoreError(f"{operation}() on a closed PostgresTaskStore") from exc
            if lease is not None and lease.cut and self._watchdog is not None:
                raise StoreError(
                    f"{operation}() exceeded its client-side timeout of "
                    f"{self._watchdog.limit:g} s (call_timeout): "
                    "PostgreSQL did not answer in time, so the connection was cut; "
                    "whether the call took effect is unknown"
                ) from exc
            raise _failure(f"{operation}()", exc) from exc

    def _fetch(self, operation: str, statement: sql.Composed, params: Any = None) -> list[DictRow]:
        with self._connection(operation) as conn:
            cur = conn.cursor(row_factory=dict_row)
            cur.execute(statement, params)
            return cur.fetchall()

    def _execute(self, operation: str, statement: sql.Composed, params: Any = None) -> int:
        with self._connection(operation) as conn:
            return conn.execute(statement, params).rowcount

    # -- task snapshots ---------------------------------------------------------------------
    def create(self, snapshot: TaskSnapshot) -> None:
        try:
            self._execute("create", self._sql_create, _snapshot_params(snapshot))
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise StoreError(f"task {snapshot.task_id!r} already exists") from exc
            raise

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        params = _snapshot_params(snapshot)
        params["expect"] = expect_version
        with self._connection("save") as conn:
            if conn.execute(self._sql_save, params).rowcount == 1:
                return
            # Lost: read what is there, for the error only (never to retry).
            row = conn.execute(self._sql_version, [snapshot.task_id]).fetchone()
        actual = None if row is None else int(row[0])
        raise ConcurrencyConflict(snapshot.task_id, expect_version, actual)

    def get(self, task_id: str) -> TaskSnapshot | None:
        rows = self._fetch("get", self._sql_get, [task_id])
        return row_to_snapshot(rows[0]) if rows else None

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        if self._closed:
            raise StoreError("query() on a closed PostgresTaskStore")
        built = query_statement(self._schema, query or TaskQuery())
        if built is None:
            return []
        statement, params = built
        return [row_to_snapshot(r) for r in self._fetch("query", statement, params)]

    def counts(self) -> Mapping[TaskStatus, int]:
        result = dict.fromkeys(TaskStatus, 0)
        for row in self._fetch("counts", self._sql_counts):
            result[TaskStatus(row["status"])] = int(row["n"])
        return result

    # -- history ------------------------------------------------------------------------------
    def append(self, transition: Transition) -> None:
        params = transition_to_row(transition)
        params["at"] = transition.at
        self._execute("append", self._sql_append, params)

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        rows = self._fetch("history", self._sql_history, [task_id, since_version])
        return [row_to_transition(r) for r in rows]

    # -- touch ----------------------------------------------------------------------------------
    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        if self._closed:
            raise StoreError("touch() on a closed PostgresTaskStore")
        values: dict[str, Any] = {}
        if progress is not None:
            values.update(progress_to_row(progress))
        for name, value in (
            ("heartbeat_at", heartbeat_at),
            ("lease_owner", lease_owner),
            ("lease_until", lease_until),
        ):
            if value is not None:
                values[name] = value
        if not values:
            return
        # status_version and updated_at are deliberately not in the SET list.
        statement = sql.SQL("UPDATE {} SET {} WHERE task_id = %(task_id)s").format(
            _ident(self._schema, "tasks"),
            sql.SQL(", ").join(
                sql.SQL("{} = {}").format(sql.Identifier(c), sql.Placeholder(c)) for c in values
            ),
        )
        values["task_id"] = task_id
        self._execute("touch", statement, values)  # no row: a late heartbeat, ignored

    # -- commands --------------------------------------------------------------------
    def submit_command(self, command: Command) -> None:
        try:
            self._execute("submit_command", self._sql_submit, _command_params(command))
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise StoreError(f"command {command.command_id!r} already exists") from exc
            raise

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        if self._closed:
            raise StoreError("claim_commands() on a closed PostgresTaskStore")
        if limit <= 0:
            return []
        params = {"now": now, "until": now + timedelta(seconds=lease_seconds), "limit": limit}
        rows = self._fetch("claim_commands", self._sql_claim, params)
        # UPDATE ... RETURNING has no order of its own.
        commands = [row_to_command(r) for r in rows]
        commands.sort(key=lambda c: (c.created_at, c.command_id))
        return commands

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        params = {"now": now, "outcome": outcome, "command_id": command_id}
        self._execute("complete_command", self._sql_complete, params)

    def release_command(self, command_id: str, *, now: datetime) -> None:
        self._execute("release_command", self._sql_release, [command_id])

    # -- operations ------------------------------------------------------------------
    def prune(self, *, keep_terminal: int) -> int:
        terminal = sorted(s.value for s in TERMINAL_STATUSES)
        # One transaction for the pick and the deletes (a savepoint inside the
        # call's own transaction when the store sets a statement_timeout).
        with self._connection("prune") as conn, conn.transaction():
            # FOR UPDATE: a concurrent writer cannot change a doomed row under us.
            picked = conn.execute(
                self._sql_prune_pick, {"terminal": terminal, "keep": max(keep_terminal, 0)}
            ).fetchall()
            doomed = [r[0] for r in picked]
            if not doomed:
                return 0
            for statement in self._sql_prune:
                conn.execute(statement, [doomed])
        return len(doomed)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._watchdog is not None:
            self._watchdog.stop()
        if self._owns_pool:
            self._pool.close()


# -- factories for the kit ------------------------------------------------------------------
# What ``--chongming-store=reference_stores.postgres:make_store`` runs. The kit calls
# ``make_store`` once per worker process and empties the store with ``reset_store``
# between tests and examples; ``make_shared_store`` serves the cross-process clauses.
def _dsn_from_env() -> str:
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        raise StoreError(
            f"set {DSN_ENV} to a PostgreSQL DSN (e.g. postgresql://user@127.0.0.1:5432/test) "
            "to run the kit against reference_stores.postgres"
        )
    return dsn


def _fresh_schema_name() -> str:
    return f"chongming_t_{uuid.uuid4().hex[:16]}"


def _note(text: str) -> None:
    """Say ``text`` through the kit's progress notes (a no-op outside a kit run).

    Installing a schema takes seconds on a busy server, and the first test would look
    hung; the plugin shows each note as a ``chongming:`` line. Imported here, when a kit
    factory runs, so the store and its schema module import nothing of the kit's
    plumbing: a copy of them in a production store keeps only the public model.
    """
    from chongming_conformance.seam.progress import note

    note(text)


@contextmanager
def _dropped_on_exit(dsn: str, schema: str) -> Iterator[None]:
    """Drop ``schema`` when the block ends, however it ends: the factories' bad-day rule.

    The block starts with :func:`install_schema`, so a set-up that fails half-way -- the
    install's COMMIT went through but its reply was lost, or the store could not open on
    the schema just installed -- drops whatever exists of the schema before the error
    goes on; nothing of a failed set-up stays on the server. ``drop_schema`` retries a
    lost connection a bounded number of times and never hangs.

    The block's error is always the one raised: if the drop fails too (after its
    retries), its error -- naming the schema and the statement that drops it -- becomes
    a note on the block's error (a PEP 678 note: shown under its traceback, kept by
    whoever catches it), never a replacement for it. A warning was not chosen: pytest
    moves warnings to a summary far from the failure and other runners drop them. Only
    a drop that fails after a block that ended without error (the teardown itself) raises
    its own error: then it is the only thing to report.
    """
    try:
        yield
    except BaseException as exc:
        try:
            drop_schema(dsn, schema)
        except Exception as failed:
            if isinstance(exc, GeneratorExit):  # the factory was closed: a plain teardown
                raise
            exc.add_note(f"and dropping what the failed set-up left failed too: {failed}")
        raise
    drop_schema(dsn, schema)


def make_store() -> Generator[PostgresTaskStore, None, None]:
    """A store on a newly installed schema of ``$CHONGMING_TEST_POSTGRES``, dropped on teardown.

    The schema is dropped also when the install or the store's opening fails
    (:func:`_dropped_on_exit`): a set-up that fails on a bad day leaves nothing behind.
    """
    dsn = _dsn_from_env()
    schema = _fresh_schema_name()
    _note(f"postgres: installing the schema {schema!r}")
    with _dropped_on_exit(dsn, schema):
        install_schema(dsn, schema)
        store = PostgresTaskStore(dsn, schema=schema)
        try:
            yield store
        finally:
            store.close()


#: Emptied by reset_store, children first; task_counts holds the counters counts() reads.
_RESET_TABLES = ("transitions", "commands", "tasks", "task_counts")


def reset_store(store: PostgresTaskStore) -> None:
    """Empty every table of ``store``'s schema in one transaction (the kit's reuse seam).

    ``DELETE``, not ``TRUNCATE``: the tables hold a test's few rows, and TRUNCATE swaps
    every table's and index's files (about 90 ms, against about 2 ms here).
    """
    with store._connection("reset_store") as conn, conn.transaction():
        for table in _RESET_TABLES:
            conn.execute(sql.SQL("DELETE FROM {}").format(_ident(store._schema, table)))


def routed_dsn(dsn: str, network: Any) -> str:
    """``dsn`` with its server address replaced by ``network.route(host, port)``.

    The address is the DSN's ``hostaddr`` or ``host`` (else ``PGHOSTADDR`` or
    ``PGHOST``, as libpq reads them) and its ``port`` (else ``PGPORT``, else
    5432). A fault proxy can only sit on a TCP link, so a DSN that reaches the
    server through a Unix socket (no host, or a host that is a directory) or
    names several hosts is refused rather than silently left direct. The result
    names the routed host and port only (no ``hostaddr``); note that TLS with
    ``sslmode=verify-full`` then checks the routed host's name.
    """
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error as exc:
        raise StoreError(_mask_secrets(f"invalid PostgreSQL DSN: {exc}")) from exc
    host = str(
        params.get("hostaddr") or params.get("host")
        or os.environ.get("PGHOSTADDR") or os.environ.get("PGHOST") or ""
    )
    port = str(params.get("port") or os.environ.get("PGPORT") or "5432")
    if not host or host.startswith(("/", "@")) or "," in host or "," in port:
        raise StoreError(
            "the network seam needs a single TCP host in the PostgreSQL DSN (host=... or "
            f"hostaddr=...), got {host or 'none (a Unix socket)'!r}: a fault proxy can only "
            "sit on a TCP link"
        )
    try:
        port_number = int(port)
    except ValueError as exc:
        raise StoreError(f"invalid port {port!r} in the PostgreSQL DSN") from exc
    routed_host, routed_port = network.route(host, port_number)
    params.pop("hostaddr", None)
    params["host"] = str(routed_host)
    params["port"] = str(int(routed_port))
    return make_conninfo("", **params)


def chongming_deployment() -> Deployment:
    """What the kit's reports say this store ran on (the deployment seam, docs/faults.md).

    The server's version, and whether something sits between the store and the server:
    the port the DSN names and the port the server itself listens on
    (``inet_server_port()``) differ behind a pooler or proxy such as PgBouncer. The
    template offers no fault action: crashing or failing over a server is the
    deployment's business (tests/stress/crash_stores.py does it for private servers).
    Copy this function into your store's module and say what you deploy on.
    """
    from chongming_conformance.faults import Deployment  # the kit's seam: see the docstring

    dsn = _dsn_from_env()
    params = conninfo_to_dict(dsn)
    named = f"{params.get('host') or params.get('hostaddr') or 'local socket'}:" \
            f"{params.get('port') or '5432'}"
    try:
        with psycopg.connect(dsn, autocommit=True, prepare_threshold=None,
                             connect_timeout=10) as conn:
            row = conn.execute("SELECT current_setting('server_version'), "
                               "inet_server_port()").fetchone()
    except psycopg.Error as exc:
        return Deployment(topology=f"PostgreSQL at {named} (could not be asked: "
                                   f"{type(exc).__name__})")
    version, port = (row or ("?", None))
    between = ("" if port is None or str(port) == str(params.get("port") or "5432") else
               f", through a pooler or proxy (the server itself listens on port {port})")
    return Deployment(topology=f"PostgreSQL {version} at {named}{between}")


def make_shared_store(
    network: Any = None,
) -> Generator[Callable[[], PostgresTaskStore], None, None]:
    """A fresh schema, and a picklable opener other processes use to reach it.

    ``network`` is the kit's fault-injection seam: an object whose
    ``route(host, port)`` returns the address of a fault proxy in front of
    (host, port). It is called here, in the parent process, and the opener's
    stores -- the workers -- connect to the routed address, so the kit can reset,
    blackhole or slow their links. Installing and dropping the schema use the
    direct address: a fault must never hit the set-up or the teardown. Without
    ``network`` nothing is routed.
    """
    dsn = _dsn_from_env()
    opener_dsn = None if network is None else routed_dsn(dsn, network)  # refuse before install
    schema = _fresh_schema_name()
    _note(f"postgres: installing the schema {schema!r}")
    with _dropped_on_exit(dsn, schema):  # also when the install fails half-way
        install_schema(dsn, schema)
        if opener_dsn is None:
            yield functools.partial(PostgresTaskStore.open, dsn, schema=schema)
        else:
            # Short bounds for the workers behind the fault proxy: the kit's no-hang
            # bound is 20 s, and a call may first wait for a connection (timeout) and
            # then run (call_timeout). This factory is the test wiring; a production
            # deployment picks its own call_timeout (the store's default is 30 s).
            yield functools.partial(
                PostgresTaskStore.open,
                opener_dsn,
                schema=schema,
                call_timeout=NETWORK_CALL_TIMEOUT,
                timeout=NETWORK_CALL_TIMEOUT,
            )
