"""MariaDB TaskStore on PyMySQL (pure Python): the MySQL-family template.

Proven here on MariaDB 10.11 (CI runs it); written for MariaDB >= 10.6 (``SKIP
LOCKED``) and MySQL >= 8.0, which agree on everything this store uses except
the name of the binary no-pad collation (``utf8mb4_nopad_bin`` on MariaDB,
``utf8mb4_0900_bin`` on MySQL, picked by ``install_schema``) and the error a
killed connection reports. The MySQL path is not run by this project.

What it guarantees, and why (each point is a trap a port to InnoDB falls into;
docs/mariadb.md has the measurements):

* **Autocommit on, explicit transactions.** PyMySQL starts with autocommit off,
  so a connection that only reads sits in one snapshot and never sees another
  process's writes, and a single-statement write is not durable until some
  later commit. Every connection here is autocommit; the calls that need more
  than one statement (create, save, claim, prune) say BEGIN ... COMMIT.
* **READ COMMITTED** for every session. Under REPEATABLE READ (InnoDB's default)
  a locking read locks every row *and gap* it scans, not only the rows it
  returns: after a crash, when every lease has expired, one claim's new lease
  entry falls into the gap another claim locked and waits for it, and such
  waits close into cycles (error 1213). READ COMMITTED takes no gap locks and
  releases at once the rows a scan rejects.
* **save is one compare-and-set statement.** ``UPDATE tasks SET <every column
  but the lease> WHERE task_id = %s AND status_version = %s``; the connection
  counts *matched* rows (``CLIENT.FOUND_ROWS``: MariaDB's default is changed
  rows, which makes an identical re-save look lost). Before it, the same
  transaction reads the row ``FOR UPDATE``: the status moves the counters, the
  version explains a conflict, the tags say whether ``task_tags`` must change.
  The decision is the UPDATE's row count alone; a conflict is never retried.
* **The claim cannot deadlock and never waits.** ``SELECT ... FORCE INDEX
  (commands_claim) WHERE finished_at IS NULL AND (lease_until IS NULL OR
  lease_until <= now) ORDER BY created_at, command_id LIMIT n FOR UPDATE SKIP
  LOCKED``, then ``UPDATE ... WHERE command_id IN (those)``, then COMMIT. The
  index holds the unfinished commands in claim order, so the scan touches
  candidates only; a row locked by anyone (another claim, a complete, a
  prune) is skipped, not waited for, so no lock cycle can pass through a
  claim; the UPDATE touches only rows this claim already holds.
* **No save-against-prune deadlock.** A write that finds its rows through a
  secondary index locks the index entry first and the row second; ``save``
  (by primary key) locks the row first and then the entries it changes. A
  ``DELETE FROM tasks WHERE status IN (...)`` therefore deadlocks against a
  concurrent ``save`` (1213). ``prune`` here picks candidates with a plain,
  non-locking read, then locks them *through the primary key, in key order*
  (``FORCE INDEX (PRIMARY) ... ORDER BY task_id FOR UPDATE``), re-testing the
  terminal status under the lock, and only then deletes children and tasks by
  key. Every transaction in the store takes task rows first (one, or several
  in key order) and counter rows last (in key order), so lock waits form no
  cycle; tests/integration/test_mariadb_store.py races them. Every write names
  its keys: a ``DELETE ... WHERE task_id IN (<long list>)`` is planned as a
  table scan, which waits for the lock of every row it reads (two prunes then
  deadlock), so deletes go one key per statement and multi-row UPDATEs say
  ``FORCE INDEX (PRIMARY)``. (Two INSERTs of one key can still deadlock
  inside InnoDB through their duplicate checks' shared locks: that is two
  creates of one id, and the retry below turns the loser into "already
  exists".)
* **Deadlocks are retried inside the store**, never surfaced as
  ``ConcurrencyConflict``: error 1213 means InnoDB rolled the whole transaction
  back, so nothing of the call happened and running it again is exact (a
  retried ``save`` re-tests the same ``expect_version``, so it can never
  overwrite a newer row). Bounded (``MAX_ATTEMPTS``); a lock wait timeout
  (1205) or a lost connection is a StoreError, not retried: the first means
  something held a row for ``innodb_lock_wait_timeout`` seconds, the second
  leaves the outcome unknown.
* **Exact text.** Every compared or keyed column is utf8mb4 under a binary,
  NO PAD collation (``mariadb_schema``), so equality is code point equality:
  no case folding, no trailing-space padding. ``name_prefix`` is
  ``LEFT(name, CHAR_LENGTH(%s)) = %s`` (no ``LIKE``: ``%``, ``_`` and ``\\`` are
  plain characters); a tag is matched by equality against the ``task_tags``
  rows, never with ``JSON_CONTAINS`` on escaped JSON text.
* **UTC to the microsecond.** ``DATETIME(6)`` holding UTC. PyMySQL writes a
  datetime's wall clock and drops its ``tzinfo``, so every value is converted
  to naive UTC before it is sent, and UTC is attached to what comes back.
* **counts() reads counters**: ``task_counts`` rows are updated in the
  transaction that creates, re-statuses or prunes a task, striped by
  connection id so concurrent writers rarely share a row. O(1) in the tasks.
* **Errors.** Every PyMySQL error becomes ``StoreError`` (masked: a DSN's password
  never reaches a message) with the driver error as ``__cause__``. A
  connection the server dropped while idle (``KILL``, ``wait_timeout``, a
  restart) is noticed before it is lent -- its socket is readable -- and
  replaced; one that fails during a call is discarded.
* **No call waits for ever** (``call_timeout``, 30 s by default). A server
  that stops answering without closing the socket (hung, paused, or behind a
  link that drops packets) would otherwise block a call for good: keepalives
  stay silent while the peer's kernel still ACKs, and no server-side limit
  fires for a request that never arrived. Every socket read and write of the
  store's connections -- the handshake's too -- waits at most ``call_timeout``
  (PyMySQL's ``read_timeout`` and ``write_timeout``), and a TCP connect at
  most that or the DSN's ``connect_timeout``, whichever is shorter. A timed-out
  call raises StoreError ("exceeded its client-side timeout"), its outcome
  unknown, and its connection is discarded, so the next call connects afresh.
  ``innodb_lock_wait_timeout`` is set a little lower, so a statement merely
  waiting for a row lock is stopped by the server first (error 1205, the
  connection still usable).
* **close()** closes this instance's connections (each instance owns its small
  pool, so closing one never touches another's), is idempotent, and every
  later call raises StoreError.
* **DML only.** The store runs SELECT/INSERT/UPDATE/DELETE; the DDL is in
  ``mariadb_schema.install_schema``, run once by a user that may CREATE.
* **Galera** (MariaDB Galera Cluster, Percona XtraDB Cluster): the same code, proven
  on a 3-node galera-4 cluster with the workers on one node and spread over all three
  (multi-primary), across a node's SIGKILL and rejoin, and across a node cut off the
  group communication (docs/galera.md has the runs). Two things differ from one server,
  and the store handles both without a switch:

  - *A write acknowledged on one node is not yet visible on another.* Galera delivers a
    commit's write set to every node before the commit returns, but applies it there
    afterwards; a read on another node in between misses it (XP-SHARED-VISIBILITY and
    XP-MIXED-WORKLOAD caught it: tests/stress/test_galera.py's teeth). A session on a node whose
    ``wsrep_on`` is ON therefore sets ``wsrep_sync_wait = 7`` (``WSREP_SYNC_WAIT``):
    every read, BEGIN, UPDATE/DELETE and INSERT first waits until the node has applied
    what the cluster committed before it. Without the UPDATE bit a ``complete_command``
    on a node that has not applied the ``submit`` yet would match no row and be lost
    silently. On a plain server (``wsrep_on`` OFF) or MySQL nothing is set.
  - *1213 is also a certification failure.* Galera's row locks are per node: a
    ``SELECT ... FOR UPDATE (SKIP LOCKED)`` does not see another node's locks, so two
    nodes can both select and lease one command; the first to commit wins and the other
    fails certification at COMMIT with 1213, its transaction rolled back whole -- the
    same "nothing happened" as an InnoDB deadlock, so the same retry applies and a lease
    is never held twice (the retry, after ``wsrep_sync_wait``, sees the winner's lease
    and skips the row). A long transaction (a prune batch) loses to every short write
    another node commits on its rows meanwhile, so the retry pause doubles per attempt
    (``_backoff``): with the old fixed pause a prune racing touches on two other nodes
    ran out of attempts (XP-PRUNE-SAVE-RACE, "lock-contention"); on a loaded machine
    even eight doubling pauses were not always enough, so after ``MAX_ATTEMPTS`` the
    retry goes on until ``DEADLOCK_RETRY_SECONDS`` have passed.

  What the store cannot do for you: a node that is not in the primary component (it
  lost quorum, or is cut off) refuses every statement (error 1047) -- a StoreError, the
  call's effect unknown -- so point each process at a node through something that moves
  it to a healthy one, or accept that its calls fail until the node is back. Run Galera
  with ``binlog_format=ROW`` and ``innodb_autoinc_lock_mode=2`` (its own requirements);
  every table here has a primary key, which Galera needs to replicate deletes and
  certify writes.

To copy it: take this file and ``mariadb_schema.py`` (of the kit, they import only its
public model, errors and codec). The three factories at the bottom are how the kit runs
it (a database per store from ``$CHONGMING_TEST_MARIADB``); ``reset_store`` empties a
store for reuse.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import select
import threading
import time
import uuid
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

try:
    import pymysql
    import pymysql.cursors
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "reference_stores.mariadb needs PyMySQL: "
        'pip install "chongming-conformance[mariadb]"'
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
    decode_tags,
    progress_to_row,
    row_to_command,
    row_to_snapshot,
    row_to_transition,
    snapshot_to_row,
    transition_to_row,
)

from .mariadb_schema import (
    COUNTER_SLOTS,
    SCHEMA_VERSION,
    TABLES,
    ConnectParams,
    _mask_secrets,
    drop_schema,
    failure,
    install_schema,
    parse_dsn,
    quote_ident,
    validate_database_name,
)

__all__ = [
    "DEADLOCK_RETRY_SECONDS",
    "DSN_ENV",
    "MAX_ATTEMPTS",
    "NETWORK_CALL_TIMEOUT",
    "SCHEMA_VERSION",
    "MariaDBTaskStore",
    "claim_statement",
    "claim_update_statement",
    "drop_schema",
    "install_schema",
    "make_shared_store",
    "make_store",
    "query_statement",
    "reset_store",
    "routed_dsn",
]

#: Environment variable holding the DSN used by make_store()/make_shared_store().
DSN_ENV = "CHONGMING_TEST_MARIADB"
#: call_timeout of the worker stores make_shared_store(network=...) opens (see there).
NETWORK_CALL_TIMEOUT = 5.0
#: How many times at least a call runs when InnoDB picks it as a deadlock victim ...
MAX_ATTEMPTS = 8
#: ... and after those, on until this many seconds have gone by since the first attempt:
#: on Galera a prune batch can lose certification to other nodes' writes more than
#: MAX_ATTEMPTS times in a row on a loaded machine (docs/galera.md). Far below the
#: 20 s a call may take under XP-FAULT-NO-HANG.
DEADLOCK_RETRY_SECONDS = 3.0

_DEADLOCK = 1213  # ER_LOCK_DEADLOCK: the whole transaction was rolled back
_DUPLICATE = 1062  # ER_DUP_ENTRY
#: Server errors after which the connection is gone (killed, shut down, timed out).
_FATAL_SERVER_ERRORS = frozenset({1053, 1927, 4031})

# Sent once per new connection. READ COMMITTED: see the module docstring. UTC:
# nothing here converts through the session zone (DATETIME does not), but an
# operator's NOW() in this session then agrees with the stored values. The
# sql_mode is set in full rather than inherited from the server: STRICT makes a
# too-long or unrepresentable value an error instead of a truncation with a
# warning, and leaving out NO_BACKSLASH_ESCAPES keeps PyMySQL's client-side
# escaping valid whatever the server's default.
_SESSION = (
    "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    "SET SESSION time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,"
    "NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'",
)
_TASK_DT = ("created_at", "updated_at", "started_at", "finished_at", "heartbeat_at", "lease_until")
_COMMAND_DT = ("created_at", "lease_until", "finished_at")
_TRANSITION_DT = ("at",)
_TERMINAL = tuple(sorted(s.value for s in TERMINAL_STATUSES))
#: Tasks prune deletes per transaction: bounds the locks one transaction holds.
PRUNE_BATCH = 200
_T = TypeVar("_T")


# -- values -----------------------------------------------------------------------------------
def _to_db(value: datetime | None) -> datetime | None:
    """Aware datetime -> naive UTC (what a DATETIME holds); PyMySQL would drop the zone."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None)


