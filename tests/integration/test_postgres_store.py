"""PostgresTaskStore against a real server: the contract, and the cross-process evidence.

The contract proves single-connection semantics. What it cannot see is
proved here, each case on its own connections, on a fresh schema dropped
afterwards:

* 8 writers race one ``save`` at the same version: exactly one wins;
* 8 consumers (threads and spawned processes) claim concurrently: every
  command exactly once while its lease holds;
* a lease holder's backend is killed mid-transaction: the lease is neither
  released early nor stuck, and the store's pool heals; a call in flight
  during a kill raises StoreError;
* a role with DML grants only runs the whole contract and cannot run DDL;
* EXPLAIN shows the bucket query, the tag query and the claim on their indexes.

Without ``CHONGMING_TEST_POSTGRES`` every case here skips with the reason
(``CHONGMING_REQUIRE_POSTGRES=1`` turns that into a failure); see conftest.py.
No case sleeps for a lease: expiry is driven by the explicit ``now`` argument.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from counts_churn import churn_and_check, recount

from chongming_conformance import (
    ConcurrencyConflict,
    StoreError,
    TaskQuery,
    TaskStatus,
    checks,
)
from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.strategies.samples import at, command, snapshot, transition
from chongming_conformance.stress.contract import StressContract

try:
    import psycopg
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    from reference_stores import postgres as pgstore
    from reference_stores import postgres_schema as pgschema
except ImportError as exc:  # the driver is an optional extra
    if os.environ.get("CHONGMING_REQUIRE_POSTGRES", "").strip() not in ("", "0"):
        raise
    pytest.skip(
        f'psycopg is not installed ({exc}): pip install "chongming-conformance[postgres]"',
        allow_module_level=True,
    )

pytestmark = pytest.mark.postgres

WRITERS = 8
CONSUMERS = 8
ROUNDS = 50
COMMANDS_XP = 200
WAIT = 60.0  # generous upper bound for "wait until the server shows X"; never a speed target


# -- helpers -------------------------------------------------------------------------------
@contextlib.contextmanager
def fresh_schema(dsn: str) -> Iterator[str]:
    """Install the store's schema into a new uniquely named schema; drop it afterwards."""
    name = f"chongming_it_{uuid.uuid4().hex[:16]}"
    pgstore.install_schema(dsn, name)
    try:
        yield name
    finally:
        pgstore.drop_schema(dsn, name)


@pytest.fixture
def schema(postgres_dsn: str) -> Iterator[str]:
    with fresh_schema(postgres_dsn) as name:
        yield name


def tagged_dsn(dsn: str, label: str) -> tuple[str, str]:
    """The DSN with a unique application_name, so the test can find its backends."""
    app = f"chongming-{label}-{uuid.uuid4().hex[:8]}"
    return make_conninfo(dsn, application_name=app), app


def backend_pids(dsn: str, app: str) -> list[int]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s ORDER BY pid", [app]
        ).fetchall()
    return [int(r[0]) for r in rows]


def terminate(dsn: str, pids: list[int]) -> None:
    """Kill the backends and wait until the server no longer lists them."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", [pid])
        wait_until(
            lambda: (
                not conn.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", [pids]
                ).fetchall()
            ),
            f"backends {pids} to exit",
        )


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll until ``condition()``; fail (not skip) if the server never gets there."""
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {WAIT}s waiting for {what}")
        time.sleep(0.02)


def waiting_on_lock(dsn: str, app: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT 1 FROM pg_stat_activity WHERE application_name = %s "
            "AND wait_event_type = 'Lock'",
            [app],
        ).fetchall()
    return bool(rows)


def run_in_thread(call: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException | Any]]:
    """Start ``call`` in a thread; the returned list receives its result or exception."""
    outcome: list[BaseException | Any] = []

    def body() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, outcome


# -- the contract ---------------------------------------------------------------------------
@pytest.mark.usefixtures("postgres_dsn")
class TestPostgresContract(StoreContract):
    """The whole packaged contract, through the module's own ``make_store`` factory, with
    the store kept and emptied by ``reset_store`` between tests (the reuse seam)."""

    def make_store(self) -> Generator[pgstore.PostgresTaskStore, None, None]:
        return pgstore.make_store()

    def reset_function(self) -> Callable[[Any], None]:
        return pgstore.reset_store


