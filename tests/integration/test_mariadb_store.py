"""MariaDBTaskStore against a real server: the contract, and the InnoDB-specific evidence.

The contract proves single-connection semantics. What it cannot see is
proved here, each case on its own connections, on a fresh database dropped
afterwards:

* the whole contract as a user with DML grants on one database only, who
  cannot run DDL or install a schema;
* 8 writers race one ``save`` at the same version: exactly one wins;
* 8 consumers (threads, and spawned processes through ``make_shared_store``)
  claim concurrently: every command exactly once while its lease holds;
* claims, saves, prunes and completions race after a crashed holder's leases
  expired: no deadlock is even retried (``deadlock_retries`` stays 0), no
  command is handed out twice, no task a save made non-terminal is pruned --
  and the same race with a prune that deletes through the status index
  deadlocks, so the measurement can see one;
* a lease holder's connection is killed (``KILL CONNECTION``) mid-transaction:
  the lease is neither released early nor stuck; idle pooled connections
  killed by the server are replaced; a call in flight during a kill raises
  StoreError and changes nothing;
* EXPLAIN shows the bucket, status, tag and claim statements on their indexes,
  in order (no filesort);
* text is compared code point by code point (255-character ids and tags of
  4-byte characters, every C0 control in a tag, trailing spaces), times are
  stored as UTC.

Without ``CHONGMING_TEST_MARIADB`` every case here skips with the reason
(``CHONGMING_REQUIRE_MARIADB=1`` turns that into a failure); see conftest.py.
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
from datetime import UTC, timedelta, timezone
from typing import Any

import pytest
from counts_churn import churn_and_check, recount

# Skips this module (or fails, under CHONGMING_REQUIRE_MARIADB) without PyMySQL.
from mariadb_driver import mschema, mstore, pymysql

from chongming_conformance import (
    ConcurrencyConflict,
    StoreError,
    TaskQuery,
    TaskStatus,
    checks,
)
from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.protocol.alphabet import C0_CONTROLS
from chongming_conformance.strategies.samples import at, command, snapshot, transition

pytestmark = pytest.mark.mariadb

WRITERS = 8
CONSUMERS = 8
ROUNDS = 30
WAIT = 60.0  # generous upper bound for "wait until the server shows X"; never a speed target


# -- helpers -------------------------------------------------------------------------------
@contextlib.contextmanager
def fresh_database(dsn: str) -> Iterator[str]:
    """Install the store's schema into a new uniquely named database; drop it afterwards."""
    name = f"chongming_it_{uuid.uuid4().hex[:16]}"
    mstore.install_schema(dsn, name)
    try:
        yield name
    finally:
        mstore.drop_schema(dsn, name)


@pytest.fixture
def database(mariadb_dsn: str) -> Iterator[str]:
    with fresh_database(mariadb_dsn) as name:
        yield name


def connect(dsn: str) -> Any:
    """A plain autocommit connection with no default database (not one of the store's)."""
    return mschema.parse_dsn(dsn).connect()


