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
* **Filters run in SQL, on indexes**: created_at, bucket, pipeline_run_id,
  status, tags (GIN, exact element match with ``tags ? %s`` -- never LIKE on
  the text), and a partial index over unfinished commands for the claim.
  ``name_prefix`` uses ``starts_with()`` (PostgreSQL >= 11), so ``%`` and
  ``_`` are literal.
* **counts() reads counters**, not the tasks: ``task_counts`` is kept by
  triggers on ``tasks`` in the writing transaction, striped per backend so
  concurrent writers do not queue on one row (docs/postgres.md).
* **timestamptz everywhere**, sessions in UTC, values returned UTC-aware.
* **Schema management is separate.** :func:`install_schema` (idempotent,
  versioned via a ``schema_version`` table) needs CREATE; the store itself only
  runs SELECT/INSERT/UPDATE/DELETE, so it works under a role with DML grants
  only. Identifiers are quoted with ``psycopg.sql.Identifier``, never
  formatted into the text.

To copy it: keep the statements, change the table layout if you must (the
column names come from ``chongming_conformance.codec``), and keep the
``_connection`` wrapper that turns driver errors into StoreError. The SQL and
the reasoning are in docs/postgres.md.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import select
import threading
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

try:
    import psycopg
    from psycopg import sql
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
from chongming_conformance.codec import (
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
from chongming_conformance.progress import note as progress_note
from chongming_conformance.report.masking import mask_secrets

__all__ = [
    "DSN_ENV",
    "SCHEMA_VERSION",
    "PostgresTaskStore",
    "claim_statement",
    "drop_schema",
    "install_schema",
    "make_fresh_store",
    "make_shared_store",
    "make_store",
    "query_statement",
    "validate_schema_name",
]

#: Environment variable holding the DSN used by make_store()/make_shared_store().
DSN_ENV = "CHONGMING_TEST_POSTGRES"
#: Version of the DDL below; the store refuses a schema with another version.
SCHEMA_VERSION = 2
#: counts() counters are striped over this many rows per status, picked by the
#: writing backend's pid, so concurrent writers rarely wait on one counter row.
COUNTER_SLOTS = 64

_TASK_DT = ("created_at", "updated_at", "started_at", "finished_at", "heartbeat_at", "lease_until")
_COMMAND_DT = ("created_at", "lease_until", "finished_at")

# -- DDL ----------------------------------------------------------------------------------
# Every statement is a template whose only placeholder is the schema identifier.
# ``IF NOT EXISTS`` everywhere, so a half-applied install (it runs in one
# transaction, so it should not happen) can be re-run.
_DDL_V1: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS {schema}.tasks (
        task_id          text PRIMARY KEY,
        name             text NOT NULL,
        status           text NOT NULL,
        status_version   bigint NOT NULL,
        created_at       timestamptz NOT NULL,
        updated_at       timestamptz NOT NULL,
        started_at       timestamptz,
        finished_at      timestamptz,
        tags             jsonb NOT NULL DEFAULT '[]'::jsonb,
        bucket           bigint,
        pipeline_run_id  text,
        progress_done    bigint,
        progress_total   bigint,
        progress_message text,
        failure_type     text,
        failure_message  text,
        failure_detail   text,
        heartbeat_at     timestamptz,
        lease_owner      text,
        lease_until      timestamptz
    )""",
    "CREATE INDEX IF NOT EXISTS tasks_created_idx ON {schema}.tasks (created_at, task_id)",
    "CREATE INDEX IF NOT EXISTS tasks_status_idx ON {schema}.tasks (status)",
    "CREATE INDEX IF NOT EXISTS tasks_bucket_idx ON {schema}.tasks (bucket)",
    "CREATE INDEX IF NOT EXISTS tasks_pipeline_idx ON {schema}.tasks (pipeline_run_id)",
    # jsonb_ops (the default opclass) supports ``?``; jsonb_path_ops would not.
    "CREATE INDEX IF NOT EXISTS tasks_tags_idx ON {schema}.tasks USING gin (tags)",
    """CREATE TABLE IF NOT EXISTS {schema}.transitions (
        task_id     text NOT NULL,
        version     bigint NOT NULL,
        from_status text,
        to_status   text NOT NULL,
        at          timestamptz NOT NULL,
        reason      text,
        PRIMARY KEY (task_id, version)
    )""",
    """CREATE TABLE IF NOT EXISTS {schema}.commands (
        command_id  text PRIMARY KEY,
        task_id     text NOT NULL,
        kind        text NOT NULL,
        issued_by   text NOT NULL,
        created_at  timestamptz NOT NULL,
        lease_until timestamptz,
        finished_at timestamptz,
        outcome     text
    )""",
    # The claim scans this in (created_at, command_id) order; finished commands,
    # the vast majority in a long-lived system, are not in it at all.
    "CREATE INDEX IF NOT EXISTS commands_unfinished_idx ON {schema}.commands "
    "(created_at, command_id) WHERE finished_at IS NULL",
    "CREATE INDEX IF NOT EXISTS commands_task_idx ON {schema}.commands (task_id)",
)
# Version 2: hot reads flat from 10k to 1M tasks (docs/benchmarks.md).
_DDL_V2: tuple[str, ...] = (
    # Filter and order in one index: "the bucket's tasks by created_at" reads
    # LIMIT rows in order instead of sorting the bucket.
    "DROP INDEX IF EXISTS {schema}.tasks_bucket_idx",
    "CREATE INDEX tasks_bucket_idx ON {schema}.tasks (bucket, created_at, task_id)",
    # "The bucket's RUNNING tasks": two equalities, then the order.
    "DROP INDEX IF EXISTS {schema}.tasks_status_idx",
    "CREATE INDEX tasks_status_idx ON {schema}.tasks (status, bucket, created_at, task_id)",
    # counts() sums this table (at most statuses x COUNTER_SLOTS rows) instead of
    # reading every task. Triggers keep it exact in the transaction that writes
    # the tasks, whoever writes them (the store, COPY, an operator's SQL).
    """CREATE TABLE IF NOT EXISTS {schema}.task_counts (
        status text NOT NULL,
        slot   integer NOT NULL,
        n      bigint NOT NULL,
        PRIMARY KEY (status, slot)
    )""",
    "INSERT INTO {schema}.task_counts (status, slot, n) "
    "SELECT status, 0, count(*) FROM {schema}.tasks GROUP BY status",
    # One function for the three triggers. The search_path is pinned to the
    # schema (an identifier, quoted outside the body), so the body names no
    # schema and a schema name can never break out of the function text.
    # Each statement's deltas are summed per status and applied in status
    # order, so two of the store's transactions (one tasks statement each) lock
    # counter rows in the same order: no deadlock. The slot is per backend, so
    # concurrent connections mostly update different rows.
    """CREATE OR REPLACE FUNCTION {schema}.count_tasks() RETURNS trigger
    LANGUAGE plpgsql SET search_path = {schema}, pg_catalog AS $body$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO task_counts AS c (status, slot, n)
                SELECT status, pg_backend_pid() % {slots}, count(*) FROM new_rows
                GROUP BY status ORDER BY status
                ON CONFLICT (status, slot) DO UPDATE SET n = c.n + excluded.n;
        ELSIF TG_OP = 'DELETE' THEN
            INSERT INTO task_counts AS c (status, slot, n)
                SELECT status, pg_backend_pid() % {slots}, -count(*) FROM old_rows
                GROUP BY status ORDER BY status
                ON CONFLICT (status, slot) DO UPDATE SET n = c.n + excluded.n;
        ELSE  -- a row whose status changed (see the trigger's WHEN)
            INSERT INTO task_counts AS c (status, slot, n)
                SELECT status, pg_backend_pid() % {slots}, d
                FROM (VALUES (OLD.status, -1), (NEW.status, 1)) AS changes (status, d)
                ORDER BY status
                ON CONFLICT (status, slot) DO UPDATE SET n = c.n + excluded.n;
        END IF;
        RETURN NULL;
    END
    $body$""".replace("{slots}", str(COUNTER_SLOTS)),
    # Statement-level with transition tables: a COPY of a million rows is one
    # trigger call and one GROUP BY, not a million counter updates.
    "CREATE TRIGGER tasks_count_insert AFTER INSERT ON {schema}.tasks "
    "REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION {schema}.count_tasks()",
    "CREATE TRIGGER tasks_count_delete AFTER DELETE ON {schema}.tasks "
    "REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT "
    "EXECUTE FUNCTION {schema}.count_tasks()",
    # A status change is one row (save), so this one is row-level, which allows
    # a column list and a WHEN: touch() never sets the column, and a save that
    # keeps the status is filtered in C before any PL/pgSQL runs.
    "CREATE TRIGGER tasks_count_update AFTER UPDATE OF status ON {schema}.tasks "
    "FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) "
    "EXECUTE FUNCTION {schema}.count_tasks()",
)
#: version -> DDL that brings a schema from version-1 to version.
_MIGRATIONS: dict[int, tuple[str, ...]] = {1: _DDL_V1, 2: _DDL_V2}


#: PostgreSQL's identifier limit (NAMEDATALEN - 1) in bytes; longer names are truncated by the
#: server without an error, so two long names sharing a prefix would be one schema.
MAX_SCHEMA_BYTES = 63


def validate_schema_name(schema: object) -> str:
    """``schema`` if PostgreSQL will store it exactly as given, else a :class:`StoreError`.

    Quoting (``sql.Identifier``) already makes any characters safe; what it cannot
    prevent is an empty name (a driver error far from the cause) or a name the
    server silently truncates to 63 bytes.
    """
    if not isinstance(schema, str):
        raise StoreError(f"schema name must be a str, got {type(schema).__name__}")
    if not schema:
        raise StoreError("schema name must not be empty")
    if "\x00" in schema:
        raise StoreError(f"schema name {schema!r} contains a NUL character")
    size = len(schema.encode("utf-8"))
    if size > MAX_SCHEMA_BYTES:
        raise StoreError(
            f"schema name {schema!r} is {size} bytes; PostgreSQL keeps only the first "
            f"{MAX_SCHEMA_BYTES} (silently), so use a shorter name"
        )
    return schema


def _failure(doing: str, exc: BaseException) -> StoreError:
    """The StoreError for a driver error: what the store was doing, the cause, masked.

    libpq error texts can echo the DSN they were given (a malformed one in full).
    """
    return StoreError(mask_secrets(f"{doing} failed: {type(exc).__name__}: {exc}"))


@contextmanager
def _driver_errors(doing: str) -> Iterator[None]:
    """Every psycopg error inside becomes a masked StoreError with the cause chained."""
    try:
        yield
    except psycopg.Error as exc:
        raise _failure(doing, exc) from exc


def _ident(schema: str, table: str) -> sql.Identifier:
    return sql.Identifier(schema, table)


@contextmanager
def _admin_connection(
    conn_or_dsn: psycopg.Connection[Any] | str,
) -> Iterator[psycopg.Connection[Any]]:
    if isinstance(conn_or_dsn, str):
        with psycopg.connect(conn_or_dsn, autocommit=True) as conn:
            yield conn
    else:
        yield conn_or_dsn


def install_schema(conn_or_dsn: psycopg.Connection[Any] | str, schema: str) -> int:
    """Create (or upgrade) the store's tables in ``schema``; return the installed version.

    Idempotent and safe to run concurrently (an advisory lock serialises
    installers). Runs in one transaction: given a connection that is already
    in a transaction it uses a savepoint and the caller commits. Needs CREATE
    on the database (or an existing schema you own); the store itself does not.
    """
    s = sql.Identifier(validate_schema_name(schema))
    # Seconds on a busy server: say so, or the first test looks hung (shown by the
    # plugin as a "chongming:" line; a no-op anywhere else).
    progress_note(f"postgres: installing the schema {schema!r}")
    with _driver_errors(f"install_schema({schema!r})"), _admin_connection(
        conn_or_dsn
    ) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"chongming:{schema}"])
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(s))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (version integer PRIMARY KEY, "
                "installed_at timestamptz NOT NULL DEFAULT now())"
            ).format(_ident(schema, "schema_version"))
        )
        row = conn.execute(
            sql.SQL("SELECT max(version) FROM {}").format(_ident(schema, "schema_version"))
        ).fetchone()
        current = 0 if row is None or row[0] is None else int(row[0])
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"schema {schema!r} is at version {current}, newer than this code "
                f"({SCHEMA_VERSION}); upgrade chongming-conformance"
            )
        for version in range(current + 1, SCHEMA_VERSION + 1):
            for statement in _MIGRATIONS[version]:
                conn.execute(sql.SQL(statement).format(schema=s))
        if current < SCHEMA_VERSION:
            # One row per install or upgrade: the version it reached (a fresh
            # install records only the final version; an upgrade adds a row).
            conn.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(
                    _ident(schema, "schema_version")
                ),
                [SCHEMA_VERSION],
            )
    return SCHEMA_VERSION


def drop_schema(conn_or_dsn: psycopg.Connection[Any] | str, schema: str) -> None:
    """Drop ``schema`` and everything in it (test teardown). Missing schema: no-op."""
    validate_schema_name(schema)
    with _driver_errors(f"drop_schema({schema!r})"), _admin_connection(
        conn_or_dsn
    ) as conn, conn.transaction():
        # Never hang a teardown forever behind a forgotten transaction.
        conn.execute("SET LOCAL lock_timeout = '30s'")
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


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
        return mask_secrets(f"a direct connection fails: {exc}")


def _configure(conn: psycopg.Connection[Any]) -> None:
    # Results come back as UTC-aware datetimes whatever the server's default.
    conn.execute("SET TIME ZONE 'UTC'")
    if not conn.autocommit:
        conn.commit()


class PostgresTaskStore:
    """TaskStore over a psycopg connection pool; see the module docstring.

    ``dsn_or_pool`` is a DSN (the store creates and owns a small pool) or a
    ``psycopg_pool.ConnectionPool`` you own (the store borrows it and, unless
    ``close_pool=True``, leaves it open on close()). The schema must have been
    installed with :func:`install_schema`; opening checks its version.
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
    ) -> None:
        self._schema = validate_schema_name(schema)
        self._closed = False
        if isinstance(dsn_or_pool, ConnectionPool):
            self._pool: ConnectionPool[Any] = dsn_or_pool
            self._owns_pool = bool(close_pool)
        else:
            self._pool = ConnectionPool(
                dsn_or_pool,
                min_size=min_size,
                max_size=max_size,
                kwargs={"autocommit": True},
                configure=_configure,
                # Test a connection before lending it: a backend killed while
                # idle (pg_terminate_backend, server restart) is replaced
                # instead of failing the next call.
                check=_check_connection,
                timeout=timeout,
                name=f"chongming:{schema}",
                num_workers=1,
                open=False,
            )
            self._owns_pool = True if close_pool is None else close_pool
            try:
                self._pool.open(wait=True, timeout=timeout)
            except psycopg.Error as exc:
                self._pool.close()
                raise StoreError(mask_secrets(
                    f"cannot connect to PostgreSQL: {exc}; {_connect_problem(dsn_or_pool)}"
                )) from exc
        self._build_statements()
        try:
            self._check_schema()
        except BaseException:
            self.close()
            raise

    @classmethod
    def open(cls, dsn: str, *, schema: str, max_size: int = 2) -> PostgresTaskStore:
        """An independent store with its own small pool (the shared-store opener)."""
        return cls(dsn, schema=schema, min_size=1, max_size=max_size)

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

        The pool's context commits on success and rolls back on error, and
        discards a connection that is no longer usable, which is how the
        store heals after a killed backend.
        """
        if self._closed:
            raise StoreError(f"{operation}() on a closed PostgresTaskStore")
        try:
            with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            if self._closed:
                raise StoreError(f"{operation}() on a closed PostgresTaskStore") from exc
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
        if self._owns_pool:
            self._pool.close()


# -- factories for the kit ------------------------------------------------------------------------
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
                pool = ConnectionPool(
                    dsn,
                    min_size=1,
                    max_size=8,
                    kwargs={"autocommit": True},
                    configure=_configure,
                    check=_check_connection,
                    timeout=15.0,
                    name="chongming:make_store",
                    num_workers=1,
                    open=False,
                )
                try:
                    pool.open(wait=True, timeout=15.0)
                except psycopg.Error as exc:
                    pool.close()
                    raise StoreError(mask_secrets(
                        f"cannot connect to PostgreSQL: {exc}; {_connect_problem(dsn)}"
                    )) from exc
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


def make_store() -> Generator[PostgresTaskStore, None, None]:
    """Generator factory: a store on an empty schema, recycled (emptied) on teardown.

    Every store starts with no tasks, history, commands or counters, exactly
    like a fresh schema (tests/integration/test_postgres_store.py proves it),
    at a fraction of the cost; :func:`make_fresh_store` is the old way.
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


def make_fresh_store() -> Generator[PostgresTaskStore, None, None]:
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


def make_shared_store() -> Generator[Callable[[], PostgresTaskStore], None, None]:
    """Generator factory: a fresh schema, and a picklable opener for other processes."""
    dsn = _dsn_from_env()
    schema = _fresh_schema_name()
    install_schema(dsn, schema)
    try:
        yield functools.partial(PostgresTaskStore.open, dsn, schema=schema)
    finally:
        drop_schema(dsn, schema)
