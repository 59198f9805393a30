"""Correct SQLite stores that each use one freedom the guide leaves open (issue 22, item 3).

Each class is the SQLite reference store (``reference_stores.sqlite.SqliteTaskStore``)
with one behaviour changed, to one the guide allows. Unlike the in-memory ones
(``latitude_stores.py``) they can be shared between processes, so each has a
``make_store_<Class>`` (a fresh file per test) and a ``make_shared_store_<Class>`` (one
file, a picklable opener), and the kit's cross-process clauses run on them too.
"""

from __future__ import annotations

import functools
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from chongming_conformance import Command, StoreError, TaskQuery, TaskSnapshot
from chongming_conformance.protocol.codec import (
    COMMAND_COLUMNS,
    SNAPSHOT_COLUMNS,
    encode_dt,
    row_to_command,
    row_to_snapshot,
)
from reference_stores.sqlite import SqliteTaskStore

# -- 1. A foreign key on history --------------------------------------------------------------

_TRANSITIONS_WITH_FK = """
    CREATE TABLE IF NOT EXISTS transitions (
        task_id     TEXT NOT NULL,
        version     INTEGER NOT NULL,
        from_status TEXT,
        to_status   TEXT NOT NULL,
        at          TEXT NOT NULL,
        reason      TEXT,
        PRIMARY KEY (task_id, version),
        FOREIGN KEY (task_id) REFERENCES tasks (task_id)
    )
"""


class ForeignKeyHistory(SqliteTaskStore):
    """The reference SQLite store with ``FOREIGN KEY (task_id) REFERENCES tasks(task_id)``
    on ``transitions`` and ``PRAGMA foreign_keys = ON`` on every connection.

    So ``append`` for a task that was never created (or has been pruned) raises
    StoreError (SQLite's "FOREIGN KEY constraint failed", wrapped by the reference
    store's guard), and ``prune`` deletes a task's history before the task (the
    reference store's prune already does, in one transaction).

    Freedom: the guide, §10, "Left unspecified on purpose: ... `append` for a task that
    was never created". The original calls history the task's audit trail (§2.2 审计
    轨迹) and has prune drop tasks "及其历史" (with their history, §2.5): a history row
    belongs to a task. A foreign key is the ordinary way a relational schema says so.
    """

    def _initialise(self, conn: sqlite3.Connection) -> None:
        try:
            # Per connection, outside any transaction (SQLite ignores it inside one).
            conn.execute("PRAGMA foreign_keys = ON")
            # Create the history table with its key before the reference migration
            # runs; its own CREATE TABLE IF NOT EXISTS transitions then does nothing.
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(_TRANSITIONS_WITH_FK)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open SQLite database {self.path!r}: {exc}") from exc
        super()._initialise(conn)


# -- 2. A query read in several short transactions ------------------------------------------

#: Rows per page. Small on purpose: the kit's stores hold a handful of tasks, and the
#: freedom is only exercised when a query spans more than one page.
PAGE_SIZE = 2


def _filters(q: TaskQuery) -> tuple[list[str], list[Any]]:
    """The reference store's WHERE clause for ``q`` (copied: SqliteTaskStore.query)."""
    where: list[str] = []
    params: list[Any] = []
    if q.statuses is not None:
        where.append(f"status IN ({', '.join('?' * len(q.statuses))})")
        params.extend(sorted(s.value for s in q.statuses))
    if q.name is not None:
        where.append("name = ?")
        params.append(q.name)
    if q.name_prefix is not None:
        prefix = q.name_prefix.encode("utf-8")
        if prefix:
            where.append("substr(CAST(name AS BLOB), 1, length(?)) = ?")
            params.extend((prefix, prefix))
    if q.tag is not None:
        where.append("EXISTS (SELECT 1 FROM json_each(tasks.tags) WHERE value = ?)")
        params.append(q.tag)
    if q.buckets is not None:
        where.append(f"bucket IN ({', '.join('?' * len(q.buckets))})")
        params.extend(sorted(q.buckets))
    if q.pipeline_run_id is not None:
        where.append("pipeline_run_id = ?")
        params.append(q.pipeline_run_id)
    return where, params


