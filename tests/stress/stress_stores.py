"""Deliberately broken SQLite stores for the stress harness's own tests.

Each class is the reference ``SqliteTaskStore`` with ONE method rewritten the
way real stores get it wrong. Some are invisible to a single connection (the
contract passes them; only the harness can catch them), some are not -- the
tests assert which is which instead of pretending.

The module must stay importable by name: spawned workers unpickle openers
``functools.partial(<class here>, path)`` by reference.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from chongming_conformance import (
    Command,
    ConcurrencyConflict,
    Progress,
    StoreError,
    TaskQuery,
    TaskSnapshot,
)
from chongming_conformance.protocol.codec import (
    COMMAND_COLUMNS,
    SAVE_COLUMNS,
    SNAPSHOT_COLUMNS,
    encode_dt,
    progress_to_row,
    row_to_command,
    snapshot_to_row,
    transition_to_row,
)
from chongming_conformance.protocol.model import Transition
from reference_stores.sqlite import _DOOMED_SQL, _TERMINAL_VALUES, SqliteTaskStore


class CheckThenWriteSave(SqliteTaskStore):
    """save() reads the version, then writes WHERE task_id = ? -- two statements, no lock."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        with self._connection("save") as conn:
            found = conn.execute(
                "SELECT status_version FROM tasks WHERE task_id = ?", (snapshot.task_id,)
            ).fetchone()
        actual = None if found is None else int(found["status_version"])
        if actual != expect_version:
            raise ConcurrencyConflict(snapshot.task_id, expect_version, actual)
        row = snapshot_to_row(snapshot)
        sets = ", ".join(f"{c} = :{c}" for c in SAVE_COLUMNS if c != "task_id")
        with self._connection("save") as conn:
            conn.execute(f"UPDATE tasks SET {sets} WHERE task_id = :task_id", row)


def _claimable_rows(conn: sqlite3.Connection, now: datetime, limit: int) -> list[Any]:
    """The commands a claim at ``now`` may take, read WITHOUT taking them (the broken part)."""
    return conn.execute(
        f"SELECT {', '.join(COMMAND_COLUMNS)} FROM commands WHERE finished_at IS NULL "
        "AND (lease_until IS NULL OR lease_until <= ?) ORDER BY created_at, command_id "
        "LIMIT ?",
        (encode_dt(now), limit),
    ).fetchall()


class UnlockedClaim(SqliteTaskStore):
    """claim_commands() selects, then updates each row: no BEGIN IMMEDIATE around both."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        if limit <= 0:
            with self._connection("claim_commands"):
                return []
        until = now + timedelta(seconds=lease_seconds)
        with self._connection("claim_commands") as conn:
            rows = _claimable_rows(conn, now, limit)
        claimed = []
        for row in rows:
            with self._connection("claim_commands") as conn:
                conn.execute("UPDATE commands SET lease_until = ? WHERE command_id = ?",
                             (encode_dt(until), row["command_id"]))
            claimed.append(replace(row_to_command(row), lease_until=until))
        return claimed


class NoLeaseClaim(SqliteTaskStore):
    """claim_commands() returns free commands (with the lease it *would* set) but stores none."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        until = now + timedelta(seconds=lease_seconds)
        with self._connection("claim_commands") as conn:
            rows = _claimable_rows(conn, now, max(limit, 0))
        return [replace(row_to_command(r), lease_until=until) for r in rows]