@pytest.mark.usefixtures("postgres_dsn")
class TestRestrictedRoleContract(StoreContract):
    """The whole contract as a role with USAGE on the schema and DML on its tables only.

    The schema is installed by the privileged DSN (as a deployment would do
    once); the store then runs with no CREATE anywhere.
    """

    admin_dsn: str
    role: str
    role_dsn: str

    @classmethod
    def setup_class(cls) -> None:
        cls.admin_dsn = os.environ[pgstore.DSN_ENV]
        cls.role = f"chongming_dml_{uuid.uuid4().hex[:12]}"
        password = uuid.uuid4().hex
        with psycopg.connect(cls.admin_dsn, autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "CREATE ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT PASSWORD {}"
                ).format(sql.Identifier(cls.role), sql.Literal(password))
            )
        cls.role_dsn = make_conninfo(cls.admin_dsn, user=cls.role, password=password)

    @classmethod
    def teardown_class(cls) -> None:
        with psycopg.connect(cls.admin_dsn, autocommit=True) as conn:
            role = sql.Identifier(cls.role)
            conn.execute(sql.SQL("DROP OWNED BY {}").format(role))
            conn.execute(sql.SQL("DROP ROLE {}").format(role))

    def grant(self, schema: str) -> None:
        with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
            role, s = sql.Identifier(self.role), sql.Identifier(schema)
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(s, role))
            conn.execute(
                sql.SQL(
                    "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {} TO {}"
                ).format(s, role)
            )

    def make_store(self) -> Generator[pgstore.PostgresTaskStore, None, None]:
        with fresh_schema(self.admin_dsn) as schema:
            self.grant(schema)
            store = pgstore.PostgresTaskStore(self.role_dsn, schema=schema)
            self.schema = schema
            try:
                yield store
            finally:
                store.close()

    @pytest.mark.parametrize(
        "ddl",
        [
            "CREATE TABLE {schema}.intruder (x int)",
            "CREATE INDEX intruder_idx ON {schema}.tasks (name)",
            "ALTER TABLE {schema}.tasks ADD COLUMN intruder int",
            "DROP TABLE {schema}.commands",
            "TRUNCATE {schema}.transitions",
        ],
    )
    def test_role_cannot_run_ddl(self, ddl: str) -> None:
        """Proves the role is really restricted, so the green contract above means something."""
        self.store.create(snapshot("t-1"))  # the store works under this role...
        with (
            psycopg.connect(self.role_dsn, autocommit=True) as conn,
            pytest.raises(psycopg.errors.InsufficientPrivilege),
        ):
            conn.execute(sql.SQL(ddl).format(schema=sql.Identifier(self.schema)))
        assert self.store.get("t-1") == snapshot("t-1"), "...and the failed DDL changed nothing"

    def test_role_cannot_install_a_schema(self) -> None:
        with psycopg.connect(self.admin_dsn) as conn:
            row = conn.execute(
                "SELECT has_database_privilege(%s, current_database(), 'CREATE')", [self.role]
            ).fetchone()
        assert row == (False,), (
            "this database grants CREATE to PUBLIC, so no role here is DML-only; "
            "run REVOKE CREATE ON DATABASE <db> FROM PUBLIC on the test database"
        )
        name = f"chongming_it_{uuid.uuid4().hex[:16]}"
        try:
            with pytest.raises(StoreError) as refused:
                pgstore.install_schema(self.role_dsn, name)
            assert isinstance(refused.value.__cause__, psycopg.errors.InsufficientPrivilege)
        finally:
            pgstore.drop_schema(self.admin_dsn, name)  # in case it wrongly succeeded


@pytest.mark.usefixtures("postgres_dsn")
class TestPostgresStress(StressContract):
    """The kit's multi-process scenarios (spawned workers) on one fresh schema each."""

    def make_shared_store(self) -> Generator[Callable[[], pgstore.PostgresTaskStore], None, None]:
        return pgstore.make_shared_store()


# -- cross-process evidence ---------------------------------------------------------------------
@checks("XP-SAVE-ATOMIC")
def test_eight_writers_save_one_version_exactly_one_wins(postgres_dsn: str, schema: str) -> None:
    stores = [
        pgstore.PostgresTaskStore(postgres_dsn, schema=schema, min_size=1, max_size=1)
        for _ in range(WRITERS)
    ]
    try:
        stores[0].create(snapshot("race", version=0))
        with ThreadPoolExecutor(WRITERS) as pool:
            for rnd in range(ROUNDS):
                barrier = threading.Barrier(WRITERS, timeout=WAIT)

                def save(i: int, rnd: int = rnd, barrier: threading.Barrier = barrier) -> str:
                    mine = snapshot("race", version=rnd + 1, name=f"writer-{i}-round-{rnd}")
                    barrier.wait()  # release all eight writers at once
                    try:
                        stores[i].save(mine, expect_version=rnd)
                    except ConcurrencyConflict as conflict:
                        assert (conflict.expected, conflict.actual) == (rnd, rnd + 1), conflict
                        return "conflict"
                    return "won"

                results = list(pool.map(save, range(WRITERS)))
                winners = [i for i, r in enumerate(results) if r == "won"]
                assert len(winners) == 1, f"round {rnd}: winners {winners}, results {results}"
                assert results.count("conflict") == WRITERS - 1, results
                stored = stores[0].get("race")
                assert stored is not None
                assert (stored.status_version, stored.name) == (
                    rnd + 1,
                    f"writer-{winners[0]}-round-{rnd}",
                ), f"round {rnd}: the winner's snapshot is not the stored one: {stored}"
    finally:
        for store in stores:
            store.close()


