"""The MariaDB store's schema: DSN parsing, its DDL, install, drop, and name checks.

Kept apart from the store (``reference_stores/mariadb.py``) because it runs under
other rights: installing needs CREATE (and INSERT on the new tables), while the
store itself only ever runs SELECT/INSERT/UPDATE/DELETE, so it works under a user
with DML grants on one database and nothing else. The DDL is versioned (a
``schema_version`` table, one migration per version) and idempotent
(``IF NOT EXISTS`` everywhere; DDL commits implicitly in MariaDB, so a crashed
install is finished by running it again). Every identifier is quoted with
:func:`quote_ident`, never formatted into the text unquoted.

What each decision is for (the store's docstring has the rest):

* **One database per store**, tables ``tasks``, ``task_tags``, ``transitions``,
  ``commands``, ``task_counts`` and ``schema_version``. A deployment grants the
  store's user ``SELECT, INSERT, UPDATE, DELETE ON <database>.*`` and nothing else.
* **utf8mb4 with a binary, NO PAD collation on every text column**
  (``utf8mb4_nopad_bin`` on MariaDB, ``utf8mb4_0900_bin`` on MySQL 8). ``utf8``
  is utf8mb3 and loses 4-byte characters; the default collations fold case
  (``'A' = 'a'``) and ``utf8mb4_bin`` is PAD SPACE (``'a' = 'a '``), which makes
  ``build`` and ``build `` one primary key. A binary no-pad collation compares
  code points, which is the contract's equality, and orders by code point.
* **Key lengths.** InnoDB (DYNAMIC rows) refuses an index key over 3072 bytes and
  utf8mb4 reserves 4 bytes per character, so a ``VARCHAR(255)`` key costs 1020
  bytes. Ids, tags and pipeline ids are ``VARCHAR(255)`` (``MAX_KEY_CHARS``):
  the widest index, ``task_tags (tag, created_at, task_id)``, is
  1020 + 8 + 1020 = 2048 bytes, and ``task_tags``' primary key
  ``(task_id, tag)`` 2040; 512-character ids or tags would not fit both. A longer
  value is refused with StoreError (strict mode: never truncated). Text that is
  compared but not indexed (``name``) is ``TEXT`` (64 KiB), free text
  ``TEXT``/``MEDIUMTEXT``.
* **Times are DATETIME(6) holding UTC** (the store converts on the way in and
  re-attaches UTC on the way out). Not the codec's text: DATETIME(6) is 8 bytes in
  every index against 32 characters (up to 128 bytes) of text, keeps the
  microseconds, and an operator can compare it with ``UTC_TIMESTAMP(6)``. Not
  TIMESTAMP: its range ends in 2038 and it converts through the session's time
  zone, so a session in another zone would silently shift every value.
  DATETIME's range (years 1000-9999) covers the kit's (1970-2200).
* **Tags live twice**: the codec's JSON array in ``tasks.tags`` (what ``get``
  returns, exactly as the codec wrote it) and one row per tag in ``task_tags``,
  which is what ``query(tag=...)`` compares -- a plain equality on a
  ``VARCHAR`` under the binary collation. Never ``JSON_CONTAINS``: it compares
  escaped text, and Python's ``json`` writes ``\\u000b`` where MariaDB's
  ``JSON_QUOTE`` writes ``\\u000B``, so tags holding some C0 controls are missed.
  ``task_tags`` carries the task's ``created_at`` so that "tag t, oldest first,
  LIMIT 50" walks one index in order instead of sorting every task with the tag.
* **Counters for counts()**: ``task_counts`` has one row per status and slot
  (``COUNTER_SLOTS``), created here, up front. The store only ever *updates*
  them (``n = n + d``), which takes a record lock on an existing row: an
  ``INSERT ... ON DUPLICATE KEY UPDATE`` would take next-key (gap) locks for
  its duplicate check, and two of those deadlock against each other.
* **No foreign keys.** InnoDB checks a foreign key by taking a shared lock on the
  parent row (``tasks``) from a statement that writes the child (``append``,
  ``submit_command``), which adds lock-order paths between calls that otherwise
  never lock a task row; and the contract allows history and commands for a
  task that was never created. ``prune`` deletes the children itself.
* **No triggers.** The store keeps ``task_tags`` and ``task_counts`` in the
  transaction that writes ``tasks`` (docs/mariadb.md); a trigger would run
  with its definer's rights, and every lock the store takes is then visible in
  its own code. SQL outside the store that writes ``tasks`` must maintain both
  tables too (:func:`rebuild_derived` recomputes them).
* **Standalone.** Of the kit, this module and the store import only its public
  model, errors and codec, so a copy in a production store depends on nothing else;
  the masking of passwords in error messages is :func:`_mask_secrets`, here
  (``tests/test_reference_store_imports.py`` keeps it so).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

# Without the ``mariadb`` extra this import fails; reference_stores.mariadb, which
# imports this module, first says which command installs it.
import pymysql
from pymysql.constants import CLIENT

from chongming_conformance import StoreError, TaskStatus

__all__ = [
    "COUNTER_SLOTS",
    "DROP_ATTEMPTS",
    "DROP_BACKOFF",
    "MAX_DATABASE_CHARS",
    "MAX_KEY_CHARS",
    "SCHEMA_VERSION",
    "ConnectParams",
    "admin_connection",
    "drop_schema",
    "install_schema",
    "parse_dsn",
    "quote_ident",
    "rebuild_derived",
    "recount_tasks",
    "text_collation",
    "validate_database_name",
]

#: Version of the DDL below; the store refuses a database with another version.
SCHEMA_VERSION = 1
#: counts() counters are striped over this many rows per status, picked by the
#: writing connection's id, so concurrent writers rarely wait on one counter row.
COUNTER_SLOTS = 32
#: Characters in every keyed text column (ids, tags, pipeline ids): see the docstring.
MAX_KEY_CHARS = 255
#: MariaDB's and MySQL's identifier limit, in characters.
MAX_DATABASE_CHARS = 64
#: How many times :func:`drop_schema`, given a DSN, runs when the connection is lost.
DROP_ATTEMPTS = 5
#: Seconds before its second attempt, doubled before each later one (0.2 + 0.4 + 0.8 + 1.6).
DROP_BACKOFF = 0.2
#: Seconds one socket read or write of a drop may wait (its statements wait at most 30 s
#: for a lock, so a longer silence is a dead link, not a busy server).
_DROP_IO_TIMEOUT = 90.0
#: Server errors that end the session: shutdown (1053), killed (1927), idle too long
#: (4031), and too many connections (1040: refused, nothing ran).
_SESSION_ENDED = frozenset({1040, 1053, 1927, 4031})

#: Collation of every text column, per server family (module docstring).
_COLLATIONS = {"mariadb": "utf8mb4_nopad_bin", "mysql": "utf8mb4_0900_bin"}


# -- masking ------------------------------------------------------------------------------------
# A password in a URL's userinfo (``mysql://user:SECRET@host``): it runs to the URL's last
# ``@``, so a password holding ``@``, ``/`` or ``:`` is masked whole (a path holding ``@`` is
# over-masked, which costs nothing).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*):[^\s'\"]*@")
# A value whose key names a password (``password=``, ``MYSQL_PASSWORD=``), bare or quoted.
_KEY_PASSWORD = re.compile(
    r"(?P<key>(?<![A-Za-z0-9_])[A-Za-z0-9_]*pass(?:word|wd)\s*=\s*)"
    r"(?P<value>'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|[^\s'\"]+)",
    re.IGNORECASE,
)


def _mask_secrets(text: str) -> str:
    """``text`` with the DSN passwords in it replaced by ``***``.

    Errors about a DSN quote it (``invalid MariaDB DSN 'mysql://app:***@db/x'``), and a
    StoreError's message ends up in logs and issue reports. The password of a
    ``mysql://`` DSN is its URL userinfo; a ``password=`` value (in a query string, say)
    is masked too. Local on purpose: a production copy of this store must not depend on
    the kit's report package (``chongming_conformance.report.masking`` masks more
    forms, for everything the kit itself prints).
    """
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}:***@", text)

    def masked(m: re.Match[str]) -> str:
        value = m.group("value")
        quote = value[0] if value[0] in "'\"" else ""
        return f"{m.group('key')}{quote}***{quote}"

    return _KEY_PASSWORD.sub(masked, text)


# -- DSN --------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ConnectParams:
    """What a ``mysql://user:password@host:port/database`` DSN says (no password in repr)."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    password: str = dataclasses.field(default="", repr=False)
    database: str | None = None
    unix_socket: str | None = None
    connect_timeout: float = 10.0

    def connect(
        self,
        *,
        database: str | None = None,
        autocommit: bool = True,
        io_timeout: float | None = None,
    ) -> Any:
        """A new PyMySQL connection: utf8mb4, autocommit, matched-row counts.

        * ``charset="utf8mb4"``: the connection's ``utf8`` would be utf8mb3, which
          cannot carry 4-byte characters.
        * ``client_flag=CLIENT.FOUND_ROWS``: an UPDATE reports the rows it
          *matched*, not those it changed, so a ``save`` that writes a row
          identical to the stored one still counts as won.
        * ``autocommit=True``: PEP 249 drivers start a transaction implicitly
          and PyMySQL defaults to autocommit off, so a connection that only reads
          would sit in one snapshot and never see another process's writes;
          multi-statement calls say BEGIN ... COMMIT themselves.
        * ``io_timeout``: PyMySQL's ``read_timeout`` and ``write_timeout``, the
          longest one socket read or write may wait (the handshake's included);
          None waits for ever (PyMySQL's default). The store passes its
          ``call_timeout``.
        """
        return pymysql.connect(
            host=self.host,
            port=self.port,
            user=self.user,
            password=self.password,
            database=database,
            unix_socket=self.unix_socket,
            connect_timeout=self.connect_timeout,
            charset="utf8mb4",
            client_flag=CLIENT.FOUND_ROWS,
            autocommit=autocommit,
            read_timeout=io_timeout,
            write_timeout=io_timeout,
        )