def rows(dsn: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    conn = connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(statement, params)
            return list(cur.fetchall())
    finally:
        conn.close()


def store_threads(dsn: str, database: str) -> list[int]:
    """Server thread ids of the connections whose default database is ``database``.

    The store connects with its database selected; every helper here connects
    without one, so this lists exactly the store's connections.
    """
    return [
        int(r[0])
        for r in rows(
            dsn, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s ORDER BY ID",
            [database],
        )
    ]


def kill(dsn: str, threads: list[int]) -> None:
    """KILL CONNECTION each thread and wait until the server no longer lists them."""
    conn = connect(dsn)
    try:
        with conn.cursor() as cur:
            for thread in threads:
                with contextlib.suppress(pymysql.err.OperationalError):  # already gone
                    cur.execute(f"KILL CONNECTION {int(thread)}")

            def gone() -> bool:
                marks = ", ".join(["%s"] * len(threads))
                cur.execute(
                    f"SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID IN ({marks})",
                    threads,
                )
                return bool(cur.fetchone()[0] == 0)

            wait_until(gone, f"threads {threads} to exit")
    finally:
        conn.close()


def waiting_on_lock(dsn: str, thread: int) -> bool:
    """The thread waits for a row lock (InnoDB) or a table/metadata lock."""
    found = rows(
        dsn,
        "SELECT 1 FROM information_schema.INNODB_TRX "
        "WHERE trx_mysql_thread_id = %s AND trx_state = 'LOCK WAIT' "
        "UNION ALL SELECT 1 FROM information_schema.PROCESSLIST "
        "WHERE ID = %s AND STATE LIKE 'Waiting for%%lock%%'",
        [thread, thread],
    )
    return bool(found)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Poll until ``condition()``; fail (not skip) if the server never gets there."""
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {WAIT}s waiting for {what}")
        time.sleep(0.02)


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


def fill_pool(store: mstore.MariaDBTaskStore, n: int) -> None:
    """Make the store's pool hold ``n`` open connections (borrowed together, then returned).

    Concurrent calls would do it only if they overlap, which a fast call may not.
    """
    held = [store._pool.acquire() for _ in range(n)]
    for conn in held:
        store._pool.release(conn, broken=False)


def error_code(exc: BaseException | None) -> int | None:
    return exc.args[0] if exc is not None and exc.args and isinstance(exc.args[0], int) else None


# -- the contract ---------------------------------------------------------------------------
@pytest.mark.usefixtures("mariadb_dsn")
class TestMariaDBContract(StoreContract):
    """The whole packaged contract, through the module's own ``make_store`` factory, with
    the store kept and emptied by ``reset_store`` between tests (the reuse seam)."""

    def make_store(self) -> Generator[mstore.MariaDBTaskStore, None, None]:
        return mstore.make_store()

    def reset_function(self) -> Callable[[Any], None]:
        return mstore.reset_store


@pytest.mark.usefixtures("mariadb_dsn")
class TestDMLOnlyUserContract(StoreContract):
    """The whole contract as a user with SELECT/INSERT/UPDATE/DELETE on one database only.

    The schema is installed by the privileged DSN (as a deployment would do
    once); the store then runs with no DDL right anywhere -- ``reset_store``
    between tests included.
    """

    admin_dsn: str
    user: str
    user_dsn: str

    @classmethod
    def setup_class(cls) -> None:
        cls.admin_dsn = os.environ[mstore.DSN_ENV]
        cls.user = f"chongming_dml_{uuid.uuid4().hex[:12]}"
        password = uuid.uuid4().hex
        conn = connect(cls.admin_dsn)
        try:
            with conn.cursor() as cur:
                cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", [cls.user, password])
        finally:
            conn.close()
        params = mschema.parse_dsn(cls.admin_dsn)
        cls.user_dsn = f"mysql://{cls.user}:{password}@{params.host}:{params.port}/"

    @classmethod
    def teardown_class(cls) -> None:
        conn = connect(cls.admin_dsn)
        try:
            with conn.cursor() as cur:
                cur.execute("DROP USER %s@'%%'", [cls.user])
        finally:
            conn.close()

    def grant(self, database: str) -> None:
        conn = connect(self.admin_dsn)
        try:
            with conn.cursor() as cur:
                cur.execute(
                    f"GRANT SELECT, INSERT, UPDATE, DELETE ON {mschema.quote_ident(database)}.* "
                    "TO %s@'%%'",
                    [self.user],
                )
        finally:
            conn.close()

    def make_store(self) -> Generator[mstore.MariaDBTaskStore, None, None]:
        with fresh_database(self.admin_dsn) as database:
            self.grant(database)
            store = mstore.MariaDBTaskStore(self.user_dsn, database=database)
            try:
                yield store
            finally:
                store.close()

    def reset_function(self) -> Callable[[Any], None]:
        return mstore.reset_store

    def test_the_user_holds_dml_grants_only(self) -> None:
        granted = " ".join(r[0] for r in rows(self.admin_dsn, f"SHOW GRANTS FOR '{self.user}'@'%'"))
        assert "SELECT, INSERT, UPDATE, DELETE ON" in granted, granted
        for right in ("CREATE", "ALTER", "DROP", "INDEX", "ALL PRIVILEGES", "LOCK TABLES"):
            assert right not in granted, granted

    @pytest.mark.parametrize(
        "ddl",
        [
            "CREATE TABLE {db}.intruder (x int)",
            "CREATE INDEX intruder_idx ON {db}.tasks (status)",
            "ALTER TABLE {db}.tasks ADD COLUMN intruder int",
            "DROP TABLE {db}.commands",
            "TRUNCATE TABLE {db}.transitions",
        ],
    )
    def test_user_cannot_run_ddl(self, ddl: str) -> None:
        """Proves the user is really restricted, so the green contract above means something."""
        self.store.create(snapshot("t-1"))  # the store works as this user...
        conn = connect(self.user_dsn)
        try:
            with conn.cursor() as cur, pytest.raises(pymysql.err.OperationalError) as denied:
                cur.execute(ddl.format(db=mschema.quote_ident(self.store.database)))
        finally:
            conn.close()
        assert error_code(denied.value) == 1142, denied.value  # command denied to user
        assert self.store.get("t-1") == snapshot("t-1"), "...and the failed DDL changed nothing"

    def test_user_cannot_install_a_schema(self) -> None:
        name = f"chongming_it_{uuid.uuid4().hex[:16]}"
        try:
            with pytest.raises(StoreError) as refused:
                mstore.install_schema(self.user_dsn, name)
            assert error_code(refused.value.__cause__) == 1044, refused.value  # access denied
        finally:
            mstore.drop_schema(self.admin_dsn, name)  # in case it wrongly succeeded


# -- cross-process evidence ---------------------------------------------------------------------
def stores(dsn: str, database: str, n: int) -> list[mstore.MariaDBTaskStore]:
    """``n`` independent stores of one connection each (``max_size=1``)."""
    return [mstore.MariaDBTaskStore(dsn, database=database, max_size=1) for _ in range(n)]


@checks("XP-SAVE-ATOMIC")
def test_eight_writers_save_one_version_exactly_one_wins(mariadb_dsn: str, database: str) -> None:
    writers = stores(mariadb_dsn, database, WRITERS)
    try:
        writers[0].create(snapshot("race", version=0))
        with ThreadPoolExecutor(WRITERS) as pool:
            for rnd in range(ROUNDS):
                barrier = threading.Barrier(WRITERS, timeout=WAIT)

                def save(i: int, rnd: int = rnd, barrier: threading.Barrier = barrier) -> str:
                    mine = snapshot("race", version=rnd + 1, name=f"writer-{i}-round-{rnd}")
                    barrier.wait()  # release all eight writers at once
                    try:
                        writers[i].save(mine, expect_version=rnd)
                    except ConcurrencyConflict as conflict:
                        assert (conflict.expected, conflict.actual) == (rnd, rnd + 1), conflict
                        return "conflict"
                    return "won"

                results = list(pool.map(save, range(WRITERS)))
                winners = [i for i, r in enumerate(results) if r == "won"]
                assert len(winners) == 1, f"round {rnd}: winners {winners}, results {results}"
                stored = writers[0].get("race")
                assert stored is not None
                assert (stored.status_version, stored.name) == (
                    rnd + 1,
                    f"writer-{winners[0]}-round-{rnd}",
                ), f"round {rnd}: the winner's snapshot is not the stored one: {stored}"
        assert sum(w.deadlock_retries for w in writers) == 0
    finally:
        for store in writers:
            store.close()


@checks("SAVE-CAS")
def test_an_identical_resave_counts_as_won(mariadb_dsn: str, database: str) -> None:
    """CLIENT.FOUND_ROWS: an UPDATE that changes nothing still reports its matched row."""
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    try:
        store.create(snapshot("t-1", version=1))
        store.save(snapshot("t-1", version=1), expect_version=1)  # same row, same version
        assert store.get("t-1") == snapshot("t-1", version=1)
    finally:
        store.close()


@checks("XP-CLAIM-EXCLUSIVE", "CLAIM-LEASE-EXCLUSIVE")
def test_eight_consumers_claim_each_command_exactly_once(mariadb_dsn: str, database: str) -> None:
    total, lease = 240, 300.0
    consumers = stores(mariadb_dsn, database, CONSUMERS)
    try:
        for n in range(total):
            consumers[0].submit_command(command(f"cmd-{n:04d}", f"task-{n % 7}", created=n))
        barrier = threading.Barrier(CONSUMERS, timeout=WAIT)

        def consume(i: int) -> list[str]:
            got: list[str] = []
            barrier.wait()
            while True:
                # Every consumer uses the same ``now``: no lease expires during the race.
                batch = consumers[i].claim_commands(now=at(0), lease_seconds=lease, limit=3)
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
        assert consumers[0].claim_commands(now=at(lease - 1e-6), lease_seconds=lease) == []
        again = consumers[0].claim_commands(now=at(lease), lease_seconds=lease, limit=total)
        assert len(again) == total  # every lease ends exactly at lease_until
        assert sum(c.deadlock_retries for c in consumers) == 0
    finally:
        for store in consumers:
            store.close()


# Runs in a fresh interpreter. The opener arrives pickled (base64) in argv; the
# worker opens its store, says "ready", waits for "go" on stdin (a barrier across
# processes), then claims and completes until nothing is left and prints the ids.
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
def test_processes_share_one_store_via_make_shared_store(
    mariadb_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shared-store opener pickles, and 4 processes each claim+complete distinct commands."""
    monkeypatch.setenv(mstore.DSN_ENV, mariadb_dsn)
    total = 120
    factory = mstore.make_shared_store()
    opener = next(factory)
    try:
        parent = opener()
        try:
            for n in range(total):
                parent.submit_command(command(f"cmd-{n:03d}", "task-1", created=n))
            payload = base64.b64encode(pickle.dumps(opener)).decode()
            workers = [
                subprocess.Popen(
                    [sys.executable, "-c", _CLAIM_WORKER, payload],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
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
                out, err = worker.stdout.read(), worker.stderr.read()
                assert worker.wait(timeout=WAIT) == 0, err
                per_process.append(json.loads(out))
            claimed = Counter(cid for got in per_process for cid in got)
            assert all(n == 1 for n in claimed.values()), claimed.most_common(3)
            assert sorted(claimed) == [f"cmd-{n:03d}" for n in range(total)]
            # Completed by the workers, seen by the parent: nothing left to claim, ever.
            assert parent.claim_commands(now=at(10_000), lease_seconds=1.0) == []
        finally:
            parent.close()
    finally:
        with contextlib.suppress(StopIteration):
            next(factory)


# -- deadlocks: claim, save, prune and complete racing ------------------------------------------
def _locked_in_a_transaction(dsn: str, statement: str, params: Any = None) -> Any:
    """A new connection inside BEGIN that has run ``statement`` (and holds its locks)."""
    conn = connect(dsn)
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.execute(statement, params)
        cur.fetchall()
    return conn


def _race(
    dsn: str, database: str, store_class: type[mstore.MariaDBTaskStore], *, seconds: float
) -> dict[str, Any]:
    """A crashed holder's leases expired; claimers, savers, a pruner race on one database.

    Tasks ``live-*`` are RUNNING throughout; their 160 commands were leased by a
    holder that then "crashed" (never completed them) and must each be claimed
    exactly once after the leases expire. Tasks ``churn-*`` are moved between
    RUNNING and SUCCEEDED by three savers while a pruner prunes with
    ``keep_terminal=0``; the saver that owns a pruned task creates it again
    (at a higher version, so versions order every acknowledged write) with a new
    command, so the prune keeps deleting commands the claimers are scanning.
    Every worker has its own connection. Returns what was observed.
    """
    live, churn = 40, 24
    setup = store_class(dsn, database=database)
    for i in range(live):
        setup.create(snapshot(f"live-{i:03d}", status=TaskStatus.RUNNING, created=i, tags={"x"}))
        for k in range(4):
            setup.submit_command(command(f"live-{i:03d}-{k}", f"live-{i:03d}", created=i * 4 + k))
    for i in range(churn):
        setup.create(snapshot(f"churn-{i:03d}", status=TaskStatus.RUNNING, created=1000 + i))
    # The crashed holder: everything leased until 10 s, never completed.
    assert len(setup.claim_commands(now=at(0), lease_seconds=10.0, limit=10_000)) == live * 4
    setup.close()

    workers = [store_class(dsn, database=database, max_size=1) for _ in range(7)]
    claimers, savers, pruner = workers[:3], workers[3:6], workers[6]
    stop = threading.Event()
    claimed: list[str] = []
    errors: list[BaseException] = []
    # task id -> (version, status) of the acknowledged write with the highest version
    acknowledged: dict[str, tuple[int, TaskStatus]] = {
        f"churn-{i:03d}": (1, TaskStatus.RUNNING) for i in range(churn)
    }
    guard = threading.Lock()
    tally = Counter[str]()

    def note(task_id: str, version: int, status: TaskStatus, what: str) -> None:
        with guard:
            tally[what] += 1
            if version > acknowledged.get(task_id, (-1, status))[0]:
                acknowledged[task_id] = (version, status)

    def claimer(store: mstore.MariaDBTaskStore) -> None:
        # After the crash every lease has expired; leases taken now last an hour.
        while not stop.is_set():
            batch = store.claim_commands(now=at(20), lease_seconds=3600.0, limit=3)
            for c in batch:
                store.complete_command(c.command_id, now=at(21), outcome="done")
            with guard:
                claimed.extend(c.command_id for c in batch)

    def saver(store: mstore.MariaDBTaskStore, seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            task_id = f"churn-{rng.randrange(churn):03d}"
            current = store.get(task_id)
            if current is None:  # pruned: bring it back, far above any version in flight
                if int(task_id[-3:]) % len(savers) != seed:
                    # One saver owns each task's re-creation: two INSERTs of one key
                    # can deadlock inside InnoDB (see the test after this one).
                    continue
                with guard:
                    version = acknowledged[task_id][0] + 100
                again = snapshot(task_id, status=TaskStatus.RUNNING, version=version,
                                 created=1000 + rng.randrange(churn), tags={f"g{version}"})
                try:
                    store.create(again)
                except StoreError:
                    continue  # another saver brought it back first
                note(task_id, version, TaskStatus.RUNNING, "create")
                store.submit_command(command(f"{task_id}-g{version}", task_id, created=2000))
                continue
            status = rng.choice((TaskStatus.RUNNING, TaskStatus.SUCCEEDED))
            version = current.status_version + 1
            new = current.evolve(status=status, status_version=version,
                                 tags=frozenset({f"v{version % 3}"}))
            try:
                store.save(new, expect_version=current.status_version)
            except ConcurrencyConflict:
                continue
            note(task_id, version, status, "save")

    def prune_loop(store: mstore.MariaDBTaskStore) -> None:
        while not stop.is_set():
            pruned = store.prune(keep_terminal=0)
            with guard:
                tally["pruned"] += pruned

    def guarded(call: Callable[[], None]) -> Callable[[], None]:
        def body() -> None:
            try:
                call()
            except BaseException as exc:
                errors.append(exc)
                stop.set()

        return body

    threads = [threading.Thread(target=guarded(lambda s=s: claimer(s))) for s in claimers]
    threads += [
        threading.Thread(target=guarded(lambda s=s, i=i: saver(s, i))) for i, s in enumerate(savers)
    ]
    threads.append(threading.Thread(target=guarded(lambda: prune_loop(pruner))))
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(WAIT)
    reader = store_class(dsn, database=database)
    try:
        survivors = {t.task_id: t for t in reader.query()}
        leftover = reader.claim_commands(now=at(20), lease_seconds=1.0, limit=10_000)
        counts_ok = dict(reader.counts()) == recount(reader)
    finally:
        reader.close()
    retries = sum(w.deadlock_retries for w in workers)
    for worker in workers:
        worker.close()
    return {
        "errors": errors, "claimed": claimed, "acknowledged": acknowledged,
        "survivors": survivors, "leftover": [c.command_id for c in leftover],
        "retries": retries, "counts_ok": counts_ok, "live": live, "tally": tally,
    }


@checks("XP-CLAIM-EXCLUSIVE", "XP-CLAIM-CRASH-RECOVERY", "XP-PRUNE-SAVE-RACE")
def test_claim_save_prune_complete_race_takes_no_deadlock(mariadb_dsn: str, database: str) -> None:
    seen = _race(mariadb_dsn, database, mstore.MariaDBTaskStore, seconds=4.0)
    assert not seen["errors"], seen["errors"][:3]
    tally = seen["tally"]
    assert tally["pruned"] > 10 and tally["save"] > 50 and tally["create"] > 5, tally
    assert seen["retries"] == 0, f"{seen['retries']} deadlock(s) retried: a lock-order cycle"
    claimed = Counter(seen["claimed"])
    assert all(n == 1 for n in claimed.values()), claimed.most_common(3)
    live_ids = {f"live-{i:03d}-{k}" for i in range(seen["live"]) for k in range(4)}
    assert live_ids <= set(claimed) | set(seen["leftover"]), "a live command was lost"
    assert not set(seen["leftover"]) & set(claimed), "a completed command is claimable again"
    # XP-PRUNE-SAVE-RACE: a task whose newest acknowledged write made it RUNNING is still
    # there, at that version or later.
    for task_id, (version, status) in sorted(seen["acknowledged"].items()):
        if status is TaskStatus.RUNNING:
            survivor = seen["survivors"].get(task_id)
            assert survivor is not None, f"{task_id} was pruned after a save made it RUNNING"
            assert survivor.status_version >= version, (task_id, version, survivor)
    assert seen["counts_ok"], "counts() disagrees with a recount after the race"
    assert len(claimed) > seen["live"], "the race claimed too little to mean anything"


def test_two_creates_of_a_just_deleted_id_deadlock_inside_innodb_and_the_store_retries(
    mariadb_dsn: str, database: str
) -> None:
    """The one deadlock the lock order cannot exclude: two INSERTs of the same key.

    Each INSERT's duplicate check takes a shared lock on the (deleted, not yet
    purged) record, then each waits to insert into the gap the other's shared
    lock covers: error 1213, whatever the isolation level. Here a prune's DELETE
    holds the record while two stores create the same id; when it commits, both
    creates get their shared locks and deadlock. The store retries the victim
    inside ``create``: its second attempt finds the winner's row and reports a
    duplicate -- StoreError, never ConcurrencyConflict, never a raw driver error.
    """
    setup = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    setup.create(snapshot("t-1", status=TaskStatus.SUCCEEDED))
    setup.close()
    first, second = stores(mariadb_dsn, database, 2)
    first.counts()
    second.counts()
    threads = store_threads(mariadb_dsn, database)
    tasks = mschema.quote_ident(database, "tasks")
    deleter = _locked_in_a_transaction(mariadb_dsn, f"DELETE FROM {tasks} WHERE task_id = 't-1'")
    with deleter.cursor() as cur:  # what the store's prune does to the counters, too
        cur.execute(
            f"UPDATE {mschema.quote_ident(database, 'task_counts')} SET n = n - 1 "
            "WHERE status = 'succeeded' AND slot = 0"
        )
    try:
        one, got_one = run_in_thread(lambda: first.create(snapshot("t-1", name="first")))
        two, got_two = run_in_thread(lambda: second.create(snapshot("t-1", name="second")))
        wait_until(lambda: all(waiting_on_lock(mariadb_dsn, t) for t in threads),
                   "both creates to wait for the deleted row")
        deleter.commit()
        one.join(WAIT)
        two.join(WAIT)
    finally:
        deleter.close()
    outcomes = [*got_one, *got_two]
    won = [o for o in outcomes if o is None]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1 and len(lost) == 1, outcomes
    assert isinstance(lost[0], StoreError) and not isinstance(lost[0], ConcurrencyConflict)
    assert "already exists" in str(lost[0]), lost[0]
    assert first.deadlock_retries + second.deadlock_retries == 1, "no deadlock was retried"
    winner = "first" if got_one == [None] else "second"
    stored = first.get("t-1")
    assert stored is not None and stored.name == winner
    assert dict(first.counts()) == recount(first)
    first.close()
    second.close()




def _thread_id(conn: Any) -> int:
    with conn.cursor() as cur:
        cur.execute("SELECT CONNECTION_ID()")
        return int(cur.fetchone()[0])


def test_a_prune_that_locks_through_the_status_index_deadlocks_with_save(
    mariadb_dsn: str, database: str
) -> None:
    """The trap, on this server, step by step: why the store's prune locks by primary key.

    A save holds the task's row and is about to change its status; a prune
    that finds terminal tasks through the status index holds the task's index
    entry and waits for the row; the save's UPDATE then needs that entry.
    """
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    store.create(snapshot("t-1", status=TaskStatus.SUCCEEDED))
    store.close()
    tasks = mschema.quote_ident(database, "tasks")
    saver = _locked_in_a_transaction(
        mariadb_dsn, f"SELECT status FROM {tasks} WHERE task_id = 't-1' FOR UPDATE"
    )
    pruner = _locked_in_a_transaction(mariadb_dsn, "SELECT 1")
    pruner_thread = _thread_id(pruner)
    try:

        def naive_prune() -> None:
            with pruner.cursor() as cur:
                cur.execute(
                    f"SELECT task_id FROM {tasks} FORCE INDEX (tasks_status) WHERE status IN "
                    "('cancelled', 'failed', 'lost', 'succeeded') FOR UPDATE"
                )

        worker, outcome = run_in_thread(naive_prune)
        wait_until(lambda: waiting_on_lock(mariadb_dsn, pruner_thread), "the prune to wait")
        failures: list[BaseException] = []
        try:
            with saver.cursor() as cur:
                cur.execute(f"UPDATE {tasks} SET status = 'running' WHERE task_id = 't-1'")
        except pymysql.err.OperationalError as exc:
            failures.append(exc)
        worker.join(WAIT)
        failures += [o for o in outcome if isinstance(o, BaseException)]
        assert [error_code(e) for e in failures] == [1213], failures  # one deadlock victim
    finally:
        saver.close()
        pruner.close()


@checks("XP-PRUNE-SAVE-RACE")
def test_the_store_prune_waits_for_a_save_and_keeps_the_task_it_made_running(
    mariadb_dsn: str, database: str
) -> None:
    """The same interleaving with the store's prune: no deadlock, the save wins, nothing lost."""
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database, max_size=1)
    try:
        store.create(snapshot("t-1", status=TaskStatus.SUCCEEDED, tags={"a"}))
        store.create(snapshot("t-0", status=TaskStatus.FAILED, created=-1))
        (prune_thread,) = store_threads(mariadb_dsn, database)
        # The store's own save statements, paused after the row lock.
        new = snapshot("t-1", status=TaskStatus.RUNNING, version=2, tags={"a"})
        params = {**mstore._snapshot_params(new), "expect_version": 1}
        saver = _locked_in_a_transaction(mariadb_dsn, store._sql_save_lock, ["t-1"])
        try:
            worker, outcome = run_in_thread(lambda: store.prune(keep_terminal=0))
            wait_until(lambda: waiting_on_lock(mariadb_dsn, prune_thread), "the prune to wait")
            with saver.cursor() as cur:
                assert cur.execute(store._sql_save, params) == 1
                cur.execute(store._sql_count_move, ["succeeded", "succeeded", "running", 0])
            saver.commit()
            worker.join(WAIT)
        finally:
            saver.close()
        assert outcome == [1], outcome  # t-0 only: t-1 was re-tested under the lock
        assert store.get("t-1") == new
        assert store.get("t-0") is None
        assert dict(store.counts()) == recount(store)
        assert store.deadlock_retries == 0
    finally:
        store.close()


def test_under_repeatable_read_one_claim_blocks_another_and_not_under_read_committed(
    mariadb_dsn: str, database: str
) -> None:
    """Why the store's sessions are READ COMMITTED: gap locks make claims wait on each other.

    After a crash every lease has expired. Two claims each lock one command
    (SKIP LOCKED) and write its new lease. Under REPEATABLE READ the second
    claim's scan holds a gap lock in the claim index, and the first claim's new
    index entry falls into that gap: it waits (here until a 1 s lock timeout;
    with more rows, two such waits form a cycle -- error 1213). Under READ
    COMMITTED no gap is locked and neither waits.
    """
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    for i in range(6):
        store.submit_command(command(f"c{i}", created=i))
    assert len(store.claim_commands(now=at(0), lease_seconds=10, limit=10)) == 6  # the crash
    store.close()
    claim = mstore.claim_statement(database)
    commands = mschema.quote_ident(database, "commands")
    later = {"now": at(3600).astimezone(UTC).replace(tzinfo=None), "limit": 1}
    new_lease = at(7200).astimezone(UTC).replace(tzinfo=None)

    def race(level: str) -> list[int | None]:
        first, second = connect(mariadb_dsn), connect(mariadb_dsn)
        codes: list[int | None] = []
        try:
            picked = []
            for conn in (first, second):
                with conn.cursor() as cur:
                    cur.execute(f"SET SESSION TRANSACTION ISOLATION LEVEL {level}")
                    cur.execute("SET SESSION innodb_lock_wait_timeout = 1")
                    cur.execute("BEGIN")
                    cur.execute(claim, later)
                    picked.append(cur.fetchone()[0])
            assert picked == ["c0", "c1"], picked
            for conn, command_id in ((first, "c0"), (second, "c1")):
                try:
                    with conn.cursor() as cur:
                        cur.execute(
                            f"UPDATE {commands} SET lease_until = %s WHERE command_id = %s",
                            [new_lease, command_id],
                        )
                    codes.append(None)
                except pymysql.err.OperationalError as exc:
                    codes.append(error_code(exc))
        finally:
            for conn in (first, second):
                conn.rollback()
                conn.close()
        return codes

    assert race("REPEATABLE READ") == [1205, None]  # the first claim waited on the second
    assert race("READ COMMITTED") == [None, None]


# -- faults ---------------------------------------------------------------------------------------
@checks("XP-CLAIM-CRASH-RECOVERY")
def test_killed_holder_neither_releases_early_nor_locks_forever(
    mariadb_dsn: str, database: str
) -> None:
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    try:
        store.submit_command(command("c-1"))
        (leased,) = store.claim_commands(now=at(0), lease_seconds=30.0)
        assert leased.lease_until == at(30)
        # The holder locks the row and starts an (uncommitted) release, then dies.
        holder = connect(mariadb_dsn)
        table = mschema.quote_ident(database, "commands")
        with holder.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(f"SELECT 1 FROM {table} WHERE command_id = 'c-1' FOR UPDATE")
            cur.execute(f"UPDATE {table} SET lease_until = NULL WHERE command_id = 'c-1'")
            cur.execute("SELECT CONNECTION_ID()")
            (holder_thread,) = cur.fetchone()
        # While the lock is held, SKIP LOCKED passes the row by even though it is expired.
        assert store.claim_commands(now=at(40), lease_seconds=30.0) == []
        kill(mariadb_dsn, [holder_thread])
        with pytest.raises(pymysql.err.OperationalError), holder.cursor() as cur:
            cur.execute("SELECT 1")
        holder.close()
        # The kill rolled the holder back: the lease is the committed one, to the microsecond.
        assert store.claim_commands(now=at(30) - timedelta(microseconds=1), lease_seconds=30) == []
        (taken,) = store.claim_commands(now=at(30), lease_seconds=30.0)
        assert (taken.command_id, taken.lease_until) == ("c-1", at(60))
    finally:
        store.close()


@checks("ERRORS-ARE-STOREERROR")
def test_pool_heals_after_its_idle_connections_are_killed(mariadb_dsn: str, database: str) -> None:
    """A server restart looks like this to the pool: every idle connection is dead."""
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database, max_size=2)
    try:
        store.create(snapshot("t-1"))
        fill_pool(store, 2)
        before = store_threads(mariadb_dsn, database)
        assert len(before) == 2, before
        kill(mariadb_dsn, before)
        assert store.get("t-1") == snapshot("t-1"), "the first call after the kill must work"
        store.touch("t-1", heartbeat_at=at(5))
        assert store.get("t-1") == snapshot("t-1", heartbeat_at=at(5))
        after = store_threads(mariadb_dsn, database)
        assert after and not set(after) & set(before), (before, after)
    finally:
        store.close()


@checks("ERRORS-ARE-STOREERROR")
def test_save_in_flight_during_a_kill_raises_storeerror(mariadb_dsn: str, database: str) -> None:
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database, max_size=1)
    blocker = connect(mariadb_dsn)
    try:
        store.create(snapshot("t-1", version=1))
        (thread,) = store_threads(mariadb_dsn, database)
        with blocker.cursor() as cur:
            cur.execute("BEGIN")
            cur.execute(
                f"SELECT 1 FROM {mschema.quote_ident(database, 'tasks')} "
                "WHERE task_id = 't-1' FOR UPDATE"
            )
        new = snapshot("t-1", version=2, status=TaskStatus.RUNNING)
        worker, outcome = run_in_thread(lambda: store.save(new, expect_version=1))
        wait_until(lambda: waiting_on_lock(mariadb_dsn, thread), "save() to block on the lock")
        kill(mariadb_dsn, [thread])
        worker.join(WAIT)
        blocker.rollback()
        (error,) = outcome
        assert isinstance(error, StoreError), f"expected StoreError, got {error!r}"
        assert not isinstance(error, ConcurrencyConflict), error
        assert isinstance(error.__cause__, pymysql.err.OperationalError), error.__cause__
        assert store.get("t-1") == snapshot("t-1", version=1), "the killed save wrote something"
        store.save(new, expect_version=1)  # the pool healed
        assert store.get("t-1") == new
        assert store.counts()[TaskStatus.RUNNING] == 1
    finally:
        blocker.close()
        store.close()


@checks("ERRORS-ARE-STOREERROR")
def test_claim_in_flight_during_a_kill_raises_storeerror(mariadb_dsn: str, database: str) -> None:
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database, max_size=1)
    blocker = connect(mariadb_dsn)
    try:
        store.submit_command(command("c-1"))
        (thread,) = store_threads(mariadb_dsn, database)
        with blocker.cursor() as cur:
            # A table lock: SKIP LOCKED skips locked rows, not a locked table.
            cur.execute(f"LOCK TABLES {mschema.quote_ident(database, 'commands')} WRITE")
        worker, outcome = run_in_thread(
            lambda: store.claim_commands(now=at(0), lease_seconds=30.0)
        )
        wait_until(lambda: waiting_on_lock(mariadb_dsn, thread), "claim to block on the lock")
        kill(mariadb_dsn, [thread])
        worker.join(WAIT)
        with blocker.cursor() as cur:
            cur.execute("UNLOCK TABLES")
        (error,) = outcome
        assert isinstance(error, StoreError), f"expected StoreError, got {error!r}"
        # Nothing was leased by the killed claim: the command is claimable at once.
        (taken,) = store.claim_commands(now=at(0), lease_seconds=30.0)
        assert taken.command_id == "c-1"
    finally:
        blocker.close()
        store.close()


