"""The PostgreSQL store's schema: its DDL, install and upgrade, drop, and name checks.

Kept apart from the store (``reference_stores/postgres.py``) because it runs under
other rights: installing needs CREATE, while the store only ever runs
SELECT/INSERT/UPDATE/DELETE and so works under a role with DML grants only. The
DDL is versioned (a ``schema_version`` table, one migration per version), so an
existing deployment is upgraded in place, and every identifier is quoted with
``psycopg.sql.Identifier``, never formatted into the text.

To copy the store, copy this file with it; docs/postgres.md explains each index
and the counters' triggers. Neither file needs anything of the kit but its public
model, errors and codec (``tests/test_reference_store_imports.py`` keeps it so):
the secret masking error messages need is :func:`_mask_secrets`, here.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

# Without the ``postgres`` extra this import fails; reference_stores.postgres, which
# imports this module, first says which command installs it.
import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from chongming_conformance import StoreError

__all__ = [
    "ADMIN_CONNECT_TIMEOUT",
    "COUNTER_SLOTS",
    "DROP_ATTEMPTS",
    "DROP_BACKOFF",
    "MAX_SCHEMA_BYTES",
    "SCHEMA_VERSION",
    "drop_schema",
    "install_schema",
    "validate_schema_name",
]

#: Version of the DDL below; the store refuses a schema with another version.
SCHEMA_VERSION = 2
#: counts() counters are striped over this many rows per status, picked by the
#: writing backend's pid, so concurrent writers rarely wait on one counter row.
COUNTER_SLOTS = 64


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


#: How many times :func:`drop_schema`, given a DSN, runs when the connection is lost.
DROP_ATTEMPTS = 5
#: Seconds before its second attempt, doubled before each later one (0.2 + 0.4 + 0.8 + 1.6).
DROP_BACKOFF = 0.2
#: Seconds install and drop may take to connect when neither the DSN nor ``PGCONNECT_TIMEOUT``
#: says (psycopg's own default is 130 s).
ADMIN_CONNECT_TIMEOUT = 10

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


# -- errors -------------------------------------------------------------------------------
# A password in a URL's userinfo (``postgresql://user:SECRET@host``): it runs to the URL's
# last ``@``, so a password holding ``@``, ``/`` or ``:`` is masked whole (a path holding
# ``@`` is over-masked, which costs nothing).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*):[^\s'\"]*@")
# A conninfo value whose key names a password (``password=``, ``sslpassword=``,
# ``PGPASSWORD=``), bare or single-quoted with backslash escapes as libpq writes them.
_KEY_PASSWORD = re.compile(
    r"(?P<key>(?<![A-Za-z0-9_])[A-Za-z0-9_]*pass(?:word|wd)\s*=\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s'\"]+)",
    re.IGNORECASE,
)


def _mask_secrets(text: str) -> str:
    """``text`` with the DSN passwords in it replaced by ``***``.

    libpq echoes the DSN it was given in some errors (a malformed one in full), and a
    StoreError's message ends up in logs and issue reports. Two forms carry a password in
    a PostgreSQL DSN, and both are masked: URL userinfo (``postgresql://app:***@db/x``)
    and conninfo keys (``password=***``, ``sslpassword='***'``). Local on purpose: a
    production copy of this store must not depend on the kit's report package
    (``chongming_conformance.report.masking`` masks more forms, for everything the kit
    itself prints).
    """
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}:***@", text)

    def masked(m: re.Match[str]) -> str:
        value = m.group("value")
        quote = value[0] if value[0] in "'\"" else ""
        return f"{m.group('key')}{quote}***{quote}"

    return _KEY_PASSWORD.sub(masked, text)


def _failure(doing: str, exc: BaseException) -> StoreError:
    """The StoreError for a driver error: what the store was doing, the cause, masked.

    libpq error texts can echo the DSN they were given (a malformed one in full).
    """
    return StoreError(_mask_secrets(f"{doing} failed: {type(exc).__name__}: {exc}"))


@contextmanager
def _driver_errors(
    doing: str,
    *,
    _driver_error: type[BaseException] = psycopg.Error,
    _translate: Callable[[str, BaseException], StoreError] = _failure,
) -> Iterator[None]:
    """Every psycopg error inside becomes a masked StoreError with the cause chained.

    The error class and the translation are bound when the module is loaded (keyword
    defaults live on the function, not in the module's globals): a store's teardown can
    run while the interpreter shuts down -- a generator finalised at exit -- when module
    globals may already be None, and ``except None`` would raise a TypeError of its own
    in place of the real error. Whatever happens then, the error that propagates is the
    driver's (or the StoreError made from it), never one made here.
    """
    try:
        yield
    except Exception as exc:
        if not isinstance(exc, _driver_error):
            raise
        try:
            failure = _translate(doing, exc)
        except Exception:  # shutdown: the translation's own globals are gone
            raise exc from None
        raise failure from exc


def _ident(schema: str, table: str) -> sql.Identifier:
    return sql.Identifier(schema, table)


def _quoted(schema: str) -> str:
    """``schema`` as a quoted identifier, for a message that tells someone what to run."""
    return '"' + schema.replace('"', '""') + '"'


def _installers_lock(schema: str) -> str:
    """The key of the advisory lock that serialises installs (and drops) of ``schema``."""
    return f"chongming:{schema}"


def _connection_lost(exc: BaseException | None) -> bool:
    """Whether a driver error says the *connection* failed, not the statement.

    A reset, a server going away or restarting, a connect that was refused or timed out:
    libpq reports those as ``OperationalError`` without an SQLSTATE (the client saw it)
    or with one of class 08 (connection exception) or 57P01-57P03 (the server shutting
    down or starting up). A lock or statement timeout or a missing privilege is an
    OperationalError too, with another SQLSTATE: running it again would fail again, so it
    is not "lost". (A connect the server turns away -- a wrong password, a missing
    database -- carries no SQLSTATE either, so it counts as lost and costs the bounded
    retries before its error is raised.)
    """
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")


@contextmanager
def _admin_connection(
    conn_or_dsn: psycopg.Connection[Any] | str,
) -> Iterator[psycopg.Connection[Any]]:
    if isinstance(conn_or_dsn, str):
        # Safe behind a pooler in transaction mode (PgBouncer), like the store: no
        # server-side prepared statements, and everything below is transaction-scoped
        # (one transaction per call, pg_advisory_xact_lock, SET LOCAL), never SET or
        # a session advisory lock that would stay on a server connection.
        kwargs: dict[str, Any] = {"autocommit": True, "prepare_threshold": None}
        try:
            configured = conninfo_to_dict(conn_or_dsn).get("connect_timeout")
        except psycopg.Error:  # a malformed DSN: connect() below says so, masked
            configured = None
        if configured is None and not os.environ.get("PGCONNECT_TIMEOUT"):
            # A dead server must fail an install or a teardown, not hang it for 130 s.
            kwargs["connect_timeout"] = ADMIN_CONNECT_TIMEOUT
        with psycopg.connect(conn_or_dsn, **kwargs) as conn:
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
    with _driver_errors(f"install_schema({schema!r})"), _admin_connection(
        conn_or_dsn
    ) as conn, conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [_installers_lock(schema)])
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


def drop_schema(
    conn_or_dsn: psycopg.Connection[Any] | str, schema: str, *, attempts: int = DROP_ATTEMPTS
) -> None:
    """Drop ``schema`` and everything in it (test teardown). Missing schema: no-op.

    Built for a bad day, because a teardown that gives up leaves a schema behind on a
    shared server for good:

    * **Retried when the connection is lost** (:func:`_connection_lost`), given a DSN: up
      to ``attempts`` times, waiting ``DROP_BACKOFF`` seconds before the second attempt
      and twice as long before each later one. ``DROP SCHEMA IF EXISTS`` is idempotent,
      so running it again is exact whatever the lost attempt did (it may have dropped
      the schema and lost only the reply). Any other error -- a lock timeout, a missing
      privilege -- is raised at once: running it again would fail again. Given a
      connection, nothing is retried (its failure is the caller's to handle).
    * **After any install of the schema** that is still running: the drop takes the
      installers' advisory lock first, so an install whose client was cut off but whose
      server transaction goes on (its COMMIT was already on the wire) ends first; the
      drop then sees what it committed, instead of dropping nothing and letting the
      install create the schema a moment later.
    * **Never hangs**: connecting gives up after ``ADMIN_CONNECT_TIMEOUT`` seconds (unless
      the DSN says otherwise), waiting for a lock after 30 s.
    * **Says what is left behind**: the StoreError after the last attempt names the
      schema and the statement that drops it by hand.
    """
    validate_schema_name(schema)
    tries = max(1, attempts) if isinstance(conn_or_dsn, str) else 1
    for attempt in range(1, tries + 1):
        try:
            with _driver_errors(f"drop_schema({schema!r})"), _admin_connection(
                conn_or_dsn
            ) as conn, conn.transaction():
                # Never hang a teardown forever behind a forgotten transaction.
                conn.execute("SET LOCAL lock_timeout = '30s'")
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                             [_installers_lock(schema)])
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
            return
        except StoreError as exc:
            if attempt < tries and _connection_lost(exc.__cause__):
                time.sleep(DROP_BACKOFF * 2 ** (attempt - 1))
                continue
            tried = f" (attempt {attempt} of {tries})" if tries > 1 else ""
            raise StoreError(
                f"{exc}{tried}; the schema {schema!r} may be left behind: drop it with "
                f"DROP SCHEMA IF EXISTS {_quoted(schema)} CASCADE"
            ) from exc.__cause__