class ExpiryIgnoredClaim(SqliteTaskStore):
    """claim_commands() takes only never-leased commands: an expired lease is held forever."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        if limit <= 0:
            with self._connection("claim_commands"):
                return []
        until = encode_dt(now + timedelta(seconds=lease_seconds))
        with self._connection("claim_commands", write=True) as conn:
            rows = conn.execute(
                "UPDATE commands SET lease_until = ? WHERE command_id IN (SELECT command_id "
                "FROM commands WHERE finished_at IS NULL AND lease_until IS NULL "
                f"ORDER BY created_at, command_id LIMIT ?) RETURNING {', '.join(COMMAND_COLUMNS)}",
                (until, limit),
            ).fetchall()
        return sorted((row_to_command(r) for r in rows),
                      key=lambda c: (c.created_at, c.command_id))


class LeaseWritingSave(SqliteTaskStore):
    """save() is atomic but writes every column, the lease included."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        sets = ", ".join(f"{c} = :{c}" for c in SNAPSHOT_COLUMNS if c != "task_id")
        params = {**snapshot_to_row(snapshot), "expect_version": expect_version}
        with self._connection("save", write=True) as conn:
            changed = conn.execute(
                f"UPDATE tasks SET {sets} WHERE task_id = :task_id "
                "AND status_version = :expect_version", params).rowcount
            found = conn.execute("SELECT status_version FROM tasks WHERE task_id = ?",
                                 (snapshot.task_id,)).fetchone()
        if changed != 1:
            actual = None if found is None else int(found["status_version"])
            raise ConcurrencyConflict(snapshot.task_id, expect_version, actual)


class CheckThenInsertAppend(SqliteTaskStore):
    """append() checks for the row, then inserts, on a table with no (task_id, version) key."""

    def _initialise(self, conn: sqlite3.Connection) -> None:
        super()._initialise(conn)
        # The reference schema (v3) rebuilds the table with its (task_id, version) key;
        # this store's table has none (the first instance on a file rebuilds it once).
        conn.execute("BEGIN IMMEDIATE")
        try:
            if any(row["pk"] for row in conn.execute("PRAGMA table_info(transitions)")):
                conn.execute(
                    "CREATE TABLE transitions_nokey (task_id TEXT NOT NULL REFERENCES tasks "
                    "(task_id), version INTEGER NOT NULL, from_status TEXT, to_status TEXT "
                    "NOT NULL, at TEXT NOT NULL, reason TEXT)")
                conn.execute("INSERT INTO transitions_nokey SELECT * FROM transitions")
                conn.execute("DROP TABLE transitions")
                conn.execute("ALTER TABLE transitions_nokey RENAME TO transitions")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def append(self, transition: Transition) -> None:
        row = transition_to_row(transition)
        with self._connection("append") as conn:
            exists = conn.execute("SELECT 1 FROM transitions WHERE task_id = ? AND version = ?",
                                  (transition.task_id, transition.version)).fetchone()
        if exists is None:
            with self._connection("append") as conn:
                conn.execute(
                    f"INSERT INTO transitions ({', '.join(row)}) "
                    f"VALUES ({', '.join(':' + c for c in row)})", row)


