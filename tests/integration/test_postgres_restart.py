"""The Postgres reference store survives a server restart mid-run: nothing lost, nothing doubled.

What a restart does to a client is kill every backend at once: in-flight
statements fail, idle pooled connections are dead. Other suites share this
server, so the restart is simulated exactly that way on this test's own
backends only (every connection of the run carries one ``application_name``;
``pg_terminate_backend`` ends all of them, several times, while workers write,
claim and complete). Afterwards, in the same process, with the same store
objects:

* every write the store acknowledged before a kill is there (creates, saves,
  completions); a call that raised ``StoreError`` may or may not have happened
  -- the contract's "unknown" -- and is only required to leave a consistent state;
* no command is doubly held: no two acknowledged claims of one command while
  the lease runs, and no acknowledged holder's lease was lost (the command is
  not claimable before the lease expires);
* no command is lost: once every lease has expired, each command not
  completed is claimable again;
* the counters agree with the rows;
* each store's pool healed: a call through it succeeds on new backends.

The kills are triggered by the workers' progress, never by a clock, and every
wait is a generous bound that fails (never skips) the test.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest

from chongming_conformance import ConcurrencyConflict, StoreError, TaskQuery, TaskStatus
from chongming_conformance.strategies.samples import at, command, snapshot

try:
    import psycopg
    from psycopg.conninfo import make_conninfo

    from reference_stores import postgres as pgstore
except ImportError as exc:  # the driver is an optional extra
    if os.environ.get("CHONGMING_REQUIRE_POSTGRES", "").strip() not in ("", "0"):
        raise
    pytest.skip(
        f'psycopg is not installed ({exc}): pip install "chongming-conformance[postgres]"',
        allow_module_level=True,
    )

pytestmark = pytest.mark.postgres

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


def _backends(admin: psycopg.Connection[tuple[int]], app: str) -> set[int]:
    rows = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE application_name = %s", [app]
    ).fetchall()
    return {int(r[0]) for r in rows}


def _restart(admin: psycopg.Connection[tuple[int]], app: str) -> set[int]:
    """Terminate every backend of the run (what a restart does to it); wait until gone."""
    pids = _backends(admin, app)
    for pid in pids:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    _wait_until(
        lambda: not admin.execute(
            "SELECT 1 FROM pg_stat_activity WHERE pid = ANY(%s)", [list(pids)]
        ).fetchall(),
        f"backends {sorted(pids)} to exit",
    )
    return pids


@dataclass
class Ledger:
    """What one worker was told: acknowledged effects, and calls whose outcome is unknown."""

    created: set[str] = field(default_factory=set)
    saved: set[str] = field(default_factory=set)
    claimed: list[str] = field(default_factory=list)
    completed: set[str] = field(default_factory=set)
    unknown_completed: set[str] = field(default_factory=set)
    errors: int = 0


def _work(store: pgstore.PostgresTaskStore, worker: int, ledger: Ledger,
          progress: Callable[[], None]) -> None:
    for i in range(TASKS_PER_WORKER):
        task_id = f"t-{worker}-{i}"
        for _ in range(50):
            try:
                store.create(snapshot(task_id, version=1))
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
                store.save(snapshot(task_id, version=2, status=TaskStatus.RUNNING),
                           expect_version=1)
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
def schema(postgres_dsn: str) -> Iterator[str]:
    name = f"chongming_rs_{uuid.uuid4().hex[:16]}"
    pgstore.install_schema(postgres_dsn, name)
    try:
        yield name
    finally:
        pgstore.drop_schema(postgres_dsn, name)


def test_every_backend_killed_mid_run_loses_and_doubles_nothing(
    postgres_dsn: str, schema: str
) -> None:
    app = f"chongming-restart-{uuid.uuid4().hex[:8]}"
    dsn = make_conninfo(postgres_dsn, application_name=app)
    stores = [pgstore.PostgresTaskStore(dsn, schema=schema, min_size=1, max_size=2)
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

    try:
        for i in range(COMMANDS):
            checker.submit_command(command(f"c-{i}", task_id=f"owner-{i}"))
        with psycopg.connect(postgres_dsn, autocommit=True) as admin:
            _wait_until(lambda: len(_backends(admin, app)) >= len(stores), "the pools to fill")
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
                killed |= _restart(admin, app)
            for t in threads:
                t.join(WAIT)
            assert not any(t.is_alive() for t in threads), "a worker hung after the restarts"
            if failures:
                raise failures[0]
            assert len(killed) >= KILLS, f"the restarts killed only {sorted(killed)}"

            # The pools heal in this process: every store answers, on new backends.
            for store in stores:
                assert store.get("no-such-task") is None
            assert not _backends(admin, app) & killed

        created = set().union(*(led.created for led in ledgers))
        saved = set().union(*(led.saved for led in ledgers))
        for task_id in sorted(created):
            found = checker.get(task_id)
            assert found is not None, f"acknowledged create of {task_id} is missing"
            if task_id in saved:
                assert found == snapshot(task_id, version=2, status=TaskStatus.RUNNING), (
                    f"acknowledged save of {task_id} is missing: {found}"
                )
        tasks = checker.query(TaskQuery())
        counted = checker.counts()
        assert sum(counted.values()) == len(tasks)
        for status in TaskStatus:
            assert counted[status] == sum(1 for t in tasks if t.status is status), status

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
        for store in stores:
            store.close()
