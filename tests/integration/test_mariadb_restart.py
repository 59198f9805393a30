"""The MariaDB store survives its connections being killed mid-run: nothing lost or doubled.

What a server restart does to a client is end every connection at once: in-flight
statements fail, idle pooled connections are dead. Other suites share this
server, so the restart is simulated exactly that way on this test's own
connections only (the store's connections are the ones whose default database
is this test's database; ``KILL CONNECTION`` ends all of them, several times,
while workers create, save, claim and complete). Afterwards, in the same
process, with the same store objects:

* every write the store acknowledged before a kill is there (creates, saves,
  completions); a call that raised ``StoreError`` may or may not have happened
  -- the contract's "unknown" -- and is only required to leave a consistent state;
* no command is doubly held, and no acknowledged holder's lease was lost;
* no command is lost: once every lease has expired, each command not completed
  is claimable again;
* the counters agree with the rows;
* every store's pool healed: a call through it succeeds on new connections.

The kills are triggered by the workers' progress, never by a clock, and every
wait is a generous bound that fails (never skips) the test.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

# Skips this module (or fails, under CHONGMING_REQUIRE_MARIADB) without PyMySQL.
from mariadb_driver import mschema, mstore, pymysql

from chongming_conformance import ConcurrencyConflict, StoreError, TaskQuery, TaskStatus
from chongming_conformance.strategies.samples import at, command, snapshot

pytestmark = pytest.mark.mariadb

WORKERS = 3
TASKS_PER_WORKER = 30
COMMANDS = 60
KILLS = 4
LEASE = 3600.0
WAIT = 120.0  # bound on any wait; never a speed target


def _wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {WAIT:g} s waiting for {what}")
        time.sleep(0.02)


def _connections(admin: Any, database: str) -> set[int]:
    with admin.cursor() as cur:
        cur.execute("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = %s", [database])
        return {int(r[0]) for r in cur.fetchall()}


def _restart(admin: Any, database: str) -> set[int]:
    """KILL every connection of the run (what a restart does to it); wait until gone."""
    threads = _connections(admin, database)
    with admin.cursor() as cur:
        for thread in threads:
            with contextlib.suppress(pymysql.err.OperationalError):  # it just ended
                cur.execute(f"KILL CONNECTION {int(thread)}")
    _wait_until(lambda: not _connections(admin, database) & threads,
                f"connections {sorted(threads)} to end")
    return threads


@dataclass
class Ledger:
    """What one worker was told: acknowledged effects, and calls whose outcome is unknown."""

    created: set[str] = field(default_factory=set)
    saved: set[str] = field(default_factory=set)
    claimed: list[str] = field(default_factory=list)
    completed: set[str] = field(default_factory=set)
    unknown_completed: set[str] = field(default_factory=set)
    errors: int = 0


def _work(store: mstore.MariaDBTaskStore, worker: int, ledger: Ledger,
          progress: Callable[[], None]) -> None:
    for i in range(TASKS_PER_WORKER):
        task_id = f"t-{worker}-{i}"
        for _ in range(50):
            try:
                store.create(snapshot(task_id, version=1, tags={f"w{worker}"}))
                ledger.created.add(task_id)
                break
            except StoreError as exc:
                ledger.errors += 1
                if "already exists" in str(exc):
                    # An earlier attempt committed but its answer was lost: now it is known.
                    ledger.created.add(task_id)
                    break
        if task_id in ledger.created:
            try:
                store.save(snapshot(task_id, version=2, status=TaskStatus.RUNNING,
                                    tags={f"w{worker}"}), expect_version=1)
                ledger.saved.add(task_id)
            except ConcurrencyConflict:
                pytest.fail(f"{task_id}: a conflict on the first save; nobody else wrote it")
            except StoreError:
                ledger.errors += 1
        try:
            taken = store.claim_commands(now=at(0), lease_seconds=LEASE, limit=2)
        except StoreError:
            ledger.errors += 1
            taken = []
        ledger.claimed.extend(c.command_id for c in taken)
        for c in taken[:1]:
            try:
                store.complete_command(c.command_id, now=at(1), outcome="done")
                ledger.completed.add(c.command_id)
            except StoreError:
                ledger.errors += 1
                ledger.unknown_completed.add(c.command_id)
        progress()


@pytest.fixture
def database(mariadb_dsn: str) -> Iterator[str]:
    name = f"chongming_rs_{uuid.uuid4().hex[:16]}"
    mstore.install_schema(mariadb_dsn, name)
    try:
        yield name
    finally:
        mstore.drop_schema(mariadb_dsn, name)


def test_every_connection_killed_mid_run_loses_and_doubles_nothing(
    mariadb_dsn: str, database: str
) -> None:
    stores = [mstore.MariaDBTaskStore(mariadb_dsn, database=database, max_size=2)
              for _ in range(WORKERS + 1)]
    checker, workers = stores[0], stores[1:]
    ledgers = [Ledger() for _ in workers]
    failures: list[BaseException] = []
    steps = Counter[str]()
    lock = threading.Lock()

    def progress() -> None:
        with lock:
            steps["done"] += 1

    def run(index: int) -> None:
        try:
            _work(workers[index], index, ledgers[index], progress)
        except BaseException as exc:  # re-raised in the test's thread below
            failures.append(exc)

    admin = mschema.parse_dsn(mariadb_dsn).connect()  # no default database: not one of them
    try:
        for i in range(COMMANDS):
            checker.submit_command(command(f"c-{i}", task_id=f"owner-{i}"))
        for store in workers:
            store.counts()  # every pool holds a connection before the first kill
        _wait_until(lambda: len(_connections(admin, database)) >= len(stores),
                    "every store to connect")
        threads = [threading.Thread(target=run, args=(i,)) for i in range(WORKERS)]
        for t in threads:
            t.start()
        killed: set[int] = set()
        total = WORKERS * TASKS_PER_WORKER
        for k in range(KILLS):
            # Kill at evenly spaced points of the run, judged by progress alone.
            target = (k + 1) * total // (KILLS + 1)

            def reached(target: int = target) -> bool:
                stopped = bool(failures) or not any(t.is_alive() for t in threads)
                return steps["done"] >= target or stopped

            _wait_until(reached, f"the workers to reach step {target}")
            killed |= _restart(admin, database)
        for t in threads:
            t.join(WAIT)
        assert not any(t.is_alive() for t in threads), "a worker hung after the restarts"
        if failures:
            raise failures[0]
        assert len(killed) >= KILLS, f"the restarts killed only {sorted(killed)}"

        # The pools heal in this process: every store answers, on new connections.
        for store in stores:
            assert store.get("no-such-task") is None
        assert not _connections(admin, database) & killed

        created = set().union(*(led.created for led in ledgers))
        saved = set().union(*(led.saved for led in ledgers))
        for task_id in sorted(created):
            found = checker.get(task_id)
            assert found is not None, f"acknowledged create of {task_id} is missing"
            if task_id in saved:
                worker = task_id.split("-")[1]
                assert found == snapshot(task_id, version=2, status=TaskStatus.RUNNING,
                                         tags={f"w{worker}"}), (
                    f"acknowledged save of {task_id} is missing: {found}"
                )
        tasks = checker.query(TaskQuery())
        counted = checker.counts()
        assert sum(counted.values()) == len(tasks)
        for status in TaskStatus:
            assert counted[status] == sum(1 for t in tasks if t.status is status), status
        for w in range(WORKERS):  # task_tags kept in step with the tasks
            mine = {t.task_id for t in tasks if t.task_id.startswith(f"t-{w}-")}
            assert {t.task_id for t in checker.query(TaskQuery(tag=f"w{w}"))} == mine

        claimed = [cid for led in ledgers for cid in led.claimed]
        doubled = [cid for cid, n in Counter(claimed).items() if n > 1]
        assert not doubled, f"commands held by two acknowledged claims at once: {doubled}"
        completed = set().union(*(led.completed for led in ledgers))
        maybe_completed = set().union(*(led.unknown_completed for led in ledgers))
        # While the leases run, no acknowledged holder lost its command.
        free_now = {c.command_id for c in
                    checker.claim_commands(now=at(2), lease_seconds=LEASE, limit=COMMANDS * 2)}
        assert not free_now & set(claimed), sorted(free_now & set(claimed))
        # Once every lease expired, every command not completed is claimable: none lost.
        later = {c.command_id for c in checker.claim_commands(
            now=at(10 * LEASE), lease_seconds=LEASE, limit=COMMANDS * 2)}
        everything = {f"c-{i}" for i in range(COMMANDS)}
        assert not later & completed, f"completed commands came back: {sorted(later & completed)}"
        lost = everything - completed - maybe_completed - later
        assert not lost, f"commands neither completed nor claimable: {sorted(lost)}"
    finally:
        admin.close()
        for store in stores:
            store.close()