def _from_db(row: dict[str, Any], columns: Sequence[str]) -> dict[str, Any]:
    """Attach UTC to the DATETIME columns of a fetched row (in place)."""
    for column in columns:
        value = row[column]
        if value is not None:
            row[column] = value.replace(tzinfo=UTC)
    return row


def _snapshot_params(snapshot: TaskSnapshot) -> dict[str, Any]:
    row = snapshot_to_row(snapshot)  # tags stay the codec's JSON text
    for column in _TASK_DT:
        row[column] = _to_db(getattr(snapshot, column))
    return row


def _placeholders(columns: Sequence[str]) -> str:
    return ", ".join(f"%({c})s" for c in columns)


def _in_list(values: Sequence[Any]) -> str:
    return ", ".join(["%s"] * len(values))


# -- connections ------------------------------------------------------------------------------
def _wait_for_causality_on_galera(cur: Any, sync_wait: int) -> None:
    """On a Galera node (``wsrep_on`` is ON), ``SET SESSION wsrep_sync_wait``.

    Galera applies another node's write sets after that node's commit has returned, so
    without it a read here can miss a write a client already saw acknowledged on another
    node (module docstring, "Galera"). A plain MariaDB server (``wsrep_on`` OFF) and MySQL
    (no such variable: SHOW returns no row) are left alone: the statement would be
    meaningless there, and on MySQL an error.
    """
    cur.execute("SHOW VARIABLES LIKE 'wsrep_on'")
    row = cur.fetchone()
    if row is not None and str(row[1]).upper() == "ON":
        cur.execute(f"SET SESSION wsrep_sync_wait = {int(sync_wait)}")