def parse_dsn(dsn: str) -> ConnectParams:
    """``mysql://user[:password]@host[:port][/database][?unix_socket=...&connect_timeout=...]``.

    ``mariadb://`` is accepted too. User and password are percent-decoded. An
    unknown query parameter is refused rather than silently ignored. Errors
    never show the password.
    """
    if not isinstance(dsn, str):
        raise StoreError(f"a MariaDB DSN must be a str, got {type(dsn).__name__}")
    try:
        parts = urlsplit(dsn.strip())
        port = parts.port
    except ValueError as exc:
        raise StoreError(_mask_secrets(f"invalid MariaDB DSN {dsn!r}: {exc}")) from exc
    if parts.scheme not in ("mysql", "mariadb"):
        raise StoreError(_mask_secrets(
            f"invalid MariaDB DSN {dsn!r}: the scheme must be mysql:// or mariadb://"
        ))
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - {"unix_socket", "connect_timeout"})
    if unknown:
        raise StoreError(_mask_secrets(
            f"invalid MariaDB DSN {dsn!r}: unknown parameter(s) {', '.join(unknown)} "
            "(known: unix_socket, connect_timeout)"
        ))
    timeout = 10.0
    if "connect_timeout" in query:
        try:
            timeout = float(query["connect_timeout"][-1])
        except ValueError as exc:
            raise StoreError(_mask_secrets(f"invalid MariaDB DSN {dsn!r}: {exc}")) from exc
    database = unquote(parts.path.lstrip("/")) or None
    return ConnectParams(
        host=parts.hostname or "127.0.0.1",
        port=port or 3306,
        user=unquote(parts.username) if parts.username else "root",
        password=unquote(parts.password) if parts.password else "",
        database=database,
        unix_socket=query["unix_socket"][-1] if "unix_socket" in query else None,
        connect_timeout=timeout,
    )