@checks("XP-CLAIM-EXCLUSIVE", "CLAIM-LEASE-EXCLUSIVE")
def test_eight_consumers_claim_each_command_exactly_once(postgres_dsn: str, schema: str) -> None:
    total, lease = 240, 300.0
    stores = [
        pgstore.PostgresTaskStore(postgres_dsn, schema=schema, min_size=1, max_size=1)
        for _ in range(CONSUMERS)
    ]
    try:
        for n in range(total):
            stores[0].submit_command(command(f"cmd-{n:04d}", f"task-{n % 7}", created=n))
        barrier = threading.Barrier(CONSUMERS, timeout=WAIT)

        def consume(i: int) -> list[str]:
            got: list[str] = []
            barrier.wait()
            while True:
                # Every consumer uses the same ``now``: no lease expires during the race.
                batch = stores[i].claim_commands(now=at(0), lease_seconds=lease, limit=3)
                if not batch:
                    return got
                assert all(c.lease_until == at(lease) for c in batch), batch
                got.extend(c.command_id for c in batch)

        with ThreadPoolExecutor(CONSUMERS) as pool:
            per_consumer = list(pool.map(consume, range(CONSUMERS)))
        claimed = Counter(cid for got in per_consumer for cid in got)
        twice = sorted(cid for cid, n in claimed.items() if n > 1)
        assert not twice, f"claimed more than once while leased: {twice}"
        assert sorted(claimed) == [f"cmd-{n:04d}" for n in range(total)], "a command was lost"
        assert stores[0].claim_commands(now=at(lease - 1e-6), lease_seconds=lease) == []
        # ...and every lease ends exactly at lease_until: all are claimable again then.
        again = stores[0].claim_commands(now=at(lease), lease_seconds=lease, limit=total)
        assert len(again) == total
    finally:
        for store in stores:
            store.close()


# Runs in a fresh interpreter, so it does not depend on how pytest imported this
# module. The opener arrives pickled (base64) in argv; the worker opens its
# store, says "ready", waits for "go" on stdin (a barrier across processes),
# then claims and completes until nothing is left and prints the ids as JSON.
_CLAIM_WORKER = """
import base64, json, os, pickle, sys
from chongming_conformance.strategies.samples import at
store = pickle.loads(base64.b64decode(sys.argv[1]))()
store.counts()
print("ready", flush=True)
sys.stdin.readline()
got = []
while batch := store.claim_commands(now=at(0), lease_seconds=300.0, limit=2):
    for c in batch:
        store.complete_command(c.command_id, now=at(1), outcome=f"pid-{os.getpid()}")
        got.append(c.command_id)
store.close()
print(json.dumps(got))
"""