def _socket_readable(conn: Any) -> bool:
    """True if the server sent something to an idle connection (an error, EOF)."""
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return True
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(sock.fileno(), select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([sock], [], [], 0)[0])  # Windows: select() works on sockets


def _breaks_connection(exc: BaseException) -> bool:
    """Whether the connection an error came from must not be lent again."""
    if isinstance(exc, pymysql.err.InterfaceError):
        return True
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    # 2000-2999 are the client's own errors: lost connection, server gone, ...
    return code is None or code >= 2000 or code in _FATAL_SERVER_ERRORS


def _close_quietly(conn: Any) -> None:
    with contextlib.suppress(Exception):
        conn.close()


class _Pool:
    """A few PyMySQL connections for one store instance, lent to one thread at a time.

    PyMySQL connections are not thread-safe, so each call borrows one. An idle
    connection whose socket has become readable was dropped by the server and
    is discarded before it is lent. The pool belongs to the process that made
    it: after a fork the child starts empty and never writes to (or closes) the
    parent's sockets.
    """

    def __init__(
        self,
        params: ConnectParams,
        database: str,
        max_size: int,
        timeout: float,
        call_timeout: float | None = None,
        sync_wait: int = 0,
    ) -> None:
        self._params = params
        self._sync_wait = sync_wait
        self._database = database
        self._io_timeout = call_timeout
        self._session: tuple[str, ...] = _SESSION
        if call_timeout is not None:
            # Below the client's limit (whole seconds, at least 1): a statement
            # waiting for a row lock is stopped by the server first, with 1205.
            lock_wait = max(1, int(call_timeout * 0.9))
            self._session = (*_SESSION, f"SET SESSION innodb_lock_wait_timeout = {lock_wait}")
        self._max_size = max(1, max_size)
        self._timeout = timeout
        self._idle: list[Any] = []
        self._size = 0
        self._cond = threading.Condition()
        self._closed = False
        self._pid = os.getpid()

    def _connect(self) -> Any:
        conn = self._params.connect(database=self._database, io_timeout=self._io_timeout)
        try:
            with conn.cursor() as cur:
                for statement in self._session:
                    cur.execute(statement)
                if self._sync_wait:
                    _wait_for_causality_on_galera(cur, self._sync_wait)
        except BaseException:
            _close_quietly(conn)
            raise
        return conn

    def acquire(self) -> Any:
        deadline = time.monotonic() + self._timeout
        with self._cond:
            if os.getpid() != self._pid:  # forked: the parent's connections are not ours
                self._pid, self._idle, self._size = os.getpid(), [], 0
            while True:
                if self._closed:
                    raise StoreError("the store is closed")
                while self._idle:
                    conn = self._idle.pop()
                    if not _socket_readable(conn):
                        return conn
                    self._size -= 1
                    _close_quietly(conn)
                if self._size < self._max_size:
                    self._size += 1
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._cond.wait(remaining):
                    raise StoreError(
                        f"no free MariaDB connection after {self._timeout:.0f} s "
                        f"({self._max_size} in use)"
                    )
        try:
            return self._connect()
        except BaseException:
            with self._cond:
                self._size -= 1
                self._cond.notify()
            raise

    def release(self, conn: Any, *, broken: bool) -> None:
        with self._cond:
            if os.getpid() != self._pid:
                return
            if broken or self._closed or not conn.open:
                self._size -= 1
                _close_quietly(conn)
            else:
                self._idle.append(conn)
            self._cond.notify()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._size -= len(idle)
            self._cond.notify_all()
            mine = os.getpid() == self._pid
        if mine:
            for conn in idle:
                _close_quietly(conn)