@checks("CLOSE-RELEASES", "CLOSE-IDEMPOTENT", "CLOSE-THEN-STOREERROR")
def test_close_returns_every_connection_to_the_server(mariadb_dsn: str, database: str) -> None:
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database, max_size=3)
    other = mstore.MariaDBTaskStore(mariadb_dsn, database=database, max_size=1)
    fill_pool(store, 3)
    store.counts()
    other.counts()
    assert len(store_threads(mariadb_dsn, database)) == 4
    store.close()
    wait_until(lambda: len(store_threads(mariadb_dsn, database)) == 1, "3 connections to go")
    store.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        store.get("t-1")
    assert other.counts()[TaskStatus.PENDING] == 0, "closing one store closed another's"
    other.close()
    wait_until(lambda: not store_threads(mariadb_dsn, database), "the last connection to go")


# -- schema management and errors ----------------------------------------------------------------
def test_install_schema_is_idempotent_and_versioned(mariadb_dsn: str, database: str) -> None:
    assert mstore.install_schema(mariadb_dsn, database) == mstore.SCHEMA_VERSION
    conn = connect(mariadb_dsn)
    try:
        assert mstore.install_schema(conn, database) == mstore.SCHEMA_VERSION
    finally:
        conn.close()
    db = mschema.quote_ident(database)
    versions = rows(mariadb_dsn, f"SELECT version FROM {db}.schema_version")
    assert versions == [(mstore.SCHEMA_VERSION,)]
    counters = rows(mariadb_dsn, f"SELECT COUNT(*), SUM(n) FROM {db}.task_counts")
    assert counters == [(len(TaskStatus) * mschema.COUNTER_SLOTS, 0)]
    mstore.MariaDBTaskStore(mariadb_dsn, database=database).close()


