"""SQLite TaskStore (stdlib ``sqlite3``): the store to copy for a relational backend.

Guarantees
    * Every contract clause, for a file path and for ``":memory:"``.
    * Atomic ``save`` (one conditional ``UPDATE``) and atomic ``claim_commands``
      (pick + lease in one ``UPDATE ... RETURNING`` inside ``BEGIN IMMEDIATE``) across
      threads *and* processes: SQLite's file locks serialise writers, WAL lets
      readers run beside the one writer, and a busy timeout makes a second writer
      wait instead of failing at once.
    * Several ``SqliteTaskStore`` instances (threads or processes) on one file see
      each other's committed writes at once: nothing is cached in Python.
    * One instance may be shared by threads (one lock around the connection).
    * Every driver error surfaces as ``StoreError``; ``close()`` really closes.
    * History belongs to its task: a foreign key refuses an ``append`` for a task
      that does not exist (the guide leaves that case open), and ``prune`` deletes
      history, then commands, then tasks.

Does not
    * Work on network filesystems (NFS, SMB): WAL needs shared memory and POSIX
      locks that behave, which they do not there. Use a server database instead.
    * Share a ``":memory:"`` database: each instance is its own private database.
    * Store integers beyond SQLite's signed 64 bits (raises ``StoreError``).
    * Match a tag containing NUL exactly: SQLite's JSON1 (3.40) truncates
      ``\\u0000`` when it decodes an array element.

Scale: the bucket and status indexes carry the query order, and ``counts()``
reads per-status counters kept in the writing transaction, so the hot reads
stay flat from 10k to 1M tasks (docs/benchmarks.md).

Copying it: the schema, the one-statement ``save``, the ``claim`` statement and
the ``prune`` transaction are the parts that carry the contract; the rest is
plumbing through ``chongming_conformance.protocol.codec``.
"""

from __future__ import annotations

import functools
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

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
    encode_dt,
    progress_to_row,
    row_to_command,
    row_to_snapshot,
    row_to_transition,
    snapshot_to_row,
    transition_to_row,
)

__all__ = ["SqliteTaskStore", "make_memory_store", "make_shared_store", "make_store"]

#: What this store tells the kit about itself (docs/plugin.md, "Capabilities"): it talks
#: to no server, so no network fault can reach it. A fault run (--chongming-faults) then
#: pauses its worker processes only, and the network fault clauses are UNSUPPORTED.
CHONGMING_CAPABILITIES = {
    "unsupported": {
        "network": "a database file on local disk: no connection a network fault could break",
    },
}

#: How long a writer waits for another connection's write lock before StoreError.
BUSY_TIMEOUT_SECONDS = 10.0

# Datetimes are codec text: fixed-width UTC ISO-8601, so ORDER BY / <= on the
# text is ORDER BY / <= on the instant. Column names equal the codec's tuples
# (tests/test_sqlite_store.py checks it), so rows go through the codec unchanged.
#: Schema version recorded in ``PRAGMA user_version``; files written before
#: versioning read 0 and are migrated on open.
SCHEMA_VERSION = 3

_SCHEMA_V1 = (
    """
    CREATE TABLE IF NOT EXISTS tasks (
        task_id          TEXT PRIMARY KEY,
        name             TEXT NOT NULL,
        status           TEXT NOT NULL,
        status_version   INTEGER NOT NULL,
        created_at       TEXT NOT NULL,
        updated_at       TEXT NOT NULL,
        started_at       TEXT,
        finished_at      TEXT,
        tags             TEXT NOT NULL,      -- sorted JSON array (codec.encode_tags)
        bucket           INTEGER,
        pipeline_run_id  TEXT,
        progress_done    INTEGER,
        progress_total   INTEGER,
        progress_message TEXT,
        failure_type     TEXT,
        failure_message  TEXT,
        failure_detail   TEXT,
        heartbeat_at     TEXT,
        lease_owner      TEXT,               -- written by create/touch only, never save
        lease_until      TEXT
    )
    """,
    # (created_at, task_id) serves ORDER BY created_at, task_id without a sort.
    "CREATE INDEX IF NOT EXISTS tasks_created ON tasks (created_at, task_id)",
    "CREATE INDEX IF NOT EXISTS tasks_bucket ON tasks (bucket)",
    "CREATE INDEX IF NOT EXISTS tasks_pipeline ON tasks (pipeline_run_id)",
    "CREATE INDEX IF NOT EXISTS tasks_status ON tasks (status)",
    """
    CREATE TABLE IF NOT EXISTS transitions (
        task_id     TEXT NOT NULL,
        version     INTEGER NOT NULL,
        from_status TEXT,
        to_status   TEXT NOT NULL,
        at          TEXT NOT NULL,
        reason      TEXT,
        PRIMARY KEY (task_id, version)       -- makes append idempotent (INSERT OR IGNORE)
    )
    """,
    """
    CREATE TABLE IF NOT EXISTS commands (
        command_id  TEXT PRIMARY KEY,
        task_id     TEXT NOT NULL,
        kind        TEXT NOT NULL,
        issued_by   TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        lease_until TEXT,
        finished_at TEXT,
        outcome     TEXT
    )
    """,
    # Partial index: only unfinished commands are ever claimed, and finished ones
    # pile up; the claim scans this small index in claim order.
    "CREATE INDEX IF NOT EXISTS commands_open ON commands (created_at, command_id) "
    "WHERE finished_at IS NULL",
    # prune deletes commands by task.
    "CREATE INDEX IF NOT EXISTS commands_task ON commands (task_id)",
)