@checks("XP-CLAIM-EXCLUSIVE", "XP-SHARED-VISIBILITY")
def test_processes_share_one_store_via_make_shared_store(postgres_dsn: str) -> None:
    """The shared-store opener pickles, and 4 processes each claim+complete distinct commands."""
    factory = pgstore.make_shared_store()
    opener = next(factory)
    try:
        parent = opener()
        try:
            for n in range(COMMANDS_XP):
                parent.submit_command(command(f"cmd-{n:03d}", "task-1", created=n))
            payload = base64.b64encode(pickle.dumps(opener)).decode()
            workers = [
                subprocess.Popen(
                    [sys.executable, "-c", _CLAIM_WORKER, payload],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
                for _ in range(4)
            ]
            for worker in workers:
                assert worker.stdout is not None
                line = worker.stdout.readline()
                assert line == "ready\n", (line, worker.stderr and worker.stderr.read())
            for worker in workers:  # everyone is connected: release them together
                assert worker.stdin is not None
                worker.stdin.write("go\n")
                worker.stdin.close()
            per_process: list[list[str]] = []
            for worker in workers:
                assert worker.stdout is not None and worker.stderr is not None
                out, err = worker.stdout.read(), worker.stderr.read()  # stderr stays small
                assert worker.wait(timeout=WAIT) == 0, err
                per_process.append(json.loads(out))
            claimed = Counter(cid for got in per_process for cid in got)
            assert all(n == 1 for n in claimed.values()), claimed.most_common(3)
            assert sorted(claimed) == [f"cmd-{n:03d}" for n in range(COMMANDS_XP)]
            # Completed by the workers, seen by the parent: nothing left to claim, ever.
            assert parent.claim_commands(now=at(10_000), lease_seconds=1.0) == []
        finally:
            parent.close()
    finally:
        with contextlib.suppress(StopIteration):
            next(factory)


# -- faults ---------------------------------------------------------------------------------------
@checks("XP-CLAIM-CRASH-RECOVERY")
def test_killed_holder_neither_releases_early_nor_locks_forever(
    postgres_dsn: str, schema: str
) -> None:
    store = pgstore.PostgresTaskStore(postgres_dsn, schema=schema)
    try:
        store.submit_command(command("c-1"))
        (leased,) = store.claim_commands(now=at(0), lease_seconds=30.0)
        assert leased.lease_until == at(30)
        # The holder locks the row and starts an (uncommitted) release, then dies.
        holder = psycopg.connect(postgres_dsn)
        table = sql.Identifier(schema, "commands")
        holder.execute(
            sql.SQL("SELECT 1 FROM {} WHERE command_id = 'c-1' FOR UPDATE").format(table)
        )
        holder.execute(
            sql.SQL("UPDATE {} SET lease_until = NULL WHERE command_id = 'c-1'").format(table)
        )
        # While the lock is held, SKIP LOCKED passes the row by even though it is expired.
        assert store.claim_commands(now=at(40), lease_seconds=30.0) == []
        terminate(postgres_dsn, [holder.info.backend_pid])
        with pytest.raises(psycopg.OperationalError):
            holder.execute("SELECT 1")
        holder.close()
        # The kill rolled the holder back: the lease is the committed one, to the microsecond.
        assert store.claim_commands(now=at(30) - timedelta(microseconds=1), lease_seconds=30) == []
        (taken,) = store.claim_commands(now=at(30), lease_seconds=30.0)
        assert (taken.command_id, taken.lease_until) == ("c-1", at(60))
    finally:
        store.close()


@checks("ERRORS-ARE-STOREERROR")
def test_pool_heals_after_its_idle_backends_are_killed(postgres_dsn: str, schema: str) -> None:
    """A server restart looks like this to the pool: every idle connection is dead."""
    dsn, app = tagged_dsn(postgres_dsn, "heal")
    store = pgstore.PostgresTaskStore(dsn, schema=schema, min_size=2, max_size=2)
    try:
        store.create(snapshot("t-1"))
        wait_until(lambda: len(backend_pids(postgres_dsn, app)) == 2, "the pool to fill")
        before = backend_pids(postgres_dsn, app)
        terminate(postgres_dsn, before)
        assert store.get("t-1") == snapshot("t-1"), "the first call after the kill must work"
        store.touch("t-1", heartbeat_at=at(5))
        assert store.get("t-1") == snapshot("t-1", heartbeat_at=at(5))
        after = backend_pids(postgres_dsn, app)
        assert after and not set(after) & set(before), (before, after)
    finally:
        store.close()


@checks("ERRORS-ARE-STOREERROR")
def test_save_in_flight_during_a_kill_raises_storeerror(postgres_dsn: str, schema: str) -> None:
    dsn, app = tagged_dsn(postgres_dsn, "save-kill")
    store = pgstore.PostgresTaskStore(dsn, schema=schema, min_size=1, max_size=1)
    try:
        store.create(snapshot("t-1", version=1))
        with psycopg.connect(postgres_dsn) as blocker:
            blocker.execute(
                sql.SQL("SELECT 1 FROM {} WHERE task_id = 't-1' FOR UPDATE").format(
                    sql.Identifier(schema, "tasks")
                )
            )
            new = snapshot("t-1", version=2, status=TaskStatus.RUNNING)
            thread, outcome = run_in_thread(lambda: store.save(new, expect_version=1))
            wait_until(lambda: waiting_on_lock(postgres_dsn, app), "save() to block on the lock")
            terminate(postgres_dsn, backend_pids(postgres_dsn, app))
            thread.join(WAIT)
            blocker.rollback()
        (error,) = outcome
        assert isinstance(error, StoreError), f"expected StoreError, got {error!r}"
        assert not isinstance(error, ConcurrencyConflict), error
        assert isinstance(error.__cause__, psycopg.OperationalError), error.__cause__
        assert store.get("t-1") == snapshot("t-1", version=1), "the killed save wrote something"
        store.save(new, expect_version=1)  # the pool healed
        assert store.get("t-1") == new
    finally:
        store.close()


@checks("ERRORS-ARE-STOREERROR")
def test_claim_in_flight_during_a_kill_raises_storeerror(postgres_dsn: str, schema: str) -> None:
    dsn, app = tagged_dsn(postgres_dsn, "claim-kill")
    store = pgstore.PostgresTaskStore(dsn, schema=schema, min_size=1, max_size=1)
    try:
        store.submit_command(command("c-1"))
        with psycopg.connect(postgres_dsn) as blocker:
            blocker.execute(
                sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(
                    sql.Identifier(schema, "commands")
                )
            )
            thread, outcome = run_in_thread(
                lambda: store.claim_commands(now=at(0), lease_seconds=30.0)
            )
            wait_until(lambda: waiting_on_lock(postgres_dsn, app), "claim to block on the lock")
            terminate(postgres_dsn, backend_pids(postgres_dsn, app))
            thread.join(WAIT)
            blocker.rollback()
        (error,) = outcome
        assert isinstance(error, StoreError), f"expected StoreError, got {error!r}"
        # Nothing was leased by the killed claim: the command is claimable at once.
        (taken,) = store.claim_commands(now=at(0), lease_seconds=30.0)
        assert taken.command_id == "c-1"
    finally:
        store.close()


@checks("CLOSE-RELEASES")
def test_close_returns_every_connection_to_the_server(postgres_dsn: str, schema: str) -> None:
    dsn, app = tagged_dsn(postgres_dsn, "close")
    store = pgstore.PostgresTaskStore(dsn, schema=schema, min_size=3, max_size=3)
    store.counts()
    wait_until(lambda: len(backend_pids(postgres_dsn, app)) == 3, "the pool to fill")
    store.close()
    wait_until(lambda: not backend_pids(postgres_dsn, app), "the backends to go away")
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.get("t-1")


# -- schema management --------------------------------------------------------------------------
def test_install_schema_is_idempotent_and_versioned(postgres_dsn: str, schema: str) -> None:
    assert pgstore.install_schema(postgres_dsn, schema) == pgstore.SCHEMA_VERSION
    with psycopg.connect(postgres_dsn) as conn:
        assert pgstore.install_schema(conn, schema) == pgstore.SCHEMA_VERSION
        rows = conn.execute(
            sql.SQL("SELECT version FROM {}").format(sql.Identifier(schema, "schema_version"))
        ).fetchall()
    assert rows == [(pgstore.SCHEMA_VERSION,)]
    store = pgstore.PostgresTaskStore(postgres_dsn, schema=schema)
    store.close()


def test_store_refuses_a_missing_or_newer_schema(postgres_dsn: str, schema: str) -> None:
    with pytest.raises(StoreError, match="install_schema"):
        pgstore.PostgresTaskStore(postgres_dsn, schema=f"missing_{uuid.uuid4().hex[:8]}")
    with psycopg.connect(postgres_dsn) as conn:
        conn.execute(
            sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(
                sql.Identifier(schema, "schema_version")
            ),
            [pgstore.SCHEMA_VERSION + 1],
        )
    with pytest.raises(StoreError, match="version"):
        pgstore.PostgresTaskStore(postgres_dsn, schema=schema)
    with pytest.raises(StoreError, match="newer"):
        pgstore.install_schema(postgres_dsn, schema)


def test_schema_name_is_an_identifier_not_sql(postgres_dsn: str) -> None:
    """A hostile schema name is quoted, not executed."""
    name = f'chongming it "{uuid.uuid4().hex[:8]}"; DROP TABLE x; --'
    pgstore.install_schema(postgres_dsn, name)
    try:
        store = pgstore.PostgresTaskStore(postgres_dsn, schema=name)
        try:
            store.create(snapshot("t-1"))
            assert [t.task_id for t in store.query(TaskQuery(name="job"))] == ["t-1"]
        finally:
            store.close()
    finally:
        pgstore.drop_schema(postgres_dsn, name)


@checks("ERRORS-ARE-STOREERROR")
def test_unreachable_server_is_a_storeerror_with_the_reason() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreError, match=r"cannot connect to PostgreSQL: .*Connection refused"):
        pgstore.PostgresTaskStore(f"postgresql://nobody@127.0.0.1:{port}/x", schema="s", timeout=1)