def test_every_text_column_is_binary_and_no_pad(mariadb_dsn: str, database: str) -> None:
    found = rows(
        mariadb_dsn,
        "SELECT table_name, column_name, character_set_name, collation_name "
        "FROM information_schema.columns WHERE table_schema = %s AND collation_name IS NOT NULL "
        "AND table_name <> 'schema_version'",
        [database],
    )
    assert len(found) > 20
    wrong = [r for r in found if (r[2], r[3]) != ("utf8mb4", "utf8mb4_nopad_bin")]
    assert not wrong, wrong


def test_store_refuses_a_missing_or_newer_schema(mariadb_dsn: str, database: str) -> None:
    with pytest.raises(StoreError, match="install_schema"):
        mstore.MariaDBTaskStore(mariadb_dsn, database=f"missing_{uuid.uuid4().hex[:8]}")
    rows(
        mariadb_dsn,
        f"INSERT INTO {mschema.quote_ident(database, 'schema_version')} (version) VALUES (%s)",
        [mstore.SCHEMA_VERSION + 1],
    )
    with pytest.raises(StoreError, match="version"):
        mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    with pytest.raises(StoreError, match="newer"):
        mstore.install_schema(mariadb_dsn, database)


def test_database_name_is_an_identifier_not_sql(mariadb_dsn: str) -> None:
    """A hostile database name is quoted, not executed."""
    name = f"chongming it `{uuid.uuid4().hex[:8]}`; DROP TABLE x; --"
    mstore.install_schema(mariadb_dsn, name)
    try:
        store = mstore.MariaDBTaskStore(mariadb_dsn, database=name)
        try:
            store.create(snapshot("t-1", tags={"a"}))
            assert [t.task_id for t in store.query(TaskQuery(name="job", tag="a"))] == ["t-1"]
            assert store.prune(keep_terminal=0) == 0
        finally:
            store.close()
    finally:
        mstore.drop_schema(mariadb_dsn, name)


