"""A third party's PostgreSQL store, written from the docs the plain way (issue 24's yardstick).

Not a reference store: what a newcomer writes in an afternoon after reading
docs/porting.md -- one psycopg connection per store, the codec's rows as they are (times as
the codec's fixed-width UTC text, so text order is time order), tags as ``text[]``, counts by
``GROUP BY``, no pool, no triggers, no private test plumbing. What it does have is the kit's
public reuse seam: ``reset_store`` next to ``make_store``, so the kit opens one store per
process instead of a schema per hypothesis example.

``benchmarks/store_reuse.py`` runs it through the plugin beside
``reference_stores.postgres`` and compares their wall times (docs/benchmarks.md, "Store
reuse"), and requires its run to pass the must gate. Run it yourself::

    CHONGMING_TEST_POSTGRES=postgresql://postgres@127.0.0.1:5432/test \\
        pytest -n 2 --chongming-store=third_party_pg:make_store   # from benchmarks/
"""

from __future__ import annotations

import functools
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql

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
    encode_tags,
    progress_to_row,
    row_to_command,
    row_to_snapshot,
    row_to_transition,
    snapshot_to_row,
    transition_to_row,
)

DSN_ENV = "CHONGMING_TEST_POSTGRES"
_INTEGER = {"status_version", "bucket", "progress_done", "progress_total", "version"}
_TERMINAL = sorted(s.value for s in TERMINAL_STATUSES)


def _ddl(schema: str) -> list[sql.Composable]:
    def column(name: str) -> str:
        return f"{name} {'BIGINT' if name in _INTEGER else 'TEXT'}"

    task_cols = ", ".join(column(c) for c in SNAPSHOT_COLUMNS if c != "tags")
    s = sql.Identifier(schema)
    return [
        sql.SQL("CREATE SCHEMA {}").format(s),
        sql.SQL("CREATE TABLE {}.tasks (" + task_cols + ", tags TEXT[] NOT NULL, "
                "PRIMARY KEY (task_id))").format(s),
        sql.SQL("CREATE INDEX ON {}.tasks (created_at, task_id)").format(s),
        sql.SQL("CREATE TABLE {}.transitions (" + ", ".join(column(c) for c in TRANSITION_COLUMNS)
                + ", PRIMARY KEY (task_id, version))").format(s),
        sql.SQL("CREATE TABLE {}.commands (" + ", ".join(column(c) for c in COMMAND_COLUMNS)
                + ", PRIMARY KEY (command_id))").format(s),
    ]