# -- statements -----------------------------------------------------------------------------
def query_statement(database: str, q: TaskQuery) -> tuple[str, list[Any]] | None:
    """The SELECT for ``q`` and its parameters, or None when ``q`` matches nothing.

    Public so the tests can EXPLAIN exactly what the store runs.
    """
    if q.limit == 0 or q.statuses == frozenset() or q.buckets == frozenset():
        return None
    tasks = quote_ident(database, "tasks")
    where: list[str] = []
    params: list[Any] = []
    tables = f"{tasks} AS t"
    order = "t.created_at {d}, t.task_id {d}"
    if q.tag is not None:
        # Drive from task_tags' (tag, created_at, task_id) index: the rows of one
        # tag come out in query order, so LIMIT n reads n of them (plus the
        # other filters' misses). The equality is exact: binary, no-pad.
        tags = quote_ident(database, "task_tags")
        tables = f"{tags} AS g JOIN {tasks} AS t ON t.task_id = g.task_id"
        where.append("g.tag = %s")
        params.append(q.tag)
        order = "g.created_at {d}, g.task_id {d}"
    # One value is "=", several "IN (...)": only an equality lets the
    # (status, bucket, created_at, task_id) and (bucket, created_at, task_id)
    # indexes deliver the order, so that a LIMIT stops early.
    if q.statuses is not None:
        values = sorted(s.value for s in q.statuses)
        where.append("t.status = %s" if len(values) == 1 else f"t.status IN ({_in_list(values)})")
        params.extend(values)
    if q.name is not None:
        where.append("t.name = %s")  # binary, no-pad: exact and case-sensitive
        params.append(q.name)
    if q.name_prefix:  # the empty prefix matches every name: no condition
        # A literal prefix without LIKE (whose % _ \ are wildcards and escapes):
        # the first CHAR_LENGTH(prefix) characters of the name, compared exactly.
        where.append("LEFT(t.name, CHAR_LENGTH(%s)) = %s")
        params.extend((q.name_prefix, q.name_prefix))
    if q.buckets is not None:
        values_b = sorted(q.buckets)  # a NULL bucket is never = or IN: never matches
        where.append(
            "t.bucket = %s" if len(values_b) == 1 else f"t.bucket IN ({_in_list(values_b)})"
        )
        params.extend(values_b)
    if q.pipeline_run_id is not None:
        where.append("t.pipeline_run_id = %s")
        params.append(q.pipeline_run_id)
    direction = "DESC" if q.newest_first else "ASC"
    columns = ", ".join(f"t.{c}" for c in SNAPSHOT_COLUMNS)
    statement = f"SELECT {columns} FROM {tables}"
    if where:
        statement += " WHERE " + " AND ".join(where)
    statement += " ORDER BY " + order.format(d=direction)
    if q.limit is not None:
        statement += " LIMIT %s"
        params.append(q.limit)
    return statement, params


def claim_statement(database: str) -> str:
    """The claim's locking read; parameters ``now``, ``limit`` (module docstring)."""
    return (
        f"SELECT {', '.join(COMMAND_COLUMNS)} "
        f"FROM {quote_ident(database, 'commands')} FORCE INDEX (commands_claim) "
        "WHERE finished_at IS NULL AND (lease_until IS NULL OR lease_until <= %(now)s) "
        "ORDER BY created_at, command_id LIMIT %(limit)s FOR UPDATE SKIP LOCKED"
    )


def claim_update_statement(database: str, n: int) -> str:
    """The claim's lease write for ``n`` ids it holds; parameters ``until``, then the ids.

    FORCE INDEX (PRIMARY): for a list that is a large part of a small table,
    MariaDB would otherwise plan a table scan, which reads -- and under READ
    COMMITTED may still wait for -- rows other transactions hold.
    """
    return (
        f"UPDATE {quote_ident(database, 'commands')} FORCE INDEX (PRIMARY) "
        f"SET lease_until = %s WHERE command_id IN ({_in_list(['?'] * n)})"
    )