@pytest.mark.parametrize("name", ["", "x" * 65, "a\x00b", "trailing "])
def test_database_names_the_server_would_change_are_refused(name: str) -> None:
    with pytest.raises(StoreError, match="database name"):
        mschema.validate_database_name(name)


@checks("ERRORS-ARE-STOREERROR")
def test_unreachable_server_is_a_storeerror_with_the_reason() -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(StoreError, match=r"connecting to MariaDB.*Can't connect") as refused:
        mstore.MariaDBTaskStore(f"mysql://nobody:s3cr3t-pw@127.0.0.1:{port}/x")
    assert "s3cr3t-pw" not in str(refused.value)
    assert isinstance(refused.value.__cause__, pymysql.err.OperationalError)


def test_a_wrong_password_is_refused_without_showing_it(mariadb_dsn: str) -> None:
    params = mschema.parse_dsn(mariadb_dsn)
    dsn = f"mysql://nobody_{uuid.uuid4().hex[:6]}:hunter2-secret@{params.host}:{params.port}/x"
    with pytest.raises(StoreError, match="Access denied") as refused:
        mstore.MariaDBTaskStore(dsn)
    assert "hunter2-secret" not in str(refused.value)


@pytest.mark.parametrize(
    ("dsn", "message"),
    [
        ("postgresql://u:pw-x1@h/db", "scheme"),
        ("mysql://u:pw-x1@h:notaport/db", "invalid MariaDB DSN"),
        ("mysql://u:pw-x1@h/db?sslmode=require", "unknown parameter"),
    ],
)
def test_a_bad_dsn_is_refused_without_its_password(dsn: str, message: str) -> None:
    with pytest.raises(StoreError, match=message) as refused:
        mschema.parse_dsn(dsn)
    assert "pw-x1" not in str(refused.value)