# Version 2: the hot reads stay flat as the table grows (docs/benchmarks.md).
_SCHEMA_V2 = (
    # The hot distributed query, "the tasks in the buckets I own", filters on the
    # bucket and orders by created_at: with the order in the index, a LIMIT stops
    # after LIMIT rows instead of sorting the whole bucket.
    "DROP INDEX IF EXISTS tasks_bucket",
    "CREATE INDEX tasks_bucket ON tasks (bucket, created_at, task_id)",
    # "My bucket's RUNNING tasks": status and bucket are both equalities, then the
    # order; the same index serves a status-only filter (leading column).
    "DROP INDEX IF EXISTS tasks_status",
    "CREATE INDEX tasks_status ON tasks (status, bucket, created_at, task_id)",
    # counts() reads this instead of every task. Triggers keep it exact: they run
    # inside the statement that changes tasks, so in the same transaction, for
    # the store's writes and for any other SQL that writes the table.
    """
    CREATE TABLE IF NOT EXISTS task_counts (
        status TEXT PRIMARY KEY,
        n      INTEGER NOT NULL
    )
    """,
    "INSERT INTO task_counts (status, n) SELECT status, COUNT(*) FROM tasks GROUP BY status",
    """
    CREATE TRIGGER IF NOT EXISTS tasks_count_insert AFTER INSERT ON tasks BEGIN
        INSERT INTO task_counts (status, n) VALUES (NEW.status, 1)
            ON CONFLICT (status) DO UPDATE SET n = n + 1;
    END
    """,
    """
    CREATE TRIGGER IF NOT EXISTS tasks_count_delete AFTER DELETE ON tasks BEGIN
        UPDATE task_counts SET n = n - 1 WHERE status = OLD.status;
    END
    """,
    # A status change by save() is counted by save() itself, in its own BEGIN
    # IMMEDIATE transaction (an UPDATE trigger would run a trigger program on
    # every save, status changed or not).
)

# Version 3: history rows belong to a task -- the most natural relational schema, and
# the kit's own proof that it never appends for a task that does not exist (the guide
# leaves that append open, so a foreign key may refuse it). SQLite cannot add a foreign
# key to a table, so the table is rebuilt; rows of tasks that no longer exist (appended
# for a task never created) cannot satisfy the key and are not carried over. prune()
# deletes a task's history before the task, so no ON DELETE action is needed.
_SCHEMA_V3 = (
    """
    CREATE TABLE transitions_v3 (
        task_id     TEXT NOT NULL REFERENCES tasks (task_id),
        version     INTEGER NOT NULL,
        from_status TEXT,
        to_status   TEXT NOT NULL,
        at          TEXT NOT NULL,
        reason      TEXT,
        PRIMARY KEY (task_id, version)       -- makes append idempotent (INSERT OR IGNORE)
    )
    """,
    "INSERT INTO transitions_v3 SELECT t.* FROM transitions AS t "
    "WHERE t.task_id IN (SELECT task_id FROM tasks)",
    "DROP TABLE transitions",
    "ALTER TABLE transitions_v3 RENAME TO transitions",
)