class MariaDBTaskStore:
    """TaskStore on one MariaDB database (installed with ``install_schema``); see the module.

    ``dsn`` is ``mysql://user:password@host:port/database``; ``database``
    overrides the DSN's database. The instance owns a small pool of up to
    ``max_size`` connections (one per concurrent calling thread), opened lazily.
    Opening checks the schema version, which also proves the DSN works.
    ``timeout`` bounds the wait for a free connection; ``call_timeout`` each
    wait for the server (module docstring), ``None`` for no limit.
    """

    #: ``wsrep_sync_wait`` of every session on a Galera node (module docstring, "Galera"):
    #: 7 = reads and BEGIN (1) + UPDATE/DELETE (2) + INSERT/REPLACE (4) wait until the
    #: node has applied every write set the cluster committed before they started.
    #: 0 leaves the server's setting (a subclass that does is the tests' tooth).
    WSREP_SYNC_WAIT = 7

    def __init__(
        self,
        dsn: str,
        *,
        database: str | None = None,
        max_size: int = 4,
        timeout: float = 30.0,
        call_timeout: float | None = 30.0,
    ) -> None:
        self._closed = True  # until the pool exists: close() and __del__ stay safe
        self._retries = 0
        self._retries_lock = threading.Lock()
        if call_timeout is not None and not call_timeout > 0:
            raise StoreError(f"call_timeout must be > 0 seconds or None, got {call_timeout!r}")
        self._call_timeout = call_timeout
        params = parse_dsn(dsn)
        if call_timeout is not None:
            params = replace(params, connect_timeout=min(params.connect_timeout, call_timeout))
        name = database if database is not None else params.database
        if name is None:
            raise StoreError(_mask_secrets(
                f"no database: name one in the DSN ({dsn!r}) or pass database="
            ))
        self._database = validate_database_name(name)
        self._pool = _Pool(params, self._database, max_size, timeout, call_timeout,
                           sync_wait=self.WSREP_SYNC_WAIT)
        self._closed = False
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
        database: str,
        max_size: int = 2,
        call_timeout: float | None = 30.0,
        timeout: float = 30.0,
    ) -> MariaDBTaskStore:
        """An independent store with its own connections (the shared-store opener)."""
        return cls(
            dsn, database=database, max_size=max_size, timeout=timeout, call_timeout=call_timeout
        )

    @property
    def database(self) -> str:
        """The database this store reads and writes."""
        return self._database

    @property
    def deadlock_retries(self) -> int:
        """How many times a call of this instance was a deadlock victim and ran again.

        Zero in the tests' races between calls on different keys (the lock
        order is designed so); two creates of one id can cost one. A number
        that grows in production points at SQL outside the store.
        """
        with self._retries_lock:
            return self._retries

    # -- plumbing ----------------------------------------------------------------------------
    def _build_statements(self) -> None:
        def q(table: str) -> str:
            return quote_ident(self._database, table)

        tasks, tags, transitions = q("tasks"), q("task_tags"), q("transitions")
        commands, counts = q("commands"), q("task_counts")
        self._sql_create = (
            f"INSERT INTO {tasks} ({', '.join(SNAPSHOT_COLUMNS)}) "
            f"VALUES ({_placeholders(SNAPSHOT_COLUMNS)})"
        )
        self._sql_tags_insert = (
            f"INSERT INTO {tags} (task_id, tag, created_at) VALUES (%s, %s, %s)"
        )
        # Deletes name one key each (see _prune_batch for why not IN lists).
        self._sql_tags_delete = f"DELETE FROM {tags} WHERE task_id = %s"
        self._sql_delete_history = f"DELETE FROM {transitions} WHERE task_id = %s"
        self._sql_delete_command = f"DELETE FROM {commands} WHERE command_id = %s"
        self._sql_delete_task = f"DELETE FROM {tasks} WHERE task_id = %s"
        # The row lock that serialises this save against every other writer of the
        # task; what it reads is for the counters, the tags and the error only.
        self._sql_save_lock = (
            f"SELECT status, status_version, tags, created_at FROM {tasks} "
            "WHERE task_id = %s FOR UPDATE"
        )
        # The compare-and-set. codec.SAVE_COLUMNS has no lease columns: a save
        # never writes back a lease that touch() renewed meanwhile.
        self._sql_save = (
            f"UPDATE {tasks} SET "
            + ", ".join(f"{c} = %({c})s" for c in SAVE_COLUMNS if c != "task_id")
            + " WHERE task_id = %(task_id)s AND status_version = %(expect_version)s"
        )
        # Counters: one row per (status, slot) exists from install. The slot is
        # the connection's id modulo COUNTER_SLOTS, computed in Python and sent as
        # a value, so each UPDATE names whole primary keys; a move walks them in
        # key order, so two transactions that share a slot lock in one order.
        self._sql_count_one = (
            f"UPDATE {counts} SET n = n + %s WHERE status = %s AND slot = %s"
        )
        self._sql_count_move = (
            f"UPDATE {counts} FORCE INDEX (PRIMARY) SET n = n + IF(status = %s, -1, 1) "
            "WHERE status IN (%s, %s) AND slot = %s"
        )
        self._sql_get = f"SELECT {', '.join(SNAPSHOT_COLUMNS)} FROM {tasks} WHERE task_id = %s"
        self._sql_counts = f"SELECT status, SUM(n) AS n FROM {counts} GROUP BY status"
        # ON DUPLICATE KEY with a no-op: a replay keeps the first row. Not INSERT
        # IGNORE, which also turns data errors (a too-long value) into warnings
        # and silently stores a truncated row.
        self._sql_append = (
            f"INSERT INTO {transitions} ({', '.join(TRANSITION_COLUMNS)}) "
            f"VALUES ({_placeholders(TRANSITION_COLUMNS)}) "
            "ON DUPLICATE KEY UPDATE task_id = task_id"
        )
        self._sql_history = (
            f"SELECT {', '.join(TRANSITION_COLUMNS)} FROM {transitions} "
            "WHERE task_id = %s AND version > %s ORDER BY version"
        )
        self._sql_submit = (
            f"INSERT INTO {commands} ({', '.join(COMMAND_COLUMNS)}) "
            f"VALUES ({_placeholders(COMMAND_COLUMNS)})"
        )
        self._sql_claim = claim_statement(self._database)
        self._sql_complete = (
            f"UPDATE {commands} SET finished_at = %s, outcome = %s "
            "WHERE command_id = %s AND finished_at IS NULL"
        )
        self._sql_release = (
            f"UPDATE {commands} SET lease_until = NULL "
            "WHERE command_id = %s AND finished_at IS NULL"
        )
        terminal = _in_list(_TERMINAL)
        # prune, step 1 (no locks): the newest terminal task that must go.
        self._sql_prune_boundary = (
            f"SELECT created_at, task_id FROM {tasks} WHERE status IN ({terminal}) "
            "ORDER BY created_at DESC, task_id DESC LIMIT 1 OFFSET %s"
        )
        # step 2 (no locks): the oldest batch up to that boundary.
        self._sql_prune_pick = (
            f"SELECT task_id FROM {tasks} WHERE status IN ({terminal}) "
            "AND (created_at < %s OR (created_at = %s AND task_id <= %s)) "
            "ORDER BY created_at, task_id LIMIT " + str(PRUNE_BATCH)
        )
        self._tasks, self._tags, self._transitions = tasks, tags, transitions
        self._commands, self._counts = commands, counts
        self._sql_schema_version = f"SELECT MAX(version) AS v FROM {q('schema_version')}"

    def _check_schema(self) -> None:
        try:
            row = self._call("open", lambda cur: _fetchone(cur, self._sql_schema_version))
        except StoreError as exc:
            cause = exc.__cause__
            code = cause.args[0] if cause is not None and cause.args else None
            if code in (1049, 1146):  # unknown database, table doesn't exist
                raise StoreError(
                    f"database {self._database!r} has no chongming schema; run "
                    f"install_schema(dsn, {self._database!r}) as a user that may CREATE"
                ) from exc
            raise
        version = None if row is None else row["v"]
        if version != SCHEMA_VERSION:
            raise StoreError(
                f"database {self._database!r} is at schema version {version}, this store "
                f"needs {SCHEMA_VERSION}; run install_schema()"
            )

    def _refuse_if_closed(self, operation: str) -> None:
        if self._closed:
            raise StoreError(f"{operation}() on a closed MariaDBTaskStore")

    def _call(
        self, operation: str, body: Callable[[Any], _T], *, transaction: bool = False
    ) -> _T:
        """Run ``body(cursor)`` on a pooled connection, in a transaction if asked.

        Every driver error becomes StoreError (driver error as ``__cause__``).
        A deadlock victim (1213) was rolled back whole by InnoDB, so the call is
        run again, at least MAX_ATTEMPTS times with a short random pause, then for as
        long as DEADLOCK_RETRY_SECONDS allow (Galera's certification losers). Other
        exceptions (ConcurrencyConflict from ``save``) roll back and pass through.
        """
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            self._refuse_if_closed(operation)
            try:
                conn = self._pool.acquire()
            except pymysql.Error as exc:
                if _timed_out(exc):
                    raise self._timeout_error(f"{operation}(): connecting to MariaDB") from exc
                raise failure(f"{operation}(): connecting to MariaDB", exc) from exc
            except StoreError as exc:
                if self._closed:
                    raise StoreError(f"{operation}() on a closed MariaDBTaskStore") from exc
                raise
            broken = False
            try:
                if transaction:
                    conn.begin()
                with conn.cursor(pymysql.cursors.DictCursor) as cur:
                    result = body(cur)
                if transaction:
                    conn.commit()
                return result
            except pymysql.Error as exc:
                broken = _breaks_connection(exc) or not _rolled_back(conn, transaction)
                code = exc.args[0] if exc.args else None
                pause = _backoff(attempt)
                if code == _DEADLOCK and not broken and (
                        attempt < MAX_ATTEMPTS
                        or time.monotonic() - started + pause < DEADLOCK_RETRY_SECONDS):
                    with self._retries_lock:
                        self._retries += 1
                    time.sleep(pause)
                    continue
                if _timed_out(exc):
                    raise self._timeout_error(f"{operation}()") from exc
                raise failure(f"{operation}()", exc) from exc
            except UnicodeEncodeError as exc:
                # PyMySQL encodes the statement before sending it: a lone surrogate
                # cannot be utf8mb4 text. A value the store cannot hold, not a bug.
                broken = not _rolled_back(conn, transaction)
                raise StoreError(f"{operation}(): value not storable as utf8mb4: {exc}") from exc
            except BaseException:
                broken = not _rolled_back(conn, transaction)
                raise
            finally:
                self._pool.release(conn, broken=broken)

    def _timeout_error(self, doing: str) -> StoreError:
        return StoreError(
            f"{doing} exceeded its client-side timeout of {self._call_timeout:g} s "
            "(call_timeout): MariaDB did not answer in time, so the connection was "
            "dropped; whether the call took effect is unknown"
        )

    # -- task snapshots ---------------------------------------------------------------------
    def create(self, snapshot: TaskSnapshot) -> None:
        params = _snapshot_params(snapshot)
        created = params["created_at"]
        tag_rows = [(snapshot.task_id, tag, created) for tag in sorted(snapshot.tags)]

        def body(cur: Any) -> None:
            # A plain INSERT: the primary key turns a duplicate into error 1062 and
            # the stored row is untouched (never REPLACE or ON DUPLICATE KEY here).
            cur.execute(self._sql_create, params)
            if tag_rows:
                cur.executemany(self._sql_tags_insert, tag_rows)
            _count(cur, self._sql_count_one, [1, snapshot.status.value], rows=1)

        try:
            self._call("create", body, transaction=True)
        except StoreError as exc:
            if _is_duplicate(exc):
                raise StoreError(f"task {snapshot.task_id!r} already exists") from exc
            raise

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        params = _snapshot_params(snapshot)
        params["expect_version"] = expect_version
        new_status = snapshot.status.value

        def body(cur: Any) -> int | None:
            """None when saved, else the stored version for the conflict (-1: no task)."""
            cur.execute(self._sql_save_lock, [snapshot.task_id])
            old = cur.fetchone()
            if old is None:
                return -1
            if cur.execute(self._sql_save, params) != 1:
                return int(old["status_version"])
            if old["status"] != new_status:
                moved = [old["status"], old["status"], new_status]
                _count(cur, self._sql_count_move, moved, rows=2)
            created = params["created_at"]
            if decode_tags(old["tags"]) != snapshot.tags or old["created_at"] != created:
                # Rare (tags and created_at seldom change): the task's rows are
                # replaced, under the task's row lock taken above.
                cur.execute(self._sql_tags_delete, [snapshot.task_id])
                if snapshot.tags:
                    rows = [(snapshot.task_id, t, created) for t in sorted(snapshot.tags)]
                    cur.executemany(self._sql_tags_insert, rows)
            return None

        actual = self._call("save", body, transaction=True)
        if actual is not None:
            # Lost (the transaction committed nothing): reported, never retried.
            stored = None if actual < 0 else actual
            raise ConcurrencyConflict(snapshot.task_id, expect_version, stored)

    def get(self, task_id: str) -> TaskSnapshot | None:
        row = self._call("get", lambda cur: _fetchone(cur, self._sql_get, [task_id]))
        return None if row is None else row_to_snapshot(_from_db(row, _TASK_DT))

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        self._refuse_if_closed("query")
        built = query_statement(self._database, query or TaskQuery())
        if built is None:
            return []
        statement, params = built
        rows = self._call("query", lambda cur: _fetchall(cur, statement, params))
        return [row_to_snapshot(_from_db(r, _TASK_DT)) for r in rows]

    def counts(self) -> Mapping[TaskStatus, int]:
        rows = self._call("counts", lambda cur: _fetchall(cur, self._sql_counts))
        result = dict.fromkeys(TaskStatus, 0)
        for row in rows:
            result[TaskStatus(row["status"])] = int(row["n"])
        return result

    # -- history ------------------------------------------------------------------------------
    def append(self, transition: Transition) -> None:
        params = transition_to_row(transition)
        params["at"] = _to_db(transition.at)
        self._call("append", lambda cur: cur.execute(self._sql_append, params))

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        rows = self._call(
            "history", lambda cur: _fetchall(cur, self._sql_history, [task_id, since_version])
        )
        return [row_to_transition(_from_db(r, _TRANSITION_DT)) for r in rows]

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
        self._refuse_if_closed("touch")
        values: dict[str, Any] = {}
        if progress is not None:
            values.update(progress_to_row(progress))
        if heartbeat_at is not None:
            values["heartbeat_at"] = _to_db(heartbeat_at)
        if lease_owner is not None:
            values["lease_owner"] = lease_owner
        if lease_until is not None:
            values["lease_until"] = _to_db(lease_until)
        if not values:
            return
        # One autocommit UPDATE of the named columns only: never status_version,
        # never updated_at. None of them is indexed, so it locks one row and no
        # index entry. An unknown task updates nothing: a late heartbeat, ignored.
        statement = (
            f"UPDATE {self._tasks} SET "
            + ", ".join(f"{c} = %({c})s" for c in values)
            + " WHERE task_id = %(task_id)s"
        )
        values["task_id"] = task_id
        self._call("touch", lambda cur: cur.execute(statement, values))

    # -- commands --------------------------------------------------------------------
    def submit_command(self, command: Command) -> None:
        params = command_to_row(command)
        for column in _COMMAND_DT:
            params[column] = _to_db(getattr(command, column))
        try:
            self._call("submit_command", lambda cur: cur.execute(self._sql_submit, params))
        except StoreError as exc:
            if _is_duplicate(exc):
                raise StoreError(f"command {command.command_id!r} already exists") from exc
            raise

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        self._refuse_if_closed("claim_commands")
        if limit <= 0:
            return []
        until = now + timedelta(seconds=lease_seconds)
        params = {"now": _to_db(now), "limit": limit}

        def body(cur: Any) -> list[dict[str, Any]]:
            rows = _fetchall(cur, self._sql_claim, params)
            if rows:
                ids = [r["command_id"] for r in rows]
                # Only rows this transaction holds, found through the primary key
                # (FORCE INDEX: never a scan that reads, and waits for, other rows).
                cur.execute(
                    claim_update_statement(self._database, len(ids)), [_to_db(until), *ids]
                )
            return rows

        rows = self._call("claim_commands", body, transaction=True)
        claimed = []
        for row in rows:
            _from_db(row, _COMMAND_DT)
            row["lease_until"] = until
            claimed.append(row_to_command(row))
        return claimed  # already in claim order (the SELECT's ORDER BY)

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        # "finished_at IS NULL" makes a repeat, or an unknown id, a no-op.
        self._call(
            "complete_command",
            lambda cur: cur.execute(self._sql_complete, [_to_db(now), outcome, command_id]),
        )

    def release_command(self, command_id: str, *, now: datetime) -> None:
        # Clear the lease, do not finish: the owner can claim it at once.
        self._call("release_command", lambda cur: cur.execute(self._sql_release, [command_id]))

    # -- operations ------------------------------------------------------------------
    def prune(self, *, keep_terminal: int) -> int:
        """Drop the oldest terminal tasks beyond ``keep_terminal``, in batches.

        Each batch is one transaction that locks its tasks through the primary
        key in key order, re-testing the status under the lock (a task a
        concurrent ``save`` made non-terminal again is kept), then deletes the
        tasks' tags, history and commands, the tasks (one key per statement),
        and moves the counters.
        """
        keep = max(keep_terminal, 0)
        boundary = self._call(
            "prune", lambda cur: _fetchone(cur, self._sql_prune_boundary, [*_TERMINAL, keep])
        )
        if boundary is None:
            return 0
        edge = [boundary["created_at"], boundary["created_at"], boundary["task_id"]]
        dropped = 0
        while True:
            picked = self._call(
                "prune", lambda cur: _fetchall(cur, self._sql_prune_pick, [*_TERMINAL, *edge])
            )
            ids = [r["task_id"] for r in picked]
            if not ids:
                return dropped
            batch = functools.partial(self._prune_batch, ids)
            dropped += self._call("prune", batch, transaction=True)
            if len(ids) < PRUNE_BATCH:
                return dropped

    def _prune_batch(self, ids: list[str], cur: Any) -> int:
        marks = _in_list(ids)
        locked = _fetchall(
            cur,
            f"SELECT task_id, status FROM {self._tasks} FORCE INDEX (PRIMARY) "
            f"WHERE task_id IN ({marks}) AND status IN ({_in_list(_TERMINAL)}) "
            "ORDER BY task_id FOR UPDATE",
            [*ids, *_TERMINAL],
        )
        if not locked:
            return 0
        doomed = [r["task_id"] for r in locked]
        # The commands' keys, by a plain read (no locks): commands are keyed by
        # command_id, not task_id.
        commands = _fetchall(
            cur,
            f"SELECT command_id FROM {self._commands} WHERE task_id IN ({_in_list(doomed)})",
            doomed,
        )
        # Children first, then the tasks, one key per statement. Not "WHERE task_id
        # IN (...)": when the list is a large part of a table, MariaDB plans that
        # DELETE as a table scan, and a scanning DELETE waits for the lock of every
        # row it reads, other transactions' rows included -- two prunes deadlock.
        # An equality on the primary key (or its first column) reads only its rows.
        by_task = [(task_id,) for task_id in doomed]
        cur.executemany(self._sql_tags_delete, by_task)
        cur.executemany(self._sql_delete_history, by_task)
        cur.executemany(self._sql_delete_command, [(r["command_id"],) for r in commands])
        cur.executemany(self._sql_delete_task, by_task)
        per_status: dict[str, int] = {}
        for row in locked:
            per_status[row["status"]] = per_status.get(row["status"], 0) + 1
        for status in sorted(per_status):
            _count(cur, self._sql_count_one, [-per_status[status], status], rows=1)
        return len(doomed)

    def reset(self) -> None:
        """Empty every table (children first) and zero the counters, in one transaction."""

        def body(cur: Any) -> None:
            for table in TABLES:
                if table == "task_counts":
                    cur.execute(f"UPDATE {self._counts} SET n = 0")
                else:
                    cur.execute(f"DELETE FROM {quote_ident(self._database, table)}")

        self._call("reset_store", body, transaction=True)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._pool.close()