class ThirdPartyStore:
    """A TaskStore on one psycopg connection to one schema."""

    def __init__(self, dsn: str, schema: str) -> None:
        self.schema = schema
        self._lock = threading.Lock()
        try:
            self._conn: psycopg.Connection[Any] | None = psycopg.connect(dsn, autocommit=True)
        except psycopg.Error as exc:
            raise StoreError(f"cannot connect: {type(exc).__name__}") from exc

    def _t(self, table: str) -> sql.Composed:
        return sql.SQL("{}.{}").format(sql.Identifier(self.schema), sql.Identifier(table))

    def _run(self, fn: Callable[[psycopg.Connection[Any]], Any], *, atomic: bool = False) -> Any:
        with self._lock:
            if self._conn is None:
                raise StoreError("the store is closed")
            try:
                if atomic:
                    with self._conn.transaction():
                        return fn(self._conn)
                return fn(self._conn)
            except psycopg.Error as exc:
                raise StoreError(f"{type(exc).__name__}: {exc}") from exc

    # -- rows ---------------------------------------------------------------------------------
    @staticmethod
    def _task_params(snapshot: TaskSnapshot) -> dict[str, Any]:
        row = snapshot_to_row(snapshot)
        row["tags"] = sorted(snapshot.tags)
        return row

    @staticmethod
    def _task(row: Mapping[str, Any]) -> TaskSnapshot:
        return row_to_snapshot({**row, "tags": encode_tags(frozenset(row["tags"]))})

    def _select_tasks(self, where: sql.Composable, params: Mapping[str, Any],
                      tail: sql.Composable | None = None) -> list[TaskSnapshot]:
        tail = sql.SQL("") if tail is None else tail
        statement = sql.SQL("SELECT * FROM {} WHERE {} {}").format(self._t("tasks"), where, tail)

        def go(conn: psycopg.Connection[Any]) -> list[TaskSnapshot]:
            with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
                return [self._task(r) for r in cur.execute(statement, params).fetchall()]

        result: list[TaskSnapshot] = self._run(go)
        return result

    # -- snapshots ----------------------------------------------------------------------------
    def create(self, snapshot: TaskSnapshot) -> None:
        row = self._task_params(snapshot)
        statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            self._t("tasks"), sql.SQL(", ").join(map(sql.Identifier, row)),
            sql.SQL(", ").join(map(sql.Placeholder, row)))
        try:
            self._run(lambda c: c.execute(statement, row))
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise StoreError(f"task {snapshot.task_id!r} exists") from exc
            raise

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        row = self._task_params(snapshot)
        cols = [c for c in SAVE_COLUMNS if c != "task_id"]
        update = sql.SQL("UPDATE {} SET {} WHERE task_id = %(task_id)s "
                         "AND status_version = %(expect)s").format(
            self._t("tasks"),
            sql.SQL(", ").join(sql.SQL("{} = {}").format(sql.Identifier(c), sql.Placeholder(c))
                               for c in cols))
        select = sql.SQL("SELECT status_version FROM {} WHERE task_id = %s").format(
            self._t("tasks"))

        def go(conn: psycopg.Connection[Any]) -> int | None:
            if conn.execute(update, {**row, "expect": expect_version}).rowcount == 1:
                return -1
            found = conn.execute(select, [snapshot.task_id]).fetchone()
            return None if found is None else int(found[0])

        actual = self._run(go)
        if actual != -1:
            raise ConcurrencyConflict(snapshot.task_id, expect_version, actual)

    def get(self, task_id: str) -> TaskSnapshot | None:
        found = self._select_tasks(sql.SQL("task_id = %(id)s"), {"id": task_id})
        return found[0] if found else None

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if q.limit == 0 or q.statuses == frozenset() or q.buckets == frozenset():
            return []
        where: list[sql.Composable] = [sql.SQL("TRUE")]
        params: dict[str, Any] = {}
        if q.statuses is not None:
            where.append(sql.SQL("status = ANY(%(statuses)s)"))
            params["statuses"] = [s.value for s in q.statuses]
        if q.name is not None:
            where.append(sql.SQL("name = %(name)s"))
            params["name"] = q.name
        if q.name_prefix is not None:
            where.append(sql.SQL("left(name, char_length(%(prefix)s)) = %(prefix)s"))
            params["prefix"] = q.name_prefix
        if q.tag is not None:
            where.append(sql.SQL("%(tag)s = ANY(tags)"))
            params["tag"] = q.tag
        if q.buckets is not None:
            where.append(sql.SQL("bucket = ANY(%(buckets)s::bigint[])"))
            params["buckets"] = list(q.buckets)
        if q.pipeline_run_id is not None:
            where.append(sql.SQL("pipeline_run_id = %(run)s"))
            params["run"] = q.pipeline_run_id
        order = "DESC" if q.newest_first else "ASC"
        tail = sql.SQL(f"ORDER BY created_at {order}, task_id {order}")
        if q.limit is not None:
            tail = tail + sql.SQL(" LIMIT %(limit)s")
            params["limit"] = q.limit
        return self._select_tasks(sql.SQL(" AND ").join(where), params, tail)

    def counts(self) -> Mapping[TaskStatus, int]:
        statement = sql.SQL("SELECT status, count(*) FROM {} GROUP BY status").format(
            self._t("tasks"))
        rows = self._run(lambda c: c.execute(statement).fetchall())
        out = dict.fromkeys(TaskStatus, 0)
        for status, n in rows:
            out[TaskStatus(status)] = int(n)
        return out

    # -- history ------------------------------------------------------------------------------
    def append(self, transition: Transition) -> None:
        row = transition_to_row(transition)
        statement = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING").format(
            self._t("transitions"), sql.SQL(", ").join(map(sql.Identifier, row)),
            sql.SQL(", ").join(map(sql.Placeholder, row)))
        self._run(lambda c: c.execute(statement, row))

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        statement = sql.SQL("SELECT * FROM {} WHERE task_id = %s AND version > %s "
                            "ORDER BY version").format(self._t("transitions"))

        def go(conn: psycopg.Connection[Any]) -> list[Transition]:
            with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
                rows = cur.execute(statement, [task_id, since_version]).fetchall()
                return [row_to_transition(r) for r in rows]

        result: list[Transition] = self._run(go)
        return result

    # -- touch --------------------------------------------------------------------------------
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
        if not changes:
            return
        statement = sql.SQL("UPDATE {} SET {} WHERE task_id = %(task_id)s").format(
            self._t("tasks"),
            sql.SQL(", ").join(sql.SQL("{} = {}").format(sql.Identifier(c), sql.Placeholder(c))
                               for c in changes))
        self._run(lambda c: c.execute(statement, {**changes, "task_id": task_id}))

    # -- commands -----------------------------------------------------------------------------
    def submit_command(self, command: Command) -> None:
        row = command_to_row(command)
        statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
            self._t("commands"), sql.SQL(", ").join(map(sql.Identifier, row)),
            sql.SQL(", ").join(map(sql.Placeholder, row)))
        try:
            self._run(lambda c: c.execute(statement, row))
        except StoreError as exc:
            if isinstance(exc.__cause__, psycopg.errors.UniqueViolation):
                raise StoreError(f"command {command.command_id!r} exists") from exc
            raise

    def claim_commands(self, *, now: datetime, lease_seconds: float,
                       limit: int = 50) -> Sequence[Command]:
        if limit <= 0:
            self._run(lambda c: None)  # a closed store still refuses
            return []
        statement = sql.SQL(
            "WITH picked AS (SELECT command_id FROM {c} WHERE finished_at IS NULL AND "
            "(lease_until IS NULL OR lease_until <= %(now)s) ORDER BY created_at, command_id "
            "LIMIT %(limit)s FOR UPDATE SKIP LOCKED) UPDATE {c} AS x SET lease_until = "
            "%(until)s FROM picked WHERE x.command_id = picked.command_id RETURNING x.*"
        ).format(c=self._t("commands"))
        params = {"now": encode_dt(now), "limit": limit,
                  "until": encode_dt(now + timedelta(seconds=lease_seconds))}

        def go(conn: psycopg.Connection[Any]) -> list[Command]:
            with conn.cursor(row_factory=psycopg.rows.dict_row) as cur:
                rows = cur.execute(statement, params).fetchall()
                return [row_to_command({k: r[k] for k in COMMAND_COLUMNS}) for r in rows]

        result: list[Command] = self._run(go)
        return result

    def complete_command(self, command_id: str, *, now: datetime,
                         outcome: str | None = None) -> None:
        statement = sql.SQL("UPDATE {} SET finished_at = %s, outcome = %s WHERE "
                            "command_id = %s AND finished_at IS NULL").format(self._t("commands"))
        self._run(lambda c: c.execute(statement, [encode_dt(now), outcome, command_id]))

    def release_command(self, command_id: str, *, now: datetime) -> None:
        statement = sql.SQL("UPDATE {} SET lease_until = NULL WHERE command_id = %s "
                            "AND finished_at IS NULL").format(self._t("commands"))
        self._run(lambda c: c.execute(statement, [command_id]))

    # -- operations ---------------------------------------------------------------------------
    def prune(self, *, keep_terminal: int) -> int:
        pick = sql.SQL("SELECT task_id FROM {} WHERE status = ANY(%(t)s) ORDER BY created_at "
                       "DESC, task_id DESC OFFSET %(keep)s FOR UPDATE").format(self._t("tasks"))

        def go(conn: psycopg.Connection[Any]) -> int:
            ids = [r[0] for r in conn.execute(
                pick, {"t": _TERMINAL, "keep": max(keep_terminal, 0)}).fetchall()]
            if not ids:
                return 0
            for table in ("transitions", "commands"):
                conn.execute(sql.SQL("DELETE FROM {} WHERE task_id = ANY(%s)").format(
                    self._t(table)), [ids])
            done = conn.execute(sql.SQL("DELETE FROM {} WHERE task_id = ANY(%s) "
                                        "AND status = ANY(%s)").format(self._t("tasks")),
                                [ids, _TERMINAL])
            return int(done.rowcount)

        dropped: int = self._run(go, atomic=True)
        return dropped

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


# -- the factories the kit is pointed at ----------------------------------------------------------
def _dsn() -> str:
    dsn = os.environ.get(DSN_ENV, "").strip()
    if not dsn:
        raise StoreError(f"set {DSN_ENV}")
    return dsn


def _schema() -> Iterator[str]:
    dsn, schema = _dsn(), f"tp_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in _ddl(schema):
            conn.execute(statement)
    try:
        yield schema
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def make_store() -> Iterator[ThirdPartyStore]:
    """A store on a new schema, dropped at the end (once per process, with reset_store)."""
    for schema in _schema():
        store = ThirdPartyStore(_dsn(), schema)
        try:
            yield store
        finally:
            store.close()


def reset_store(store: ThirdPartyStore) -> None:
    """Empty every table: what lets the kit keep one store per process."""
    for table in ("transitions", "commands", "tasks"):
        store._run(lambda c, t=table: c.execute(sql.SQL("DELETE FROM {}").format(store._t(t))))


def make_shared_store() -> Iterator[Callable[[], ThirdPartyStore]]:
    """A new schema, and an opener of stores on it for other processes."""
    for schema in _schema():
        yield functools.partial(ThirdPartyStore, _dsn(), schema)