#: version -> statements that bring a database from version-1 to version.
_MIGRATIONS: dict[int, tuple[str, ...]] = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3}

_TASK_SELECT = f"SELECT {', '.join(SNAPSHOT_COLUMNS)} FROM tasks"
_CREATE_SQL = (
    f"INSERT INTO tasks ({', '.join(SNAPSHOT_COLUMNS)}) "
    f"VALUES ({', '.join(':' + c for c in SNAPSHOT_COLUMNS)})"
)
# Check and write in ONE statement: the version test and the write cannot be
# separated by another writer. The column list comes from codec.SAVE_COLUMNS,
# which excludes the lease columns, so a save can never clobber touch()'s lease.
_SAVE_SQL = (
    "UPDATE tasks SET "
    + ", ".join(f"{c} = :{c}" for c in SAVE_COLUMNS if c != "task_id")
    + " WHERE task_id = :task_id AND status_version = :expect_version"
)
_SAVE_READ_SQL = "SELECT status, status_version FROM tasks WHERE task_id = ?"
# Add ``delta`` to one status's counter (creating the row on first use).
_COUNT_SQL = (
    "INSERT INTO task_counts (status, n) VALUES (:status, :delta) "
    "ON CONFLICT (status) DO UPDATE SET n = n + excluded.n"
)
_APPEND_SQL = (
    f"INSERT OR IGNORE INTO transitions ({', '.join(TRANSITION_COLUMNS)}) "
    f"VALUES ({', '.join(':' + c for c in TRANSITION_COLUMNS)})"
)
_SUBMIT_SQL = (
    f"INSERT INTO commands ({', '.join(COMMAND_COLUMNS)}) "
    f"VALUES ({', '.join(':' + c for c in COMMAND_COLUMNS)})"
)
# Pick and lease in one statement, in one IMMEDIATE transaction: no other
# connection can lease the same rows in between. "lease_until <= now" makes a
# command claimable again exactly at its lease_until (clause CLAIM-LEASE-BOUNDARY).
_CLAIM_SQL = f"""
    UPDATE commands SET lease_until = :lease_until
    WHERE command_id IN (
        SELECT command_id FROM commands
        WHERE finished_at IS NULL AND (lease_until IS NULL OR lease_until <= :now)
        ORDER BY created_at, command_id
        LIMIT :limit
    )
    RETURNING {", ".join(COMMAND_COLUMNS)}
"""
_TERMINAL_VALUES = tuple(sorted(s.value for s in TERMINAL_STATUSES))
# Every terminal task except the newest :keep (newest = created_at, task_id DESC).
# A negative OFFSET counts as 0 in SQLite, so keep_terminal < 0 drops them all,
# like the in-memory store.
_DOOMED_SQL = f"""
    SELECT task_id FROM tasks
    WHERE status IN ({", ".join("?" * len(_TERMINAL_VALUES))})
    ORDER BY created_at DESC, task_id DESC
    LIMIT -1 OFFSET ?
"""

_MIN_RETURNING_VERSION = (3, 35, 0)


def _dict_row(cursor: sqlite3.Cursor, values: tuple[Any, ...]) -> dict[str, Any]:
    """Rows as plain dicts keyed by column name: exactly what the codec reads."""
    return {d[0]: v for d, v in zip(cursor.description, values, strict=True)}


def _migrate(conn: sqlite3.Connection, path: str) -> None:
    """Bring the open database to SCHEMA_VERSION; the caller holds BEGIN IMMEDIATE.

    Version 0 is a fresh file *or* one written before versioning (v1 tables, no
    user_version); version 1's DDL is all ``IF NOT EXISTS``, so both take the
    same path. A newer version is refused rather than half-understood.
    """
    (current,) = conn.execute("PRAGMA user_version").fetchone().values()
    if current > SCHEMA_VERSION:
        raise StoreError(
            f"SQLite database {path!r} is at schema version {current}, newer than this "
            f"code ({SCHEMA_VERSION}); upgrade chongming-conformance"
        )
    for version in range(max(current, 0) + 1, SCHEMA_VERSION + 1):
        for statement in _MIGRATIONS[version]:
            conn.execute(statement)
    if current != SCHEMA_VERSION:
        # PRAGMA takes no parameters; the value is our own int constant.
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