# -- names ----------------------------------------------------------------------------------
def validate_database_name(database: object) -> str:
    """``database`` if the server will store it exactly as given, else a :class:`StoreError`.

    Quoting (:func:`quote_ident`) makes any character safe inside a statement;
    what it cannot prevent is a name the server refuses or changes: empty, over
    64 characters, with NUL, or ending in a space (MariaDB refuses those).
    """
    if not isinstance(database, str):
        raise StoreError(f"database name must be a str, got {type(database).__name__}")
    if not database:
        raise StoreError("database name must not be empty")
    if "\x00" in database:
        raise StoreError(f"database name {database!r} contains a NUL character")
    if len(database) > MAX_DATABASE_CHARS:
        raise StoreError(
            f"database name {database!r} is {len(database)} characters; MariaDB allows "
            f"{MAX_DATABASE_CHARS}"
        )
    if database != database.rstrip(" "):
        raise StoreError(f"database name {database!r} ends with a space; MariaDB refuses it")
    return database


def quote_ident(*names: str) -> str:
    """```a`.`b``` with every backtick doubled: an identifier, never SQL."""
    return ".".join("`" + name.replace("`", "``") + "`" for name in names)


def failure(doing: str, exc: BaseException) -> StoreError:
    """The StoreError for a driver error: what was being done, the cause, masked."""
    return StoreError(_mask_secrets(f"{doing} failed: {type(exc).__name__}: {exc}"))