def test_make_store_names_the_variable_when_it_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pgstore.DSN_ENV, raising=False)
    # closing(): were the variable ever not needed, the store would still be torn down here.
    with (
        contextlib.closing(pgstore.make_store()) as gen,
        pytest.raises(StoreError, match=pgstore.DSN_ENV),
    ):
        next(gen)
    with (
        contextlib.closing(pgstore.make_shared_store()) as shared,
        pytest.raises(StoreError, match=pgstore.DSN_ENV),
    ):
        next(shared)


def test_import_without_psycopg_says_how_to_install() -> None:
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "try:\n    import reference_stores.postgres\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert 'pip install "chongming-conformance[postgres]"' in out, out


# -- EXPLAIN: the filters run on indexes ----------------------------------------------
def _index_names(plan: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(plan, dict):
        if "Index Name" in plan:
            found.add(plan["Index Name"])
        for value in plan.values():
            found |= _index_names(value)
    elif isinstance(plan, list):
        for value in plan:
            found |= _index_names(value)
    return found


def _node_types(plan: Any) -> set[str]:
    if isinstance(plan, dict):
        found = {plan["Node Type"]} if "Node Type" in plan else set()
        return found.union(*(_node_types(v) for v in plan.values()))
    if isinstance(plan, list):
        return set().union(*(_node_types(v) for v in plan))
    return set()


def _explain_json(dsn: str, statement: sql.Composable, params: Any) -> Any:
    with psycopg.connect(dsn) as conn:
        # The tables hold a few thousand rows, so a sequential scan can still be
        # cheapest; switching it off (for this transaction only) asks the planner
        # "can an index serve this?", which is the property under test -- a
        # missing or unusable index would still show up as a Seq Scan.
        conn.execute("SET LOCAL enable_seqscan = off")
        row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + statement, params).fetchone()
        conn.rollback()
    assert row is not None
    return row[0]