class SqliteTaskStore:
    """TaskStore on one SQLite database file (or a private ``":memory:"`` database)."""

    def __init__(self, path: str | Path) -> None:
        if sqlite3.sqlite_version_info < _MIN_RETURNING_VERSION:
            raise StoreError(
                f"SqliteTaskStore needs SQLite >= 3.35 (UPDATE ... RETURNING); "
                f"this Python links {sqlite3.sqlite_version}"
            )
        self.path = str(path)
        # One lock per instance: sqlite3 connections must not be used by two
        # threads at once, and the lock also makes is-closed checks race-free.
        self._lock = threading.Lock()
        try:
            # isolation_level=None: the driver never opens transactions behind our
            # back; every multi-statement write says BEGIN IMMEDIATE itself.
            conn = sqlite3.connect(
                self.path,
                timeout=BUSY_TIMEOUT_SECONDS,
                isolation_level=None,
                check_same_thread=False,  # guarded by self._lock instead
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        conn.row_factory = _dict_row
        self._conn: sqlite3.Connection | None = conn
        try:
            self._initialise(conn)
        except BaseException:
            conn.close()
            self._conn = None
            raise

    def _initialise(self, conn: sqlite3.Connection) -> None:
        try:
            # Per connection, and outside any transaction (it is a no-op inside one):
            # enforce history -> tasks (schema version 3).
            conn.execute("PRAGMA foreign_keys = ON")
            if self.path != ":memory:":
                # WAL: readers never block the writer nor the writer readers. It is
                # persistent in the file, so only switch when it is not WAL yet
                # (switching needs a lock another process may hold).
                (mode,) = conn.execute("PRAGMA journal_mode").fetchone().values()
                if str(mode).lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
            # Schema in one IMMEDIATE transaction, so processes opening a fresh file
            # at the same time do not race each other's CREATE statements.
            conn.execute("BEGIN IMMEDIATE")
            try:
                _migrate(conn, self.path)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc

    # -- the single guard every method goes through --------------------------------
    @contextmanager
    def _connection(self, op: str, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        """Hold the lock, refuse a closed store, wrap driver errors as StoreError.

        With ``write=True`` the block runs in ``BEGIN IMMEDIATE`` ... ``COMMIT``:
        IMMEDIATE takes the database write lock up front, so a read inside the
        block cannot be invalidated by another writer before our write (a DEFERRED
        transaction would fail with SQLITE_BUSY on upgrade instead of waiting).
        """
        with self._lock:
            conn = self._conn
            if conn is None:
                raise StoreError(f"{op}() on a closed SqliteTaskStore")
            try:
                if not write:
                    yield conn
                    return
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:  # SQLite may already have rolled back
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.IntegrityError as exc:
                raise StoreError(f"{op}(): {exc}") from exc
            except sqlite3.Error as exc:
                raise StoreError(f"{op}() failed on {self.path!r}: {exc}") from exc
            except (OverflowError, UnicodeEncodeError) as exc:
                # Raised by the driver while binding (int beyond 64 bits, lone surrogate).
                raise StoreError(f"{op}(): value not storable in SQLite: {exc}") from exc

    # -- task snapshots --------------------------------------------------------------
    def create(self, snapshot: TaskSnapshot) -> None:
        # A plain INSERT: the PRIMARY KEY turns a duplicate into IntegrityError ->
        # StoreError, and the stored row is untouched (never INSERT OR REPLACE).
        with self._connection("create") as conn:
            conn.execute(_CREATE_SQL, snapshot_to_row(snapshot))

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        params = {**snapshot_to_row(snapshot), "expect_version": expect_version}
        with self._connection("save", write=True) as conn:
            # Inside BEGIN IMMEDIATE nobody else writes until COMMIT, so the row
            # read here is the row the UPDATE below tests: its status tells the
            # counters what changed, its version explains a conflict.
            found = conn.execute(_SAVE_READ_SQL, (snapshot.task_id,)).fetchone()
            if conn.execute(_SAVE_SQL, params).rowcount == 1:
                old_status = found["status"]
                if old_status != snapshot.status.value:
                    conn.execute(_COUNT_SQL, {"status": old_status, "delta": -1})
                    conn.execute(_COUNT_SQL, {"status": snapshot.status.value, "delta": 1})
                return
            actual = None if found is None else int(found["status_version"])
        # Raised after COMMIT (nothing was written); never retried.
        raise ConcurrencyConflict(snapshot.task_id, expect_version, actual)

    def get(self, task_id: str) -> TaskSnapshot | None:
        with self._connection("get") as conn:
            row = conn.execute(f"{_TASK_SELECT} WHERE task_id = ?", (task_id,)).fetchone()
        return None if row is None else row_to_snapshot(row)

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        # An empty collection is a filter that matches nothing; answer before SQL
        # so we never build the invalid "IN ()".
        if q.statuses is not None and not q.statuses:
            return []
        if q.buckets is not None and not q.buckets:
            return []
        where: list[str] = []
        params: list[Any] = []
        if q.statuses is not None:
            where.append(f"status IN ({', '.join('?' * len(q.statuses))})")
            params.extend(sorted(s.value for s in q.statuses))
        if q.name is not None:
            where.append("name = ?")  # BINARY collation: exact and case-sensitive
            params.append(q.name)
        if q.name_prefix is not None:
            # Literal, case-sensitive prefix. Not LIKE: LIKE folds ASCII case and
            # treats % and _ as wildcards. Compared as UTF-8 bytes because SQLite's
            # length()/substr() on TEXT stop at an embedded NUL; a byte prefix of
            # UTF-8 is a character prefix.
            # The empty prefix matches every name, and substr() of an empty BLOB
            # is NULL in SQLite, so it gets no condition at all.
            prefix = q.name_prefix.encode("utf-8")
            if prefix:
                where.append("substr(CAST(name AS BLOB), 1, length(?)) = ?")
                params.extend((prefix, prefix))
        if q.tag is not None:
            # Parse the array: exact element match ("io" is not "ios"), never a
            # substring test on the JSON text.
            where.append("EXISTS (SELECT 1 FROM json_each(tasks.tags) WHERE value = ?)")
            params.append(q.tag)
        if q.buckets is not None:
            where.append(f"bucket IN ({', '.join('?' * len(q.buckets))})")
            params.extend(sorted(q.buckets))  # NULL bucket is never IN (...)
        if q.pipeline_run_id is not None:
            where.append("pipeline_run_id = ?")
            params.append(q.pipeline_run_id)
        sql = _TASK_SELECT
        if where:
            sql += " WHERE " + " AND ".join(where)
        # Ties on created_at are broken by task_id: a stable, documented order.
        sql += (
            " ORDER BY created_at DESC, task_id DESC"
            if q.newest_first
            else " ORDER BY created_at, task_id"
        )
        if q.limit is not None:
            sql += " LIMIT ?"
            params.append(q.limit)
        with self._connection("query") as conn:
            rows = conn.execute(sql, params).fetchall()
        return [row_to_snapshot(r) for r in rows]

    def counts(self) -> Mapping[TaskStatus, int]:
        # The counters (see _SCHEMA_V2) move a status change only in *this*
        # class's save(). A subclass that replaces save() (a test double, an
        # author's variant) may not, so it gets the exact GROUP BY over every task
        # rather than counters that could be silently wrong.
        sql = (
            "SELECT status, SUM(n) AS n FROM task_counts GROUP BY status"
            if type(self).save is SqliteTaskStore.save
            else "SELECT status, COUNT(*) AS n FROM tasks GROUP BY status"
        )
        with self._connection("counts") as conn:
            rows = conn.execute(sql)
            found = {TaskStatus(r["status"]): int(r["n"]) for r in rows.fetchall()}
        return {status: found.get(status, 0) for status in TaskStatus}

    # -- history ---------------------------------------------------------------------
    def append(self, transition: Transition) -> None:
        # OR IGNORE on the (task_id, version) key: a replay keeps the first row. (OR
        # IGNORE does not cover the foreign key: an append for a task that does not
        # exist raises, which surfaces as StoreError.)
        with self._connection("append") as conn:
            conn.execute(_APPEND_SQL, transition_to_row(transition))

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        with self._connection("history") as conn:
            rows = conn.execute(
                f"SELECT {', '.join(TRANSITION_COLUMNS)} FROM transitions "
                "WHERE task_id = ? AND version > ? ORDER BY version",
                (task_id, since_version),
            ).fetchall()
        return [row_to_transition(r) for r in rows]

    # -- touch -----------------------------------------------------------------------
    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        changes: dict[str, Any] = {}
        if progress is not None:
            changes.update(progress_to_row(progress))
        if heartbeat_at is not None:
            changes["heartbeat_at"] = encode_dt(heartbeat_at)
        if lease_owner is not None:
            changes["lease_owner"] = lease_owner
        if lease_until is not None:
            changes["lease_until"] = encode_dt(lease_until)
        with self._connection("touch") as conn:
            if not changes:
                return  # still refused above when closed
            # No status_version in SET or WHERE: the side path never takes part in
            # optimistic concurrency. An unknown task_id updates 0 rows: a no-op.
            assignments = ", ".join(f"{c} = :{c}" for c in changes)
            conn.execute(
                f"UPDATE tasks SET {assignments} WHERE task_id = :task_id",
                {**changes, "task_id": task_id},
            )

    # -- commands --------------------------------------------------------------------
    def submit_command(self, command: Command) -> None:
        with self._connection("submit_command") as conn:
            conn.execute(_SUBMIT_SQL, command_to_row(command))

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        params = {
            "now": encode_dt(now),
            "lease_until": encode_dt(now + timedelta(seconds=lease_seconds)),
            "limit": limit,
        }
        if limit <= 0:  # answered without SQL: a negative LIMIT means "no limit" there
            with self._connection("claim_commands"):
                return []
        with self._connection("claim_commands", write=True) as conn:
            rows = conn.execute(_CLAIM_SQL, params).fetchall()
        # RETURNING gives no order guarantee; restore the claim order.
        claimed = [row_to_command(r) for r in rows]
        claimed.sort(key=lambda c: (c.created_at, c.command_id))
        return claimed

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        # The finished_at IS NULL condition makes a repeat (or unknown id) a no-op.
        with self._connection("complete_command") as conn:
            conn.execute(
                "UPDATE commands SET finished_at = ?, outcome = ? "
                "WHERE command_id = ? AND finished_at IS NULL",
                (encode_dt(now), outcome, command_id),
            )

    def release_command(self, command_id: str, *, now: datetime) -> None:
        # Clear the lease, do not finish: the real owner can claim it at once.
        with self._connection("release_command") as conn:
            conn.execute(
                "UPDATE commands SET lease_until = NULL "
                "WHERE command_id = ? AND finished_at IS NULL",
                (command_id,),
            )

    # -- operations ------------------------------------------------------------------
    def prune(self, *, keep_terminal: int) -> int:
        # One transaction: the doomed set cannot change between the three deletes,
        # and a crash leaves either everything or nothing deleted.
        with self._connection("prune", write=True) as conn:
            doomed = [
                r["task_id"] for r in conn.execute(_DOOMED_SQL, (*_TERMINAL_VALUES, keep_terminal))
            ]
            ids = [(task_id,) for task_id in doomed]
            conn.executemany("DELETE FROM transitions WHERE task_id = ?", ids)
            conn.executemany("DELETE FROM commands WHERE task_id = ?", ids)
            conn.executemany("DELETE FROM tasks WHERE task_id = ?", ids)
        return len(doomed)

    def close(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return  # idempotent
            try:
                conn.close()  # releases the file handle (and the WAL/SHM files' locks)
            except sqlite3.Error as exc:
                raise StoreError(f"close() failed on {self.path!r}: {exc}") from exc


# -- factories for the kit ------------------------------------------------------------
def make_store() -> Iterator[SqliteTaskStore]:
    """A fresh file-backed store in its own temporary directory, removed afterwards."""
    directory = tempfile.mkdtemp(prefix="chongming-sqlite-")
    store = SqliteTaskStore(Path(directory) / "tasks.db")
    try:
        yield store
    finally:
        store.close()
        shutil.rmtree(directory, ignore_errors=True)


def make_memory_store() -> SqliteTaskStore:
    """A fresh private in-memory database (same SQL, no file)."""
    return SqliteTaskStore(":memory:")


def make_shared_store() -> Iterator[Callable[[], SqliteTaskStore]]:
    """One shared database file; yields a picklable opener of new connections to it.

    The schema and WAL mode are set up here, once, so workers opening at the same
    moment do not contend for the journal-mode switch.
    """
    directory = tempfile.mkdtemp(prefix="chongming-sqlite-shared-")
    path = str(Path(directory) / "tasks.db")
    try:
        SqliteTaskStore(path).close()
        yield functools.partial(SqliteTaskStore, path)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