class CachingReads(SqliteTaskStore):
    """get() answers from a per-instance cache, dropped only on this instance's own writes."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._cache: dict[str, TaskSnapshot | None] = {}
        self._cache_lock = threading.Lock()

    def get(self, task_id: str) -> TaskSnapshot | None:
        with self._connection("get"):
            pass  # still refuse use after close()
        with self._cache_lock:
            if task_id not in self._cache:
                self._cache[task_id] = super().get(task_id)
            return self._cache[task_id]

    def _forget(self) -> None:
        with self._cache_lock:
            self._cache.clear()

    def create(self, snapshot: TaskSnapshot) -> None:
        self._forget()
        super().create(snapshot)

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        self._forget()
        super().save(snapshot, expect_version=expect_version)

    def touch(self, task_id: str, *, progress: Progress | None = None,
              heartbeat_at: datetime | None = None, lease_owner: str | None = None,
              lease_until: datetime | None = None) -> None:
        self._forget()
        super().touch(task_id, progress=progress, heartbeat_at=heartbeat_at,
                      lease_owner=lease_owner, lease_until=lease_until)

    def prune(self, *, keep_terminal: int) -> int:
        self._forget()
        return super().prune(keep_terminal=keep_terminal)


class ReleaseKeepsLease(SqliteTaskStore):
    """release_command() does nothing: the lease stays until it expires."""

    def release_command(self, command_id: str, *, now: datetime) -> None:
        with self._connection("release_command"):
            return


class TouchBumpsVersion(SqliteTaskStore):
    """touch() also increments status_version."""

    def touch(self, task_id: str, *, progress: Progress | None = None,
              heartbeat_at: datetime | None = None, lease_owner: str | None = None,
              lease_until: datetime | None = None) -> None:
        super().touch(task_id, progress=progress, heartbeat_at=heartbeat_at,
                      lease_owner=lease_owner, lease_until=lease_until)
        with self._connection("touch") as conn:
            conn.execute("UPDATE tasks SET status_version = status_version + 1 "
                         "WHERE task_id = ?", (task_id,))


class StaleRowTouch(SqliteTaskStore):
    """touch() reads the whole row, changes the named fields, writes the whole row back.

    Right through one connection; across processes the write-back carries the
    version read before a concurrent save, undoing it.
    """

    def touch(self, task_id: str, *, progress: Progress | None = None,
              heartbeat_at: datetime | None = None, lease_owner: str | None = None,
              lease_until: datetime | None = None) -> None:
        current = self.get(task_id)
        if current is None:
            return
        changes: dict[str, Any] = {}
        for name, value in (("progress", progress), ("heartbeat_at", heartbeat_at),
                            ("lease_owner", lease_owner), ("lease_until", lease_until)):
            if value is not None:
                changes[name] = value
        if not changes:
            return
        row = snapshot_to_row(current.evolve(**changes))
        sets = ", ".join(f"{c} = :{c}" for c in SNAPSHOT_COLUMNS if c != "task_id")
        with self._connection("touch") as conn:
            conn.execute(f"UPDATE tasks SET {sets} WHERE task_id = :task_id", row)


class CheckThenReplaceCreate(SqliteTaskStore):
    """create() looks for the id, then INSERT OR REPLACE: two racing creates both succeed.

    One connection sees the duplicate check work; across processes both pass
    the check and the later insert silently replaces the first task.
    """

    def create(self, snapshot: TaskSnapshot) -> None:
        with self._connection("create") as conn:
            found = conn.execute("SELECT 1 FROM tasks WHERE task_id = ?",
                                 (snapshot.task_id,)).fetchone()
        if found is not None:
            raise StoreError(f"create(): task {snapshot.task_id!r} exists")
        row = snapshot_to_row(snapshot)
        with self._connection("create") as conn:
            conn.execute(f"INSERT OR REPLACE INTO tasks ({', '.join(row)}) "
                         f"VALUES ({', '.join(':' + c for c in row)})", row)


class OrmStyleSave(SqliteTaskStore):
    """save() reads the row, carries the stored lease over and writes every column.

    What the guide suggests for an in-memory store, done in two steps: the
    lease read first is written back after the compare-and-set, undoing a
    renewal that landed in between. One connection never sees it.
    """

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        stored = self.get(snapshot.task_id)
        super().save(snapshot, expect_version=expect_version)
        if stored is not None:
            with self._connection("save") as conn:
                conn.execute(
                    "UPDATE tasks SET lease_owner = ?, lease_until = ? WHERE task_id = ?",
                    (stored.lease_owner, encode_dt(stored.lease_until), snapshot.task_id))


class SelectThenDeleteEachPrune(SqliteTaskStore):
    """prune() picks the doomed ids, then deletes each in its own transaction, no re-check."""

    def prune(self, *, keep_terminal: int) -> int:
        with self._connection("prune") as conn:
            doomed = [r["task_id"] for r in conn.execute(
                _DOOMED_SQL, (*_TERMINAL_VALUES, keep_terminal))]
        for task_id in doomed:
            with self._connection("prune", write=True) as conn:
                conn.execute("DELETE FROM transitions WHERE task_id = ?", (task_id,))
                conn.execute("DELETE FROM commands WHERE task_id = ?", (task_id,))
                conn.execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))
        return len(doomed)


class PipelineFilterByTruthiness(SqliteTaskStore):
    """query() adds ``AND pipeline_run_id = ?`` only ``if q.pipeline_run_id:`` -- the run id ""
    filters nothing. Visible only through a filtered read (nothing else reads that filter)."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        return super().query(replace(q, pipeline_run_id=q.pipeline_run_id or None))