def _backoff(attempt: int) -> float:
    """The pause before running a deadlock victim again: random, doubling per attempt.

    On one server a deadlock is rare and the first retry nearly always wins (1-5 ms). On
    Galera a 1213 is also a certification failure: a transaction loses to any write
    another node committed on one of its rows meanwhile, so a long one (a prune batch)
    racing a stream of short ones (touches on other nodes) loses again and again at a
    fixed short pause. Doubling the pause (capped at 0.5 s; at most ~0.65 s in all over
    MAX_ATTEMPTS) lets the stream drain; XP-PRUNE-SAVE-RACE measured it (docs/galera.md).
    """
    pause: float = random.uniform(0.001, 0.005) * 2 ** (attempt - 1)
    return min(0.5, pause)


def _fetchone(cur: Any, statement: str, params: Any = None) -> dict[str, Any] | None:
    cur.execute(statement, params)
    row: dict[str, Any] | None = cur.fetchone()
    return row


def _fetchall(cur: Any, statement: str, params: Any = None) -> list[dict[str, Any]]:
    cur.execute(statement, params)
    return list(cur.fetchall())


def _count(cur: Any, statement: str, params: list[Any], *, rows: int) -> None:
    """Move counters in this connection's slot; a missing counter row fails the call.

    The slot spreads concurrent connections over different rows. The rows are
    created by install_schema for every status it knows; a status added to the
    model later needs a migration, and without one counts() would silently
    miss it, so a short row count rolls the call back instead.
    """
    slot = int(cur.connection.thread_id()) % COUNTER_SLOTS
    if cur.execute(statement, [*params, slot]) != rows:
        raise StoreError(
            f"task_counts lacks a row for {params[1:]!r}: the schema predates this status; "
            "run install_schema()"
        )