def _explain(dsn: str, statement: sql.Composable, params: Any) -> set[str]:
    return _index_names(_explain_json(dsn, statement, params))


@pytest.fixture
def populated(postgres_dsn: str, schema: str) -> str:
    """5000 tasks over 100 buckets (a few tagged 'rare'), 5000 commands, 2% unfinished."""
    with psycopg.connect(postgres_dsn) as conn:
        tasks, commands = sql.Identifier(schema, "tasks"), sql.Identifier(schema, "commands")
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (task_id, name, status, status_version, created_at, updated_at, "
                "tags, bucket) SELECT 't-' || g, 'job-' || (g % 10), 'pending', 1, "
                "now() + g * interval '1 second', now(), "
                "CASE WHEN g % 500 = 0 THEN '[\"rare\"]'::jsonb ELSE '[\"common\"]'::jsonb END, "
                "g % 100 FROM generate_series(1, 5000) AS g"
            ).format(tasks)
        )
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (command_id, task_id, kind, issued_by, created_at, finished_at) "
                "SELECT 'c-' || g, 't-' || g, 'stop', 'bench', now() + g * interval '1 second', "
                "CASE WHEN g % 50 = 0 THEN NULL ELSE now() END "
                "FROM generate_series(1, 5000) AS g"
            ).format(commands)
        )
        conn.commit()
        conn.execute(sql.SQL("ANALYZE {}").format(tasks))
        conn.execute(sql.SQL("ANALYZE {}").format(commands))
        conn.commit()
    return schema


@checks("QUERY-PUSHDOWN")
def test_explain_bucket_query_uses_the_bucket_index(postgres_dsn: str, populated: str) -> None:
    built = pgstore.query_statement(populated, TaskQuery(buckets=frozenset({3, 7})))
    assert built is not None
    assert "tasks_bucket_idx" in _explain(postgres_dsn, *built)


@checks("QUERY-PUSHDOWN")
def test_explain_tag_query_uses_the_gin_index(postgres_dsn: str, populated: str) -> None:
    built = pgstore.query_statement(populated, TaskQuery(tag="rare"))
    assert built is not None
    assert "tasks_tags_idx" in _explain(postgres_dsn, *built)


@checks("QUERY-PUSHDOWN")
def test_explain_claim_uses_the_partial_index(postgres_dsn: str, populated: str) -> None:
    now = at(0)
    params = {"now": now, "until": now + timedelta(seconds=30), "limit": 10}
    plan = _explain_json(postgres_dsn, pgstore.claim_statement(populated), params)
    assert "commands_unfinished_idx" in _index_names(plan)
    # The candidates are materialised and read once: a re-run of a SKIP LOCKED
    # subquery (the WHERE id IN (...) form) could lease more than ``limit`` rows.
    assert "CTE Scan" in _node_types(plan)


@checks("QUERY-PUSHDOWN")
def test_store_query_agrees_with_the_explained_statement(postgres_dsn: str, populated: str) -> None:
    """The statement EXPLAINed above is the one the store runs: same rows."""
    store = pgstore.PostgresTaskStore(postgres_dsn, schema=populated)
    try:
        found = store.query(TaskQuery(buckets=frozenset({0, 7}), tag="rare"))
        assert [t.task_id for t in found] == [f"t-{g}" for g in range(500, 5001, 500)]
        in_buckets = store.query(TaskQuery(buckets=frozenset({3, 7})))
        assert [t.task_id for t in in_buckets] == [
            f"t-{g}" for g in range(1, 5001) if g % 100 in (3, 7)
        ]
        rare = store.query(TaskQuery(tag="rare", newest_first=True, limit=3))
        assert [t.task_id for t in rare] == ["t-5000", "t-4500", "t-4000"]
        assert store.counts()[TaskStatus.PENDING] == 5000
    finally:
        store.close()