_READS = frozenset({"get", "query", "counts", "history", "touch"})


class UncommittedTouch(SqliteTaskStore):
    """touch() writes inside a transaction it leaves open until the next real write.

    Its own connection reads the touch back; every other process sees the old
    values and waits on the write lock the open transaction holds.
    """

    @contextlib.contextmanager
    def _connection(self, op: str, *, write: bool = False) -> Iterator[sqlite3.Connection]:
        conn = self._conn
        if op not in _READS and conn is not None and conn.in_transaction:
            conn.execute("COMMIT")  # the next real write finally commits the touches
        with super()._connection(op, write=write) as inner:
            yield inner

    def touch(self, task_id: str, *, progress: Progress | None = None,
              heartbeat_at: datetime | None = None, lease_owner: str | None = None,
              lease_until: datetime | None = None) -> None:
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
                return
            if not conn.in_transaction:
                conn.execute("BEGIN IMMEDIATE")
            sets = ", ".join(f"{c} = :{c}" for c in changes)
            conn.execute(f"UPDATE tasks SET {sets} WHERE task_id = :task_id",
                         {**changes, "task_id": task_id})


class HangingSave(SqliteTaskStore):
    """save() never returns (a deadlocked backend); for the harness's bound, not a clause."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        threading.Event().wait()


# -- factories ------------------------------------------------------------------------------
@functools.cache
def _root() -> Path:
    return Path(tempfile.mkdtemp(prefix="chongming-stress-tests-"))


class LocationPoolClose(SqliteTaskStore):
    """Instances on one file share what the location holds (a pool per location, as a
    module-level cache keyed by DSN does), and close() of any one of them closes it: every
    other instance on that file is dead from then on."""

    _by_location: dict[str, list[SqliteTaskStore]] = {}  # noqa: RUF012 -- the bug

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        LocationPoolClose._by_location.setdefault(str(path), []).append(self)

    def close(self) -> None:
        for store in LocationPoolClose._by_location.pop(self.path, [self]):
            SqliteTaskStore.close(store)


def single(cls: type[SqliteTaskStore]) -> Callable[[], Iterator[SqliteTaskStore]]:
    """A ``make_store`` for the contract: a fresh file per call."""

    def make_store() -> Iterator[SqliteTaskStore]:
        directory = tempfile.mkdtemp(dir=_root())
        store = cls(Path(directory) / "tasks.db")
        try:
            yield store
        finally:
            store.close()
            shutil.rmtree(directory, ignore_errors=True)

    return make_store


def shared(cls: type[SqliteTaskStore]) -> Callable[[], Iterator[Callable[[], Any]]]:
    """A ``make_shared_store`` for the harness: one fresh file, an opener of ``cls`` on it."""

    def make_shared_store() -> Iterator[Callable[[], Any]]:
        directory = tempfile.mkdtemp(dir=_root())
        path = str(Path(directory) / "tasks.db")
        cls(path).close()
        try:
            yield functools.partial(cls, path)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    return make_shared_store


def failing_opener(reason: str) -> SqliteTaskStore:
    """An opener whose backend is unreachable: every worker fails to open it."""
    raise RuntimeError(reason)


def opener_with_connection(conn: sqlite3.Connection) -> SqliteTaskStore:
    """An opener that drags a live connection along: it cannot cross a process boundary."""
    raise AssertionError("never called: the harness refuses to ship it")


def opener_failing_in_workers(parent_pid: int, path: str) -> SqliteTaskStore:
    """Opens fine in the parent (setup) but not in any worker process."""
    import os

    if os.getpid() != parent_pid:
        raise RuntimeError("workers cannot reach the backend")
    return SqliteTaskStore(path)