def _rolled_back(conn: Any, transaction: bool) -> bool:
    """Roll back an open transaction; False if the connection could not (then it is discarded)."""
    if not transaction:
        return True
    try:
        conn.rollback()
    except pymysql.Error:
        return False
    return True


def _timed_out(exc: pymysql.Error) -> bool:
    """Whether PyMySQL gave up on a socket read or write (read_timeout / write_timeout).

    PyMySQL raises its "Lost connection" / "gone away" error inside the handler
    of the socket's TimeoutError, so that is the error's context.
    """
    return isinstance(exc.__cause__ or exc.__context__, TimeoutError)


def _is_duplicate(exc: StoreError) -> bool:
    cause = exc.__cause__
    return isinstance(cause, pymysql.err.IntegrityError) and bool(cause.args) and (
        cause.args[0] == _DUPLICATE
    )


# -- factories for the kit ------------------------------------------------------------------
def _dsn_from_env() -> str:
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        raise StoreError(
            f"set {DSN_ENV} to a MariaDB DSN (e.g. mysql://root@127.0.0.1:3306/test) "
            "to run the kit against reference_stores.mariadb"
        )
    return dsn


def _fresh_database_name(prefix: str = "chongming_t") -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


@contextlib.contextmanager
def _dropped_on_exit(dsn: str, database: str) -> Generator[None, None, None]:
    """Drop ``database`` when the block ends, however it ends: the factories' bad-day rule.

    The block starts with :func:`install_schema`, whose DDL commits statement by
    statement: an install cut off half-way has created the database and some of its
    tables. So a set-up that fails -- the install, or the store's opening -- drops
    whatever exists of the database before the error goes on; nothing of a failed set-up
    stays on the server. ``drop_schema`` retries a lost connection a bounded number of
    times and never hangs.

    The block's error is always the one raised: if the drop fails too (after its
    retries), its error -- naming the database and the statement that drops it --
    becomes a note on the block's error (a PEP 678 note: shown under its traceback, kept
    by whoever catches it), never a replacement for it. A warning was not chosen: pytest
    moves warnings to a summary far from the failure and other runners drop them. Only a
    drop that fails after a block that ended without error (the teardown itself) raises
    its own error: then it is the only thing to report.
    """
    try:
        yield
    except BaseException as exc:
        try:
            drop_schema(dsn, database)
        except Exception as failed:
            if isinstance(exc, GeneratorExit):  # the factory was closed: a plain teardown
                raise
            exc.add_note(f"and dropping what the failed set-up left failed too: {failed}")
        raise
    drop_schema(dsn, database)