@contextlib.contextmanager
def driver_errors(
    doing: str,
    *,
    _driver_error: type[BaseException] = pymysql.Error,
    _translate: Callable[[str, BaseException], StoreError] = failure,
) -> Iterator[None]:
    """Every PyMySQL error inside becomes a masked StoreError with the cause chained.

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
            translated = _translate(doing, exc)
        except Exception:  # shutdown: the translation's own globals are gone
            raise exc from None
        raise translated from exc


def _connection_lost(exc: BaseException | None) -> bool:
    """Whether a driver error says the *connection* failed, not the statement.

    PyMySQL numbers its own errors 2000-2999 (can't connect, lost connection during
    query, server has gone away, a read that timed out) and raises ``InterfaceError`` on
    a connection it already knows is closed; a few server errors end the session too
    (:data:`_SESSION_ENDED`). A lock wait timeout, a missing privilege or a wrong
    password is another error: running it again would fail again.
    """
    if isinstance(exc, pymysql.err.InterfaceError):
        return True
    if not isinstance(exc, pymysql.err.OperationalError):
        return False
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    return code is not None and (2000 <= code < 3000 or code in _SESSION_ENDED)


@contextlib.contextmanager
def admin_connection(conn_or_dsn: Any, *, io_timeout: float | None = None) -> Iterator[Any]:
    """A connection from a DSN (closed afterwards), or the caller's own, unchanged.

    ``io_timeout`` bounds each socket read and write of a connection made here (None:
    no bound, PyMySQL's default); connecting is bounded by the DSN's ``connect_timeout``.
    """
    if not isinstance(conn_or_dsn, str):
        yield conn_or_dsn
        return
    params = parse_dsn(conn_or_dsn)
    with driver_errors("connecting to MariaDB"):
        conn = params.connect(io_timeout=io_timeout)
    try:
        yield conn
    finally:
        with contextlib.suppress(pymysql.Error):
            conn.close()


def _server_family(conn: Any) -> str:
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        (version,) = cur.fetchone()
    return "mariadb" if "mariadb" in str(version).lower() else "mysql"


def text_collation(conn_or_dsn: Any) -> str:
    """The binary no-pad utf8mb4 collation of this server (MariaDB or MySQL 8)."""
    with driver_errors("reading the server version"), admin_connection(conn_or_dsn) as conn:
        return _COLLATIONS[_server_family(conn)]


# -- DDL ------------------------------------------------------------------------------------
# Each statement is a template: {db} is the quoted database, {collation} the text
# collation. Only our own constants are formatted in; values are parameters.
_TABLE_OPTIONS = "ENGINE=InnoDB ROW_FORMAT=DYNAMIC DEFAULT CHARSET=utf8mb4 COLLATE={collation}"
_KEY = f"VARCHAR({MAX_KEY_CHARS})"
_DDL_V1: tuple[str, ...] = (
    f"""CREATE TABLE IF NOT EXISTS {{db}}.tasks (
        task_id          {_KEY} NOT NULL,
        name             TEXT NOT NULL,
        status           VARCHAR(16) NOT NULL,
        status_version   BIGINT NOT NULL,
        created_at       DATETIME(6) NOT NULL,
        updated_at       DATETIME(6) NOT NULL,
        started_at       DATETIME(6),
        finished_at      DATETIME(6),
        tags             MEDIUMTEXT NOT NULL,
        bucket           BIGINT,
        pipeline_run_id  {_KEY},
        progress_done    BIGINT,
        progress_total   BIGINT,
        progress_message TEXT,
        failure_type     TEXT,
        failure_message  TEXT,
        failure_detail   MEDIUMTEXT,
        heartbeat_at     DATETIME(6),
        lease_owner      TEXT,
        lease_until      DATETIME(6),
        PRIMARY KEY (task_id),
        KEY tasks_created (created_at, task_id),
        KEY tasks_bucket (bucket, created_at, task_id),
        KEY tasks_status (status, bucket, created_at, task_id),
        KEY tasks_pipeline (pipeline_run_id)
    ) {_TABLE_OPTIONS}""",
    # One row per (task, tag): exact tag matches by equality under the binary
    # collation. created_at is the task's, kept equal by the store, so that
    # (tag, created_at, task_id) delivers "tag t in query order" from one index.
    f"""CREATE TABLE IF NOT EXISTS {{db}}.task_tags (
        task_id    {_KEY} NOT NULL,
        tag        {_KEY} NOT NULL,
        created_at DATETIME(6) NOT NULL,
        PRIMARY KEY (task_id, tag),
        KEY task_tags_tag (tag, created_at, task_id)
    ) {_TABLE_OPTIONS}""",
    # The primary key makes append idempotent (ON DUPLICATE KEY, first row wins).
    f"""CREATE TABLE IF NOT EXISTS {{db}}.transitions (
        task_id     {_KEY} NOT NULL,
        version     BIGINT NOT NULL,
        from_status VARCHAR(16),
        to_status   VARCHAR(16) NOT NULL,
        at          DATETIME(6) NOT NULL,
        reason      TEXT,
        PRIMARY KEY (task_id, version)
    ) {_TABLE_OPTIONS}""",
    # commands_claim serves the claim: ``finished_at IS NULL`` is one ref range at
    # the front of the index (finished commands, the vast majority in a long-lived
    # system, sit in other ranges), inside which rows come in claim order
    # (created_at, command_id). MariaDB has no partial indexes; this is the next
    # best thing. lease_until at the end lets the scan test the lease in the index.
    f"""CREATE TABLE IF NOT EXISTS {{db}}.commands (
        command_id  {_KEY} NOT NULL,
        task_id     {_KEY} NOT NULL,
        kind        VARCHAR(16) NOT NULL,
        issued_by   TEXT NOT NULL,
        created_at  DATETIME(6) NOT NULL,
        lease_until DATETIME(6),
        finished_at DATETIME(6),
        outcome     TEXT,
        PRIMARY KEY (command_id),
        KEY commands_claim (finished_at, created_at, command_id, lease_until),
        KEY commands_task (task_id)
    ) {_TABLE_OPTIONS}""",
    f"""CREATE TABLE IF NOT EXISTS {{db}}.task_counts (
        status VARCHAR(16) NOT NULL,
        slot   SMALLINT NOT NULL,
        n      BIGINT NOT NULL,
        PRIMARY KEY (status, slot)
    ) {_TABLE_OPTIONS}""",
    # Every counter row exists before the first write (module docstring). The
    # tasks table is empty at version 1's install, so every counter starts at 0.
    "INSERT IGNORE INTO {db}.task_counts (status, slot, n) VALUES "
    + ", ".join(
        f"('{status.value}', {slot}, 0)" for status in TaskStatus for slot in range(COUNTER_SLOTS)
    ),
)
#: version -> DDL that brings a database from version-1 to version.
_MIGRATIONS: dict[int, tuple[str, ...]] = {1: _DDL_V1}

#: The store's tables, children first (prune and reset_store delete in this order).
TABLES = ("task_tags", "transitions", "commands", "tasks", "task_counts")


def _current_version(cur: Any, db: str) -> int:
    cur.execute(
        "SELECT COUNT(*) FROM information_schema.tables "
        "WHERE table_schema = %s AND table_name = 'schema_version'",
        [db],
    )
    if cur.fetchone()[0] == 0:
        return 0
    cur.execute(f"SELECT MAX(version) FROM {quote_ident(db, 'schema_version')}")
    row = cur.fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def install_schema(conn_or_dsn: Any, database: str, *, collation: str | None = None) -> int:
    """Create (or upgrade) the store's database and tables; return the installed version.

    Idempotent, and safe to run concurrently: a named lock (``GET_LOCK``)
    serialises installers of one database. DDL commits implicitly in MariaDB,
    so an install cut off half-way is completed by running it again (every
    statement is ``IF NOT EXISTS``/``INSERT IGNORE``); the version row is
    written last. ``collation`` defaults to the server's binary no-pad utf8mb4
    collation (:func:`text_collation`). Needs CREATE; the store itself does not.
    """
    db = validate_database_name(database)
    lock = f"chongming:{db}"  # drop_schema takes it too
    with driver_errors(f"install_schema({database!r})"), admin_connection(conn_or_dsn) as conn:
        chosen = collation or _COLLATIONS[_server_family(conn)]
        with conn.cursor() as cur:
            cur.execute("SELECT GET_LOCK(%s, 60)", [lock])
            if cur.fetchone()[0] != 1:
                raise StoreError(f"install_schema({database!r}): another installer holds {lock!r}")
            try:
                cur.execute(
                    f"CREATE DATABASE IF NOT EXISTS {quote_ident(db)} "
                    f"CHARACTER SET utf8mb4 COLLATE {chosen}"
                )
                cur.execute(
                    f"CREATE TABLE IF NOT EXISTS {quote_ident(db, 'schema_version')} ("
                    "version INT NOT NULL PRIMARY KEY, "
                    # Parenthesised: MySQL 8 takes an expression default only so.
                    "installed_at DATETIME(6) NOT NULL DEFAULT (UTC_TIMESTAMP(6))) "
                    "ENGINE=InnoDB"
                )
                current = _current_version(cur, db)
                if current > SCHEMA_VERSION:
                    raise StoreError(
                        f"database {database!r} is at schema version {current}, newer than "
                        f"this code ({SCHEMA_VERSION}); upgrade chongming-conformance"
                    )
                for version in range(current + 1, SCHEMA_VERSION + 1):
                    for statement in _MIGRATIONS[version]:
                        cur.execute(
                            statement.replace("{db}", quote_ident(db)).replace(
                                "{collation}", chosen
                            )
                        )
                if current < SCHEMA_VERSION:
                    cur.execute(
                        f"INSERT INTO {quote_ident(db, 'schema_version')} (version) VALUES (%s)",
                        [SCHEMA_VERSION],
                    )
            finally:
                cur.execute("SELECT RELEASE_LOCK(%s)", [lock])
    return SCHEMA_VERSION


def drop_schema(conn_or_dsn: Any, database: str, *, attempts: int = DROP_ATTEMPTS) -> None:
    """Drop ``database`` and everything in it (test teardown). Missing database: no-op.

    Built for a bad day, because a teardown that gives up leaves a database behind on a
    shared server for good:

    * **Retried when the connection is lost** (:func:`_connection_lost`), given a DSN:
      up to ``attempts`` times, waiting ``DROP_BACKOFF`` seconds before the second
      attempt and twice as long before each later one. ``DROP DATABASE IF EXISTS`` is
      idempotent, so running it again is exact whatever the lost attempt did (it may
      have dropped the database and lost only the reply). Any other error -- a lock wait
      timeout, a missing privilege -- is raised at once: running it again would fail
      again. Given a connection, nothing is retried (its failure is the caller's).
    * **After any install of the database** that is still running: the drop first takes
      the installers' named lock (``GET_LOCK``, up to 30 s). An install whose client was
      cut off holds it until the server notices, after the statement it is running --
      say ``CREATE DATABASE`` -- has run; dropping earlier would drop nothing and let
      that statement create the database a moment later. If the lock is not granted in
      time the drop goes ahead anyway.
    * **Never hangs**: connecting is bounded by the DSN's ``connect_timeout`` (10 s by
      default), every socket read and write by 90 s, waiting for a metadata lock by 30 s.
    * **Says what is left behind**: the StoreError after the last attempt names the
      database and the statement that drops it by hand.
    """
    db = validate_database_name(database)
    lock = f"chongming:{db}"
    tries = max(1, attempts) if isinstance(conn_or_dsn, str) else 1
    for attempt in range(1, tries + 1):
        try:
            with driver_errors(f"drop_schema({database!r})"), admin_connection(
                conn_or_dsn, io_timeout=_DROP_IO_TIMEOUT
            ) as conn, conn.cursor() as cur:
                # Never hang a teardown forever behind a forgotten transaction's metadata lock.
                cur.execute("SET SESSION lock_wait_timeout = 30")
                cur.execute("SELECT GET_LOCK(%s, 30)", [lock])
                locked = cur.fetchone()[0] == 1
                try:
                    cur.execute(f"DROP DATABASE IF EXISTS {quote_ident(db)}")
                finally:
                    if locked:  # a connection made here releases it when it closes anyway
                        with contextlib.suppress(pymysql.Error):
                            cur.execute("SELECT RELEASE_LOCK(%s)", [lock])
            return
        except StoreError as exc:
            if attempt < tries and _connection_lost(exc.__cause__):
                time.sleep(DROP_BACKOFF * 2 ** (attempt - 1))
                continue
            tried = f" (attempt {attempt} of {tries})" if tries > 1 else ""
            raise StoreError(
                f"{exc}{tried}; the database {database!r} may be left behind: drop it with "
                f"DROP DATABASE IF EXISTS {quote_ident(db)}"
            ) from exc.__cause__


def recount_tasks(conn_or_dsn: Any, database: str) -> None:
    """Set ``task_counts`` from a GROUP BY over ``tasks`` (after a bulk load). O(tasks)."""
    db = validate_database_name(database)
    counts = quote_ident(db, "task_counts")
    with driver_errors(f"recount_tasks({database!r})"), admin_connection(
        conn_or_dsn
    ) as conn, conn.cursor() as cur:
        conn.begin()
        try:
            cur.execute(f"UPDATE {counts} SET n = 0")
            cur.execute(
                f"UPDATE {counts} AS c JOIN ("
                f"SELECT status, COUNT(*) AS n FROM {quote_ident(db, 'tasks')} GROUP BY status"
                ") AS t ON t.status = c.status SET c.n = t.n WHERE c.slot = 0"
            )
            conn.commit()
        except BaseException:
            conn.rollback()
            raise


def rebuild_derived(conn_or_dsn: Any, database: str) -> None:
    """Recompute ``task_tags`` and ``task_counts`` from ``tasks`` (after SQL outside the store).

    The store keeps both in the transaction that writes ``tasks``; a bulk load
    or an operator's UPDATE does not. This reads every task's tags (the codec's
    JSON, parsed in Python, not by the server) and rewrites both tables in one
    transaction. O(tasks): a maintenance step, not something to run per call.
    """
    db = validate_database_name(database)
    with driver_errors(f"rebuild_derived({database!r})"), admin_connection(
        conn_or_dsn
    ) as conn, conn.cursor() as cur:
        conn.begin()
        try:
            cur.execute(f"DELETE FROM {quote_ident(db, 'task_tags')}")
            cur.execute(f"SELECT task_id, tags, created_at FROM {quote_ident(db, 'tasks')}")
            rows = [
                (task_id, tag, created)
                for task_id, tags, created in cur.fetchall()
                for tag in json.loads(tags)
            ]
            for start in range(0, len(rows), 1000):
                cur.executemany(
                    f"INSERT INTO {quote_ident(db, 'task_tags')} (task_id, tag, created_at) "
                    "VALUES (%s, %s, %s)",
                    rows[start : start + 1000],
                )
            conn.commit()
        except BaseException:
            conn.rollback()
            raise
    recount_tasks(conn_or_dsn, database)