class PagedQuery(SqliteTaskStore):
    """``query`` reads its rows a page at a time, each page its own short read
    transaction (keyset pagination on ``(created_at, task_id)``), never one snapshot.

    Each returned row is a committed row that matched the filter when its page was read,
    the rows come in the requested order, none twice, at most ``limit`` of them. Under
    concurrent writers a query may therefore mix rows read before and after another
    process's commit (READ COMMITTED-like, as a cursor over a large table in most
    databases, or DynamoDB/Cassandra paging, does). Every write is the reference
    store's, atomic as before.

    Freedom: neither guide asks a query to be one snapshot. The original's only
    atomicity requirements (§3, 并发要求汇总) are ``save``'s check-and-write and
    ``claim``'s pick-and-lease; its query requirements (§2.1) are filters, order,
    ``limit`` and pushdown -- all kept, each page filtered and ordered in SQL. The
    guide's §8 asks that instances "see each other's writes at once -- no private
    cache -- and never a half-written state": every row read is a whole committed row.
    """

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if (q.statuses is not None and not q.statuses) or (
            q.buckets is not None and not q.buckets
        ):
            return []
        where, params = _filters(q)
        order = "DESC" if q.newest_first else "ASC"
        after = "<" if q.newest_first else ">"
        found: list[TaskSnapshot] = []
        seen: set[str] = set()
        cursor: tuple[str, str] | None = None
        while q.limit is None or len(found) < q.limit:
            size = PAGE_SIZE if q.limit is None else min(PAGE_SIZE, q.limit - len(found))
            page_where, page_params = list(where), list(params)
            if cursor is not None:
                page_where.append(f"(created_at, task_id) {after} (?, ?)")
                page_params.extend(cursor)
            sql = f"SELECT {', '.join(SNAPSHOT_COLUMNS)} FROM tasks"
            if page_where:
                sql += " WHERE " + " AND ".join(page_where)
            sql += f" ORDER BY created_at {order}, task_id {order} LIMIT ?"
            page_params.append(size)
            # One statement in autocommit mode: its own read transaction.
            with self._connection("query") as conn:
                rows = conn.execute(sql, page_params).fetchall()
            for row in rows:
                if row["task_id"] not in seen:  # a save that moved created_at mid-scan
                    seen.add(row["task_id"])
                    found.append(row_to_snapshot(row))
            if len(rows) < size:
                break
            cursor = (rows[-1]["created_at"], rows[-1]["task_id"])
        return found


# -- 3. The lease boundary, held -----------------------------------------------------------

# The reference store's claim, with one character changed: a lease ending at lease_until
# still holds *at* lease_until ("lease_until < :now", where the reference has "<=").
_CLAIM_HELD_AT_BOUNDARY_SQL = f"""
    UPDATE commands SET lease_until = :lease_until
    WHERE command_id IN (
        SELECT command_id FROM commands
        WHERE finished_at IS NULL AND (lease_until IS NULL OR lease_until < :now)
        ORDER BY created_at, command_id
        LIMIT :limit
    )
    RETURNING {", ".join(COMMAND_COLUMNS)}
"""


class LeaseHeldAtBoundary(SqliteTaskStore):
    """Treats a lease as held *through* ``lease_until``: at ``now == lease_until`` the
    command is still leased; from the next instant on it is free.

    Freedom: the original, §2.4, a command can be taken when "无租约或租约已过期" (no
    lease, or the lease has expired), and §3 "租约到期可重取" (reclaimable once due): it
    never says whether a lease that ends at ``lease_until`` has already expired *at*
    ``lease_until``; ``lease_until < now`` is as faithful a reading as ``<=``. (The kit's
    §10 decided "free at `now == lease_until`", CLAIM-LEASE-BOUNDARY; issue 22 relaxes
    it.) Shared, so the cross-process crash-recovery scenario runs on it as well.
    """

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        if limit <= 0:  # as the reference store: a negative LIMIT means "no limit" in SQL
            with self._connection("claim_commands"):
                return []
        params = {
            "now": encode_dt(now),
            "lease_until": encode_dt(now + timedelta(seconds=lease_seconds)),
            "limit": limit,
        }
        with self._connection("claim_commands", write=True) as conn:
            rows = conn.execute(_CLAIM_HELD_AT_BOUNDARY_SQL, params).fetchall()
        claimed = [row_to_command(r) for r in rows]
        claimed.sort(key=lambda c: (c.created_at, c.command_id))  # RETURNING has no order
        return claimed


# -- factories -------------------------------------------------------------------------------


def _single(cls: type[SqliteTaskStore]) -> Callable[[], Iterator[SqliteTaskStore]]:
    """A ``make_store``: a fresh database file per test, removed afterwards."""

    def make_store() -> Iterator[SqliteTaskStore]:
        directory = tempfile.mkdtemp(prefix="chongming-latitude-")
        store = cls(Path(directory) / "tasks.db")
        try:
            yield store
        finally:
            store.close()
            shutil.rmtree(directory, ignore_errors=True)

    make_store.__name__ = f"make_store_{cls.__name__}"
    return make_store


def _shared(cls: type[SqliteTaskStore]) -> Callable[[], Iterator[Callable[[], SqliteTaskStore]]]:
    """A ``make_shared_store``: one file, set up once, and a picklable opener on it."""

    def make_shared_store() -> Iterator[Callable[[], SqliteTaskStore]]:
        directory = tempfile.mkdtemp(prefix="chongming-latitude-shared-")
        path = str(Path(directory) / "tasks.db")
        try:
            cls(path).close()
            yield functools.partial(cls, path)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    make_shared_store.__name__ = f"make_shared_store_{cls.__name__}"
    return make_shared_store


make_store_ForeignKeyHistory = _single(ForeignKeyHistory)
make_shared_store_ForeignKeyHistory = _shared(ForeignKeyHistory)
make_store_PagedQuery = _single(PagedQuery)
make_shared_store_PagedQuery = _shared(PagedQuery)
make_store_LeaseHeldAtBoundary = _single(LeaseHeldAtBoundary)
make_shared_store_LeaseHeldAtBoundary = _shared(LeaseHeldAtBoundary)

#: The stores of this module (the test's parameter list is built from it).
STORES: tuple[type[SqliteTaskStore], ...] = (ForeignKeyHistory, PagedQuery, LeaseHeldAtBoundary)