def make_store() -> Generator[MariaDBTaskStore, None, None]:
    """A store on a freshly installed database from ``$CHONGMING_TEST_MARIADB``, dropped after.

    The database is dropped also when the install or the store's opening fails
    (:func:`_dropped_on_exit`): a set-up that fails on a bad day leaves nothing behind.
    """
    dsn = _dsn_from_env()
    database = _fresh_database_name()
    with _dropped_on_exit(dsn, database):
        install_schema(dsn, database)
        store = MariaDBTaskStore(dsn, database=database)
        try:
            yield store
        finally:
            store.close()


def routed_dsn(dsn: str, network: Any) -> str:
    """``dsn`` with its server address replaced by ``network.route(host, port)``.

    The address is the one ``parse_dsn`` reads (host 127.0.0.1 and port 3306
    when the DSN leaves them out); everything else of the DSN -- user, password,
    database, ``connect_timeout`` -- is kept as written. A DSN that names a
    ``unix_socket`` is refused: a fault proxy can only sit on a TCP link.
    """
    params = parse_dsn(dsn)
    if params.unix_socket is not None:
        raise StoreError(
            "the network seam needs a TCP host in the MariaDB DSN, not unix_socket=: "
            "a fault proxy can only sit on a TCP link"
        )
    host, port = network.route(params.host, params.port)
    host = str(host)
    parts = urlsplit(dsn.strip())
    userinfo = parts.netloc.rpartition("@")[0]  # still percent-encoded, as written
    address = f"[{host}]" if ":" in host else host  # an IPv6 literal
    netloc = f"{userinfo}@{address}:{int(port)}" if userinfo else f"{address}:{int(port)}"
    return urlunsplit(parts._replace(netloc=netloc))


def make_shared_store(
    network: Any = None,
) -> Generator[Callable[[], MariaDBTaskStore], None, None]:
    """A fresh database, and a picklable opener other processes use to reach it.

    ``network`` is the kit's fault-injection seam: an object whose
    ``route(host, port)`` returns the address of a fault proxy in front of
    (host, port). It is called here, in the parent process, and the opener's
    stores -- the workers -- connect to the routed address, so the kit can reset,
    blackhole or slow their links. Installing and dropping the database use the
    direct address: a fault must never hit the set-up or the teardown. Without
    ``network`` nothing is routed.
    """
    dsn = _dsn_from_env()
    opener_dsn = None if network is None else routed_dsn(dsn, network)  # refuse before install
    database = _fresh_database_name()
    with _dropped_on_exit(dsn, database):  # also when the install fails half-way
        install_schema(dsn, database)
        if opener_dsn is None:
            yield functools.partial(MariaDBTaskStore.open, dsn, database=database)
        else:
            # Short bounds for the workers behind the fault proxy: the kit's no-hang
            # bound is 20 s, and a call may first wait for a connection (timeout) and
            # then for the server (call_timeout). This factory is the test wiring; a
            # production deployment picks its own call_timeout (the default is 30 s).
            yield functools.partial(
                MariaDBTaskStore.open,
                opener_dsn,
                database=database,
                call_timeout=NETWORK_CALL_TIMEOUT,
                timeout=NETWORK_CALL_TIMEOUT,
            )


def reset_store(store: MariaDBTaskStore) -> None:
    """Empty ``store`` for reuse: every table, children first, one transaction; counters to 0."""
    if not isinstance(store, MariaDBTaskStore):
        raise StoreError(f"reset_store() takes a MariaDBTaskStore, got {type(store).__name__}")
    store.reset()