# -- schema v2: indexes that carry the order ---------------------------------------------------
def _explain_without_sorting(dsn: str, statement: sql.Composable, params: Any) -> Any:
    """EXPLAIN with sorts and bitmap scans discouraged: is there an index IN ORDER?

    Switching a method off only makes it very expensive, so a Sort still
    appears when no index can deliver the order -- which is what is asserted.
    """
    with psycopg.connect(dsn) as conn:
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            conn.execute(sql.SQL("SET LOCAL {} = off").format(sql.Identifier(setting)))
        row = conn.execute(sql.SQL("EXPLAIN (FORMAT JSON) ") + statement, params).fetchone()
        conn.rollback()
    assert row is not None
    return row[0]


@checks("QUERY-PUSHDOWN", "QUERY-ORDER-CREATED")
def test_explain_bucket_status_query_uses_the_status_index_in_order(
    postgres_dsn: str, populated: str
) -> None:
    query = TaskQuery(buckets=frozenset({3}), statuses=frozenset({TaskStatus.RUNNING}))
    built = pgstore.query_statement(populated, query)
    assert built is not None
    plan = _explain_without_sorting(postgres_dsn, *built)
    assert "tasks_status_idx" in _index_names(plan)
    assert "Sort" not in _node_types(plan), "the index must deliver ORDER BY created_at"


@checks("QUERY-PUSHDOWN", "QUERY-ORDER-CREATED")
def test_explain_one_bucket_with_limit_reads_the_bucket_index_in_order(
    postgres_dsn: str, populated: str
) -> None:
    for newest_first in (False, True):
        query = TaskQuery(buckets=frozenset({3}), limit=5, newest_first=newest_first)
        built = pgstore.query_statement(populated, query)
        assert built is not None
        plan = _explain_without_sorting(postgres_dsn, *built)
        assert "tasks_bucket_idx" in _index_names(plan)
        assert "Sort" not in _node_types(plan), "LIMIT must stop early, not sort the bucket"
    # The check can fail: two buckets are two ranges of the bucket index, in
    # order only after a Sort, so the planner sorts them or walks tasks_created.
    built = pgstore.query_statement(populated, TaskQuery(buckets=frozenset({3, 7}), limit=5))
    assert built is not None
    plan = _explain_without_sorting(postgres_dsn, *built)
    assert "Sort" in _node_types(plan) or "tasks_bucket_idx" not in _index_names(plan)


def test_single_and_several_buckets_and_statuses_give_the_same_rows(
    postgres_dsn: str, populated: str
) -> None:
    """The "=" form for one value and the "= ANY" form agree (no row lost either way)."""
    store = pgstore.PostgresTaskStore(postgres_dsn, schema=populated)
    try:
        pending = TaskStatus.PENDING
        one = store.query(TaskQuery(buckets=frozenset({3}), statuses=frozenset({pending})))
        two = store.query(
            TaskQuery(
                buckets=frozenset({3, 10_000}), statuses=frozenset({pending, TaskStatus.LOST})
            )
        )
        assert [t.task_id for t in one] == [t.task_id for t in two]
        assert [t.task_id for t in one] == [f"t-{g}" for g in range(1, 5001) if g % 100 == 3]
    finally:
        store.close()


# -- counters: counts() stays exact -----------------------------------------------------------
@checks("COUNTS-AGGREGATED")
def test_counts_reads_the_counters(postgres_dsn: str, populated: str) -> None:
    """The populated rows came in by plain SQL; the triggers counted them anyway."""
    with psycopg.connect(postgres_dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT status, sum(n) FROM {} GROUP BY status").format(
                sql.Identifier(populated, "task_counts")
            )
        ).fetchall()
    assert rows == [("pending", 5000)]


@checks("COUNTS-PER-STATUS")
def test_counters_equal_a_recount_after_churn(postgres_dsn: str, schema: str) -> None:
    store = pgstore.PostgresTaskStore(postgres_dsn, schema=schema)
    try:
        assert churn_and_check(store) == 17
    finally:
        store.close()


@checks("COUNTS-PER-STATUS")
def test_eight_threads_writing_keep_the_counters_exact(postgres_dsn: str, schema: str) -> None:
    """8 threads create, save (changing status) and prune at once; counts() == a recount.

    Each thread has its own connection (max_size=8), so the counter rows are
    updated by concurrent transactions, the case the per-backend slots and the
    ordered upsert are for.
    """
    store = pgstore.PostgresTaskStore(postgres_dsn, schema=schema, min_size=8, max_size=8)
    statuses = list(TaskStatus)
    go = threading.Barrier(WRITERS)

    def writer(w: int) -> int:
        rng = random.Random(w)
        go.wait()
        versions: dict[str, int] = {}
        for step in range(60):
            if rng.random() < 0.5 or not versions:
                task_id = f"w{w}-t{step:03d}"
                store.create(snapshot(task_id, status=rng.choice(statuses), created=step))
                versions[task_id] = 1
            else:
                task_id = rng.choice(sorted(versions))
                new = snapshot(task_id, status=rng.choice(statuses), version=versions[task_id] + 1)
                try:
                    store.save(new, expect_version=versions[task_id])
                    versions[task_id] += 1
                except ConcurrencyConflict:
                    del versions[task_id]  # pruned by another thread
            if step % 20 == 19:
                store.prune(keep_terminal=rng.randrange(0, 40))
        return len(versions)

    try:
        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(writer, range(WRITERS)))
        counts = dict(store.counts())
        assert counts == recount(store)
        assert sum(counts.values()) > 0
        with psycopg.connect(postgres_dsn) as conn:
            row = conn.execute(
                sql.SQL("SELECT count(DISTINCT slot) FROM {}").format(
                    sql.Identifier(schema, "task_counts")
                )
            ).fetchone()
        assert row is not None and row[0] > 1, "all writers hit one counter slot"
    finally:
        store.close()