def test_dsn_parts_are_decoded() -> None:
    params = mschema.parse_dsn("mariadb://a%40b:p%3Aw@db.example:3307/my%20db?connect_timeout=3")
    assert (params.user, params.password, params.host, params.port, params.database) == (
        "a@b", "p:w", "db.example", 3307, "my db"
    )
    assert params.connect_timeout == 3.0
    assert "p:w" not in repr(params)


def test_make_store_names_the_variable_when_it_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(mstore.DSN_ENV, raising=False)
    # closing(): were the variable ever not needed, the store would still be torn down here.
    with (
        contextlib.closing(mstore.make_store()) as gen,
        pytest.raises(StoreError, match=mstore.DSN_ENV),
    ):
        next(gen)
    with (
        contextlib.closing(mstore.make_shared_store()) as shared,
        pytest.raises(StoreError, match=mstore.DSN_ENV),
    ):
        next(shared)


def test_import_without_pymysql_says_how_to_install() -> None:
    code = (
        "import sys; sys.modules['pymysql'] = None\n"
        "try:\n    import reference_stores.mariadb\n"
        "except ImportError as e:\n    print(e)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert 'pip install "chongming-conformance[mariadb]"' in out, out


# -- exact text and UTC --------------------------------------------------------------------------
@checks("QUERY-TAG-EXACT", "QUERY-NAME-EXACT", "SNAPSHOT-FULL-ROUNDTRIP")
def test_keys_hold_255_four_byte_characters(mariadb_dsn: str, database: str) -> None:
    longest = "𝔘" * mschema.MAX_KEY_CHARS  # 4 bytes each in utf8mb4
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    try:
        task = snapshot(longest, name=longest * 4, tags={longest, longest[:-1] + "x"},
                        pipeline_run_id=longest, bucket=3)
        store.create(task)
        assert store.get(longest) == task
        assert store.query(TaskQuery(tag=longest, pipeline_run_id=longest)) == [task]
        assert store.query(TaskQuery(name_prefix=longest * 2, buckets=frozenset({3}))) == [task]
        store.submit_command(command(longest, longest))
        store.append(transition(longest, 1))
        assert [c.command_id for c in store.claim_commands(now=at(0), lease_seconds=1)] == [longest]
        assert [t.task_id for t in store.history(longest)] == [longest]
        # One character more is refused, not truncated into another id.
        with pytest.raises(StoreError):
            store.create(snapshot(longest + "𝔘"))
        with pytest.raises(StoreError):
            store.create(snapshot("t-2", tags={longest + "𝔘"}))
        assert store.get("t-2") is None, "a refused create left a task behind"
        assert sum(store.counts().values()) == 1
    finally:
        store.close()


@checks("ERRORS-ARE-STOREERROR")
def test_values_mariadb_cannot_hold_are_storeerrors(mariadb_dsn: str, database: str) -> None:
    """Outside the kit's domain, still never a raw driver or codec error, nor a truncation."""
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    try:
        with pytest.raises(StoreError, match="not storable"):
            store.create(snapshot("lone-\ud800"))  # not encodable as UTF-8
        with pytest.raises(StoreError) as too_big:
            store.create(snapshot("t-1", bucket=2**63))  # beyond BIGINT
        assert isinstance(too_big.value.__cause__, pymysql.Error), too_big.value.__cause__
        assert store.query() == [] and set(store.counts().values()) == {0}
        store.create(snapshot("t-1"))  # and the connection is still good
        assert store.get("t-1") == snapshot("t-1")
    finally:
        store.close()


@checks("QUERY-TAG-EXACT")
def test_every_c0_control_in_a_tag_matches_exactly(mariadb_dsn: str, database: str) -> None:
    """JSON_CONTAINS missed tags with some C0 controls; task_tags compares the values."""
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    controls = [c for c in C0_CONTROLS if c != "\x00"]
    try:
        for n, control in enumerate(controls):
            store.create(snapshot(f"t-{n:02d}", created=n, tags={f"a{control}b", f"a{control}"}))
        for n, control in enumerate(controls):
            assert [t.task_id for t in store.query(TaskQuery(tag=f"a{control}b"))] == [f"t-{n:02d}"]
        assert store.query(TaskQuery(tag="ab")) == []
    finally:
        store.close()


@checks("QUERY-NAME-EXACT", "CREATE-DUPLICATE-RAISES")
def test_trailing_spaces_and_case_are_distinct_keys(mariadb_dsn: str, database: str) -> None:
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    try:
        for n, task_id in enumerate(("build", "build ", "Build", "straße", "STRASSE")):
            store.create(snapshot(task_id, name=task_id, created=n, tags={task_id}))
        assert len(store.query()) == 5
        assert [t.task_id for t in store.query(TaskQuery(name="build"))] == ["build"]
        assert [t.task_id for t in store.query(TaskQuery(tag="build "))] == ["build "]
        assert [t.task_id for t in store.query(TaskQuery(name_prefix="build "))] == ["build "]
        with pytest.raises(StoreError, match="already exists"):
            store.create(snapshot("build "))
    finally:
        store.close()


@checks("TIME-UTC-ROUNDTRIP")
def test_datetimes_are_stored_as_utc(mariadb_dsn: str, database: str) -> None:
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    kathmandu = timezone(timedelta(hours=5, minutes=45))
    try:
        created = at(1.000001, kathmandu)
        store.create(snapshot("t-1").evolve(created_at=created))
        stored = rows(
            mariadb_dsn,
            f"SELECT DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f') "
            f"FROM {mschema.quote_ident(database, 'tasks')}",
        )
        assert stored == [(created.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f"),)]
        got = store.get("t-1")
        assert got is not None and got.created_at == created and got.created_at.tzinfo is UTC
    finally:
        store.close()


# -- EXPLAIN: the filters run on indexes, in order ------------------------------------------------
@pytest.fixture
def populated(mariadb_dsn: str, database: str) -> str:
    """5000 tasks over 100 buckets (every 500th tagged 'rare'), 5000 commands, 2% unfinished.

    Loaded through the store, so task_tags and the counters are kept.
    """
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    conn = connect(mariadb_dsn)
    try:
        tasks = mschema.quote_ident(database, "tasks")
        with conn.cursor() as cur:
            cur.execute(
                f"INSERT INTO {tasks} (task_id, name, status, status_version, created_at, "
                "updated_at, tags, bucket) SELECT CONCAT('t-', seq), CONCAT('job-', seq % 10), "
                "'pending', 1, TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq SECOND, "
                "TIMESTAMP'2026-01-01 00:00:00', IF(seq % 500 = 0, '[\"rare\"]', '[\"common\"]'), "
                f"seq % 100 FROM {mschema.quote_ident(database)}.seq_1_to_5000"
            )
            cur.execute(
                f"INSERT INTO {mschema.quote_ident(database, 'commands')} (command_id, task_id, "
                "kind, issued_by, created_at, finished_at) SELECT CONCAT('c-', seq), "
                "CONCAT('t-', seq), 'stop', 'bench', TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq "
                "SECOND, IF(seq % 50 = 0, NULL, TIMESTAMP'2026-01-02 00:00:00') "
                f"FROM {mschema.quote_ident(database)}.seq_1_to_5000"
            )
            for table in ("tasks", "commands"):
                cur.execute(f"ANALYZE TABLE {mschema.quote_ident(database, table)}")
                cur.fetchall()
        mschema.rebuild_derived(mariadb_dsn, database)
        with conn.cursor() as cur:
            cur.execute(f"ANALYZE TABLE {mschema.quote_ident(database, 'task_tags')}")
            cur.fetchall()
    finally:
        conn.close()
        store.close()
    return database


def _plan(dsn: str, statement: str, params: Any) -> Any:
    conn = connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("EXPLAIN FORMAT=JSON " + statement, params)
            return json.loads(cur.fetchone()[0])
    finally:
        conn.close()


def _walk(plan: Any, key: str) -> list[Any]:
    found: list[Any] = []
    if isinstance(plan, dict):
        for k, v in plan.items():
            if k == key:
                found.append(v)
            found.extend(_walk(v, key))
    elif isinstance(plan, list):
        for v in plan:
            found.extend(_walk(v, key))
    return found


def _indexes(plan: Any) -> set[str]:
    return set(_walk(plan, "key"))


def _sorts(plan: Any) -> bool:
    return bool(_walk(plan, "filesort"))


def _query_plan(dsn: str, database: str, q: TaskQuery) -> Any:
    built = mstore.query_statement(database, q)
    assert built is not None
    return _plan(dsn, *built)


@checks("QUERY-PUSHDOWN", "QUERY-ORDER-CREATED")
def test_explain_one_bucket_with_limit_reads_the_bucket_index_in_order(
    mariadb_dsn: str, populated: str
) -> None:
    for newest_first in (False, True):
        plan = _query_plan(
            mariadb_dsn, populated,
            TaskQuery(buckets=frozenset({3}), limit=5, newest_first=newest_first),
        )
        assert _indexes(plan) == {"tasks_bucket"}, plan
        assert not _sorts(plan), plan


@checks("QUERY-PUSHDOWN", "QUERY-ORDER-CREATED")
def test_explain_bucket_status_query_uses_the_status_index_in_order(
    mariadb_dsn: str, populated: str
) -> None:
    query = TaskQuery(buckets=frozenset({3}), statuses=frozenset({TaskStatus.RUNNING}))
    plan = _query_plan(mariadb_dsn, populated, query)
    assert _indexes(plan) == {"tasks_status"}, plan
    assert not _sorts(plan), plan


@checks("QUERY-PUSHDOWN")
def test_explain_several_buckets_and_pipeline_use_their_indexes(
    mariadb_dsn: str, populated: str
) -> None:
    plan = _query_plan(mariadb_dsn, populated, TaskQuery(buckets=frozenset({3, 7})))
    assert "tasks_bucket" in _indexes(plan), plan
    plan = _query_plan(mariadb_dsn, populated, TaskQuery(pipeline_run_id="p-1"))
    assert _indexes(plan) == {"tasks_pipeline"}, plan


@checks("QUERY-PUSHDOWN", "QUERY-TAG-EXACT")
def test_explain_tag_query_walks_the_tag_index_in_order(mariadb_dsn: str, populated: str) -> None:
    for newest_first in (False, True):
        plan = _query_plan(
            mariadb_dsn, populated, TaskQuery(tag="common", limit=50, newest_first=newest_first)
        )
        assert "task_tags_tag" in _indexes(plan), plan
        assert not _sorts(plan), plan


@checks("QUERY-PUSHDOWN")
def test_explain_claim_walks_the_claim_index_in_order(mariadb_dsn: str, populated: str) -> None:
    statement = mstore.claim_statement(populated)
    now = at(0).astimezone(UTC).replace(tzinfo=None)
    plan = _plan(mariadb_dsn, statement, {"now": now, "limit": 10})
    assert _indexes(plan) == {"commands_claim"}, plan
    assert not _sorts(plan), plan


def _access(plan: Any) -> list[tuple[str, str | None]]:
    """(access_type, key) of every table a plan reads."""
    return [(t.get("access_type"), t.get("key")) for t in _walk(plan, "table")]


def test_a_delete_with_a_long_id_list_scans_and_the_store_names_one_key(
    mariadb_dsn: str, database: str
) -> None:
    """Why prune deletes one key per statement and the claim forces the primary key.

    A quarter of a 100-task table as an IN list is planned as a table scan, and a
    scanning DELETE waits for the lock of every row it reads (two prunes
    deadlocked that way in the 8-writer test below before this was fixed).
    """
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    try:
        for i in range(100):
            store.create(snapshot(f"t{i:03d}", status=TaskStatus.SUCCEEDED, created=i,
                                  tags={"a", "b"}))
            store.append(transition(f"t{i:03d}", 1))
            store.submit_command(command(f"c{i:03d}", f"t{i:03d}", created=i))
        conn = connect(mariadb_dsn)
        with conn.cursor() as cur:
            cur.execute(f"ANALYZE TABLE {mschema.quote_ident(database, 'tasks')}, "
                        f"{mschema.quote_ident(database, 'commands')}")
            cur.fetchall()
        conn.close()
        quarter = [f"t{i:03d}" for i in range(0, 100, 4)]
        tasks = mschema.quote_ident(database, "tasks")
        naive = _plan(mariadb_dsn, f"DELETE FROM {tasks} WHERE task_id IN "
                      f"({', '.join(['%s'] * len(quarter))})", quarter)
        assert _access(naive) == [("ALL", None)], naive  # the trap, on this server
        for statement, key in (
            (store._sql_delete_task, "t000"), (store._sql_tags_delete, "t000"),
            (store._sql_delete_history, "t000"), (store._sql_delete_command, "c000"),
        ):
            plan = _plan(mariadb_dsn, statement, [key])
            assert [k for _, k in _access(plan)] == ["PRIMARY"], (statement, plan)
        commands = [f"c{i:03d}" for i in range(0, 100, 4)]
        later = at(60).astimezone(UTC).replace(tzinfo=None)
        plan = _plan(mariadb_dsn, mstore.claim_update_statement(database, len(commands)),
                     [later, *commands])
        assert _access(plan) == [("range", "PRIMARY")], plan
    finally:
        store.close()


@checks("QUERY-PUSHDOWN", "COUNTS-AGGREGATED")
def test_store_query_agrees_with_the_explained_statements(mariadb_dsn: str, populated: str) -> None:
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=populated)
    try:
        found = store.query(TaskQuery(buckets=frozenset({0, 7}), tag="rare"))
        assert [t.task_id for t in found] == [f"t-{g}" for g in range(500, 5001, 500)]
        in_buckets = store.query(TaskQuery(buckets=frozenset({3, 7})))
        assert [t.task_id for t in in_buckets] == [
            f"t-{g}" for g in range(1, 5001) if g % 100 in (3, 7)
        ]
        rare = store.query(TaskQuery(tag="rare", newest_first=True, limit=3))
        assert [t.task_id for t in rare] == ["t-5000", "t-4500", "t-4000"]
        assert store.counts()[TaskStatus.PENDING] == 5000  # rebuild_derived counted them
        claimed = store.claim_commands(now=at(0), lease_seconds=30, limit=200)
        assert [c.command_id for c in claimed] == [f"c-{g}" for g in range(50, 5001, 50)]
    finally:
        store.close()


# -- counters ------------------------------------------------------------------------------------
@checks("COUNTS-PER-STATUS")
def test_counters_equal_a_recount_after_churn(mariadb_dsn: str, database: str) -> None:
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    try:
        assert churn_and_check(store) == 17
    finally:
        store.close()


@checks("COUNTS-PER-STATUS")
def test_eight_threads_writing_keep_the_counters_exact(mariadb_dsn: str, database: str) -> None:
    """8 threads create, save (changing status) and prune at once; counts() == a recount."""
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database, max_size=8)
    statuses = list(TaskStatus)
    go = threading.Barrier(WRITERS)

    def writer(w: int) -> None:
        rng = random.Random(w)
        go.wait()
        versions: dict[str, int] = {}
        for step in range(50):
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

    try:
        with ThreadPoolExecutor(WRITERS) as pool:
            list(pool.map(writer, range(WRITERS)))
        counts = dict(store.counts())
        assert counts == recount(store)
        assert sum(counts.values()) > 0
        slots = rows(
            mariadb_dsn,
            f"SELECT COUNT(DISTINCT slot) FROM {mschema.quote_ident(database, 'task_counts')} "
            "WHERE n <> 0",
        )
        assert slots[0][0] > 1, "all writers hit one counter slot"
        assert store.deadlock_retries == 0
    finally:
        store.close()


def test_reset_store_empties_every_table_and_the_counters(mariadb_dsn: str, database: str) -> None:
    store = mstore.MariaDBTaskStore(mariadb_dsn, database=database)
    try:
        store.create(snapshot("t1", status=TaskStatus.RUNNING, tags={"a", "b"}))
        store.create(snapshot("t2", status=TaskStatus.SUCCEEDED, created=1))
        store.save(snapshot("t1", status=TaskStatus.FAILED, version=2), expect_version=1)
        store.append(transition("t1", 1))
        store.submit_command(command("c1", "t1"))
        assert store.claim_commands(now=at(5), lease_seconds=30, limit=1)
        assert sum(store.counts().values()) == 2
        mstore.reset_store(store)
        for table in ("tasks", "task_tags", "transitions", "commands"):
            assert rows(
                mariadb_dsn, f"SELECT COUNT(*) FROM {mschema.quote_ident(database, table)}"
            ) == [(0,)], table
        assert set(store.counts().values()) == {0}
        assert store.claim_commands(now=at(10_000), lease_seconds=30, limit=100) == []
        store.create(snapshot("t1", tags={"a"}))  # the store works after a reset
        assert store.query(TaskQuery(tag="a")) == [snapshot("t1", tags={"a"})]
        assert store.counts()[TaskStatus.PENDING] == 1
    finally:
        store.close()
    with pytest.raises(StoreError, match="MariaDBTaskStore"):
        mstore.reset_store(object())  # type: ignore[arg-type]


def test_make_store_drops_its_database(mariadb_dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(mstore.DSN_ENV, mariadb_dsn)
    gen = mstore.make_store()
    store = next(gen)
    used = store.database
    try:
        assert store.query() == [] and set(store.counts().values()) == {0}
    finally:
        store.close()
        gen.close()
    found = rows(
        mariadb_dsn, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = %s",
        [used],
    )
    assert found == [(0,)]