def test_install_migrates_a_version_1_schema_with_its_counts(postgres_dsn: str) -> None:
    name = f"chongming_it_{uuid.uuid4().hex[:16]}"
    try:
        with psycopg.connect(postgres_dsn) as conn:
            s = sql.Identifier(name)
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(s))
            conn.execute(
                sql.SQL("CREATE TABLE {} (version integer PRIMARY KEY, installed_at timestamptz "
                        "NOT NULL DEFAULT now())").format(sql.Identifier(name, "schema_version"))
            )
            for statement in pgschema._MIGRATIONS[1]:
                conn.execute(sql.SQL(statement).format(schema=s))
            conn.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (1)").format(
                    sql.Identifier(name, "schema_version")
                )
            )
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (task_id, name, status, status_version, created_at, "
                    "updated_at) SELECT 't-' || g, 'job', "
                    "CASE WHEN g % 3 = 0 THEN 'running' ELSE 'succeeded' END, 1, now(), now() "
                    "FROM generate_series(1, 30) AS g"
                ).format(sql.Identifier(name, "tasks"))
            )
        assert pgstore.install_schema(postgres_dsn, name) == pgstore.SCHEMA_VERSION == 2
        store = pgstore.PostgresTaskStore(postgres_dsn, schema=name)
        try:
            counts = store.counts()
            assert counts[TaskStatus.RUNNING] == 10 and counts[TaskStatus.SUCCEEDED] == 20
            store.create(snapshot("new", status=TaskStatus.RUNNING))
            assert store.counts()[TaskStatus.RUNNING] == 11
        finally:
            store.close()
        with psycopg.connect(postgres_dsn) as conn:
            versions = conn.execute(
                sql.SQL("SELECT version FROM {} ORDER BY version").format(
                    sql.Identifier(name, "schema_version")
                )
            ).fetchall()
        assert versions == [(1,), (2,)]
    finally:
        pgstore.drop_schema(postgres_dsn, name)


# -- the factories: reset_store empties everything, make_store cleans up ---------------------------
def _fill_everything(store: pgstore.PostgresTaskStore) -> None:
    store.create(snapshot("t1", status=TaskStatus.RUNNING))
    store.create(snapshot("t2", status=TaskStatus.SUCCEEDED, created=1))
    store.save(snapshot("t1", status=TaskStatus.FAILED, version=2), expect_version=1)
    store.append(transition("t1", 1))
    store.submit_command(command("c1", "t1"))
    store.submit_command(command("c2", "t2", created=1))
    assert store.claim_commands(now=at(5), lease_seconds=30, limit=1)
    assert sum(store.counts().values()) == 2


def _assert_empty(store: pgstore.PostgresTaskStore) -> None:
    assert store.get("t1") is None and store.get("t2") is None
    assert store.query() == []
    assert store.history("t1") == []
    assert store.claim_commands(now=at(10_000), lease_seconds=30, limit=100) == []
    assert set(store.counts().values()) == {0}


def test_reset_store_empties_every_table(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the kit's reuse seam relies on: after reset_store the schema holds no row at all,
    counters included, and the store works on as if new."""
    monkeypatch.setenv(pgstore.DSN_ENV, postgres_dsn)
    gen = pgstore.make_store()
    store = next(gen)
    try:
        _fill_everything(store)
        pgstore.reset_store(store)
        _assert_empty(store)
        with psycopg.connect(postgres_dsn) as conn:
            for table in ("tasks", "transitions", "commands", "task_counts"):
                row = conn.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(
                        sql.Identifier(store._schema, table))
                ).fetchone()
                assert row == (0,), f"{table} still has rows"
        _fill_everything(store)  # the same ids again: nothing of the first round is left
    finally:
        store.close()
        gen.close()


def test_make_store_drops_its_schema(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(pgstore.DSN_ENV, postgres_dsn)
    gen = pgstore.make_store()
    store = next(gen)
    used = store._schema
    try:
        _assert_empty(store)
    finally:
        store.close()
        gen.close()
    with psycopg.connect(postgres_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", [used]
        ).fetchone()
    assert row == (0,)
