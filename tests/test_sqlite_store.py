"""SqliteTaskStore: the full contract (file and :memory:) plus what the contract cannot see.

The contract only sees behaviour through one connection. The review-scope
clauses (filters pushed down, counts aggregated, close releases the file) and
the cross-process promises are proved here against the real SQLite engine:
``EXPLAIN QUERY PLAN`` on the exact statements the store issues, the
connection object and the process's open file descriptors after ``close()``,
and spawned processes racing on one file.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import random
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from counts_churn import churn_and_check, recount

from chongming_conformance import (
    ConcurrencyConflict,
    StoreError,
    TaskQuery,
    TaskStatus,
)
from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.protocol.clauses import checks
from chongming_conformance.protocol.codec import (
    COMMAND_COLUMNS,
    LEASE_COLUMNS,
    SAVE_COLUMNS,
    SNAPSHOT_COLUMNS,
    TRANSITION_COLUMNS,
)
from chongming_conformance.strategies.samples import at, command, snapshot, transition
from reference_stores import sqlite as sqlite_store
from reference_stores.sqlite import SqliteTaskStore


class TestSqliteFileContract(StoreContract):
    def make_store(self) -> Any:
        return sqlite_store.make_store()


class TestSqliteMemoryContract(StoreContract):
    def make_store(self) -> Any:
        return sqlite_store.make_memory_store()


# -- helpers ----------------------------------------------------------------------------
@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "tasks.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[SqliteTaskStore]:
    opened = SqliteTaskStore(db_path)
    yield opened
    opened.close()


def _conn(store: SqliteTaskStore) -> sqlite3.Connection:
    conn = store._conn
    assert conn is not None, "store is closed"
    return conn


@contextlib.contextmanager
def _statements(store: SqliteTaskStore) -> Iterator[list[str]]:
    """Record the SQL the store really executes (parameters expanded by SQLite)."""
    seen: list[str] = []
    conn = _conn(store)
    conn.set_trace_callback(seen.append)
    try:
        yield seen
    finally:
        conn.set_trace_callback(None)


def _plan(store: SqliteTaskStore, sql: str) -> str:
    """The EXPLAIN QUERY PLAN of ``sql`` as one text, one node per line."""
    rows = _conn(store).execute("EXPLAIN QUERY PLAN " + sql).fetchall()
    return "\n".join(str(r["detail"]) for r in rows)


def _only(statements: list[str], startswith: str) -> str:
    found = [s for s in statements if s.lstrip().upper().startswith(startswith)]
    assert len(found) == 1, f"expected one {startswith} statement, got {statements}"
    return found[0]


def _fill(store: SqliteTaskStore, n: int = 40) -> None:
    for i in range(n):
        store.create(
            snapshot(
                f"t{i:03}",
                created=i,
                bucket=i % 8,
                pipeline_run_id=f"p{i % 4}",
                status=TaskStatus.SUCCEEDED if i % 3 == 0 else TaskStatus.RUNNING,
            )
        )
        store.submit_command(command(f"c{i:03}", f"t{i:03}", created=i))


# -- schema and statements ---------------------------------------------------------------
@checks("SNAPSHOT-FULL-ROUNDTRIP", "TRANSITION-ROUNDTRIP", "COMMAND-ROUNDTRIP")
def test_tables_have_exactly_the_codec_columns(store: SqliteTaskStore) -> None:
    # Rows go through the codec unchanged, so the schema must match it column for column.
    for table, expected in (
        ("tasks", SNAPSHOT_COLUMNS),
        ("transitions", TRANSITION_COLUMNS),
        ("commands", COMMAND_COLUMNS),
    ):
        names = tuple(r["name"] for r in _conn(store).execute(f"PRAGMA table_info({table})"))
        assert names == expected, f"{table}: {names} != {expected}"


@checks("SAVE-KEEPS-LEASE", "SAVE-CAS")
def test_save_is_one_conditional_update_without_lease_columns(store: SqliteTaskStore) -> None:
    store.create(snapshot("t1", version=1))
    with _statements(store) as seen:
        store.save(snapshot("t1", version=2), expect_version=1)
    writes = [s for s in seen if s.lstrip().upper().startswith(("UPDATE", "INSERT", "DELETE"))]
    assert len(writes) == 1, f"save must be one statement, executed {writes}"
    update = writes[0]
    assert "WHERE task_id = 't1' AND status_version = 1" in update
    assigned = update.split(" SET ", 1)[1].split(" WHERE ", 1)[0]
    for column in SAVE_COLUMNS:
        if column != "task_id":
            assert f"{column} = " in assigned, f"save does not write {column}"
    for column in LEASE_COLUMNS:
        assert column not in assigned, f"save writes lease column {column}: {update}"
    assert _conn(store).execute("PRAGMA journal_mode").fetchone()["journal_mode"] == "wal"


# -- pushdown: the plans of the statements the store really runs ------------------------
@checks("QUERY-PUSHDOWN")
def test_bucket_query_searches_the_bucket_index(store: SqliteTaskStore) -> None:
    _fill(store)
    with _statements(store) as seen:
        found = store.query(TaskQuery(buckets=frozenset({1, 2}), limit=3))
    assert [t.task_id for t in found] == ["t001", "t002", "t009"]
    plan = _plan(store, _only(seen, "SELECT"))
    assert "USING INDEX tasks_bucket (bucket=?)" in plan, plan
    assert "SCAN tasks" not in plan, plan


@checks("QUERY-PUSHDOWN")
def test_other_filters_are_in_the_sql(store: SqliteTaskStore) -> None:
    _fill(store)
    with _statements(store) as seen:
        store.query(TaskQuery(pipeline_run_id="p1"))
        store.query(TaskQuery(statuses=frozenset({TaskStatus.SUCCEEDED})))
        store.query(TaskQuery(name_prefix="j%_", tag="io", name="job", limit=2))
    pipeline, statuses, rest = seen
    assert "USING INDEX tasks_pipeline (pipeline_run_id=?)" in _plan(store, pipeline)
    assert "USING INDEX tasks_status (status=?)" in _plan(store, statuses)
    # Filters without an index still run in SQLite, with the values as parameters.
    assert "json_each(tasks.tags) WHERE value = 'io'" in rest
    assert "name = 'job'" in rest and "LIMIT 2" in rest
    assert "LIKE" not in rest.upper()


@checks("QUERY-PUSHDOWN", "QUERY-ORDER-CREATED")
def test_unfiltered_query_reads_in_index_order_without_sorting(store: SqliteTaskStore) -> None:
    _fill(store)
    for newest_first in (False, True):
        with _statements(store) as seen:
            store.query(TaskQuery(newest_first=newest_first, limit=5))
        plan = _plan(store, _only(seen, "SELECT"))
        assert "tasks_created" in plan, plan
        assert "TEMP B-TREE" not in plan, plan


@checks("CLAIM-ORDER", "CLAIM-LIMIT")
def test_claim_subselect_searches_the_partial_open_commands_index(
    store: SqliteTaskStore,
) -> None:
    _fill(store)
    store.complete_command("c000", now=at(0))
    with _statements(store) as seen:
        claimed = store.claim_commands(now=at(100), lease_seconds=30, limit=3)
    assert [c.command_id for c in claimed] == ["c001", "c002", "c003"]
    assert "BEGIN IMMEDIATE" in seen and "COMMIT" in seen
    plan = _plan(store, _only(seen, "UPDATE"))
    assert "commands_open" in plan, plan
    partial = {r["name"]: r["partial"] for r in _conn(store).execute("PRAGMA index_list(commands)")}
    assert partial["commands_open"] == 1, "the open-commands index must be partial"
    assert "TEMP B-TREE" not in plan, plan  # the index already is in claim order


@checks("COUNTS-AGGREGATED")
def test_counts_is_one_group_by(store: SqliteTaskStore) -> None:
    _fill(store)
    with _statements(store) as seen:
        counts = store.counts()
    assert counts[TaskStatus.SUCCEEDED] == 14 and counts[TaskStatus.RUNNING] == 26
    assert "GROUP BY status" in _only(seen, "SELECT")


# -- close really closes -------------------------------------------------------------------
def _open_fds_on(path: Path) -> list[str]:
    fd_dir = Path("/proc/self/fd")
    found = []
    for fd in fd_dir.iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith(str(path)):
                found.append(target)
    return found


@checks("CLOSE-RELEASES", "CLOSE-IDEMPOTENT", "CLOSE-THEN-STOREERROR")
def test_close_closes_the_connection_and_releases_the_file(db_path: Path) -> None:
    store = SqliteTaskStore(db_path)
    store.create(snapshot("t1"))
    conn = _conn(store)
    if Path("/proc/self/fd").is_dir():
        assert _open_fds_on(db_path), "an open store should hold the database file"
    store.close()
    store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        conn.execute("SELECT 1")
    if Path("/proc/self/fd").is_dir():
        assert _open_fds_on(db_path) == [], "close() left file descriptors open"
    # The last connection to close checkpoints and removes the WAL file.
    assert not Path(f"{db_path}-wal").exists()
    with pytest.raises(StoreError):
        store.get("t1")
    # The data survived and the file is free: reopen it, then delete it and start afresh.
    reopened = SqliteTaskStore(db_path)
    assert reopened.get("t1") is not None
    reopened.close()
    db_path.unlink()
    fresh = SqliteTaskStore(db_path)
    assert fresh.get("t1") is None
    fresh.close()


# -- sharing one file -------------------------------------------------------------------------
@checks("XP-SHARED-VISIBILITY")
def test_two_instances_on_one_file_see_each_others_writes(db_path: Path) -> None:
    a, b = SqliteTaskStore(db_path), SqliteTaskStore(db_path)
    try:
        a.create(snapshot("t1", version=1))
        assert b.get("t1") is not None
        b.save(snapshot("t1", version=2, status=TaskStatus.RUNNING), expect_version=1)
        with pytest.raises(ConcurrencyConflict) as conflict:
            a.save(snapshot("t1", version=2), expect_version=1)
        assert conflict.value.actual == 2
        b.submit_command(command("c1", "t1"))
        assert [c.command_id for c in a.claim_commands(now=at(0), lease_seconds=30)] == ["c1"]
        assert b.claim_commands(now=at(1), lease_seconds=30) == []
    finally:
        a.close()
        b.close()


# Workers run in spawned processes: module-level so they can be pickled by reference.
def _race_save(opener: Callable[[], SqliteTaskStore], start: Any, results: Any, n: int) -> None:
    store = opener()
    try:
        start.wait()
        store.save(snapshot("t1", version=2, name=f"writer-{n}"), expect_version=1)
        results.put(("saved", n))
    except ConcurrencyConflict as exc:
        results.put(("conflict", exc.actual))
    finally:
        store.close()


def _race_claim(opener: Callable[[], SqliteTaskStore], start: Any, results: Any, n: int) -> None:
    store = opener()
    got: list[str] = []
    try:
        start.wait()
        while batch := store.claim_commands(now=at(0), lease_seconds=3600, limit=2):
            got.extend(c.command_id for c in batch)
    finally:
        store.close()
        results.put(got)


def _run_processes(
    target: Callable[..., None], opener: Callable[[], SqliteTaskStore], workers: int
) -> list[Any]:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(workers)
    results = ctx.Queue()
    procs = [ctx.Process(target=target, args=(opener, start, results, n)) for n in range(workers)]
    for p in procs:
        p.start()
    collected = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0, f"worker exited with {p.exitcode}"
    return collected


@pytest.fixture
def shared() -> Iterator[Callable[[], SqliteTaskStore]]:
    yield from sqlite_store.make_shared_store()


@checks("XP-SAVE-ATOMIC")
def test_processes_saving_one_version_exactly_one_wins(
    shared: Callable[[], SqliteTaskStore],
) -> None:
    setup = shared()
    setup.create(snapshot("t1", version=1))
    results = _run_processes(_race_save, shared, workers=4)
    saved = [r for r in results if r[0] == "saved"]
    assert len(saved) == 1, results
    assert sorted(results) == sorted([*saved, *[("conflict", 2)] * 3]), results
    assert setup.get("t1") == snapshot("t1", version=2, name=f"writer-{saved[0][1]}")
    setup.close()


@checks("XP-CLAIM-EXCLUSIVE")
def test_processes_claiming_never_share_a_command(
    shared: Callable[[], SqliteTaskStore],
) -> None:
    setup = shared()
    ids = [f"c{i:03}" for i in range(60)]
    for i, cid in enumerate(ids):
        setup.submit_command(command(cid, f"t{i}", created=i))
    setup.close()
    per_worker = _run_processes(_race_claim, shared, workers=4)
    claimed = [cid for got in per_worker for cid in got]
    assert sorted(claimed) == ids, "a command was claimed twice or never"


def test_shared_opener_is_picklable_and_opens_independent_connections(
    shared: Callable[[], SqliteTaskStore],
) -> None:
    import pickle

    opener = pickle.loads(pickle.dumps(shared))
    assert isinstance(opener, functools.partial)
    a, b = opener(), opener()
    try:
        assert a._conn is not b._conn
        a.create(snapshot("t1"))
        assert b.get("t1") is not None
    finally:
        a.close()
        b.close()


# -- driver errors surface as StoreError --------------------------------------------------
def test_a_file_that_is_not_a_database_raises_store_error(db_path: Path) -> None:
    db_path.write_bytes(b"this is not an SQLite database, just text. " * 200)
    with pytest.raises(StoreError) as raised:
        SqliteTaskStore(db_path)
    assert isinstance(raised.value.__cause__, sqlite3.DatabaseError)


def test_a_driver_error_mid_operation_raises_store_error(
    store: SqliteTaskStore, db_path: Path
) -> None:
    store.create(snapshot("t1"))
    vandal = sqlite3.connect(db_path)
    vandal.execute("DROP TABLE tasks")
    vandal.commit()
    vandal.close()
    for call in (
        lambda: store.get("t1"),
        lambda: store.save(snapshot("t1", version=2), expect_version=1),
        lambda: store.query(TaskQuery(buckets=frozenset({1}))),
        lambda: store.prune(keep_terminal=0),
    ):
        with pytest.raises(StoreError) as raised:
            call()
        assert isinstance(raised.value.__cause__, sqlite3.Error)
    # The failed write transaction was rolled back: the connection is usable again.
    assert not _conn(store).in_transaction
    assert store.history("t1") == []


def test_an_integer_beyond_64_bits_raises_store_error(store: SqliteTaskStore) -> None:
    with pytest.raises(StoreError):
        store.create(snapshot("t1", bucket=2**64))
    assert store.get("t1") is None


# -- schema v2: indexes that carry the order, counters for counts() ------------------------
@checks("QUERY-PUSHDOWN", "QUERY-ORDER-CREATED")
def test_bucket_and_status_query_reads_one_index_in_order(store: SqliteTaskStore) -> None:
    _fill(store)
    with _statements(store) as seen:
        found = store.query(
            TaskQuery(buckets=frozenset({1}), statuses=frozenset({TaskStatus.RUNNING}))
        )
        store.query(TaskQuery(buckets=frozenset({1}), limit=2))
    assert [t.task_id for t in found] == ["t001", "t017", "t025"]
    by_status, by_bucket = (_plan(store, s) for s in seen)
    assert "USING INDEX tasks_status (status=? AND bucket=?)" in by_status, by_status
    assert "USING INDEX tasks_bucket (bucket=?)" in by_bucket, by_bucket
    # The order comes from the index: no sort of the whole bucket before LIMIT.
    for plan in (by_status, by_bucket):
        assert "TEMP B-TREE" not in plan, plan
        assert "SCAN tasks" not in plan, plan


def _index_columns(store: SqliteTaskStore, index: str) -> list[str]:
    return [str(r["name"]) for r in _conn(store).execute(f"PRAGMA index_info({index})")]


def test_schema_indexes_and_version(store: SqliteTaskStore) -> None:
    assert _index_columns(store, "tasks_bucket") == ["bucket", "created_at", "task_id"]
    assert _index_columns(store, "tasks_status") == ["status", "bucket", "created_at", "task_id"]
    (version,) = _conn(store).execute("PRAGMA user_version").fetchone().values()
    assert version == sqlite_store.SCHEMA_VERSION == 3


def test_history_has_a_foreign_key_to_its_task(store: SqliteTaskStore) -> None:
    """Schema v3: the most natural relational schema. The kit never appends for a task
    that does not exist (the guide leaves it open), so this store's green run through the
    plugin proves that; here, that the key is real and prune deletes in the right order."""
    keys = list(_conn(store).execute("PRAGMA foreign_key_list(transitions)"))
    assert [(k["table"], k["from"], k["to"]) for k in keys] == [("tasks", "task_id", "task_id")]
    with pytest.raises(StoreError, match="FOREIGN KEY"):
        store.append(transition("never-created", 1))
    store.create(snapshot("done", status=TaskStatus.SUCCEEDED))
    store.append(transition("done", 1))
    store.submit_command(command("c-done", "done"))
    assert store.prune(keep_terminal=0) == 1
    assert store.history("done") == [] and store.get("done") is None


@checks("COUNTS-AGGREGATED")
def test_counts_reads_the_counters_not_the_tasks(store: SqliteTaskStore) -> None:
    _fill(store)
    with _statements(store) as seen:
        store.counts()
    plan = _plan(store, _only(seen, "SELECT"))
    assert "task_counts" in plan and "tasks " not in plan.replace("task_counts", ""), plan


@checks("COUNTS-PER-STATUS")
def test_counters_equal_a_recount_after_churn(store: SqliteTaskStore) -> None:
    assert churn_and_check(store) == 17


def test_counters_stay_exact_with_two_processes_writing(tmp_path: Path) -> None:
    """Two spawned processes churn one file at once; the counters still match."""
    path = tmp_path / "shared.db"
    SqliteTaskStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    workers = [ctx.Process(target=_churn_in_process, args=(str(path), seed)) for seed in (1, 2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0, f"worker exit code {worker.exitcode}"
    reopened = SqliteTaskStore(path)
    try:
        assert dict(reopened.counts()) == recount(reopened)
        assert sum(reopened.counts().values()) > 0
    finally:
        reopened.close()


def _churn_in_process(path: str, seed: int) -> None:
    """Writes only (the other process writes too, so a mid-run recount would race).

    Task ids carry the seed so the two workers never collide on create; a prune
    by the other worker may delete one of ours, which then conflicts on save.
    """
    rng = random.Random(seed)
    store = SqliteTaskStore(path)
    versions: dict[str, int] = {}
    statuses = list(TaskStatus)
    try:
        for step in range(300):
            if rng.random() < 0.5 or not versions:
                task_id = f"w{seed}-t{step:05d}"
                store.create(snapshot(task_id, status=rng.choice(statuses), created=step))
                versions[task_id] = 1
            else:
                task_id = rng.choice(sorted(versions))
                new = snapshot(task_id, status=rng.choice(statuses), version=versions[task_id] + 1)
                try:
                    store.save(new, expect_version=versions[task_id])
                    versions[task_id] += 1
                except ConcurrencyConflict:
                    del versions[task_id]  # pruned by the other worker
            if step % 50 == 49:
                store.prune(keep_terminal=rng.randrange(0, 20))
                alive = {t.task_id for t in store.query()}
                versions = {k: v for k, v in versions.items() if k in alive}
    finally:
        store.close()


def test_a_version_1_file_is_migrated_with_its_counts(db_path: Path) -> None:
    """A file written before versioning (v1 tables, user_version 0) opens as the current
    version: counters built, and history rebuilt under its foreign key (rows of a task
    that exists kept, an orphan row -- appended for a task never created -- not)."""
    raw = sqlite3.connect(db_path)
    for statement in sqlite_store._MIGRATIONS[1]:
        raw.execute(statement)
    for i, status in enumerate(["running", "running", "succeeded", "failed"]):
        raw.execute(
            "INSERT INTO tasks (task_id, name, status, status_version, created_at, updated_at, "
            "tags) VALUES (?, 'job', ?, 1, ?, ?, '[]')",
            (f"old{i}", status, *[f"2026-01-0{i + 1}T00:00:00.000000+00:00"] * 2),
        )
    for task_id in ("old0", "orphan"):
        raw.execute(
            "INSERT INTO transitions (task_id, version, to_status, at) "
            "VALUES (?, 1, 'running', '2026-01-01T00:00:00.000000+00:00')", (task_id,))
    raw.commit()
    raw.close()
    store = SqliteTaskStore(db_path)
    try:
        assert [t.version for t in store.history("old0")] == [1]
        assert store.history("orphan") == []
        counts = store.counts()
        assert counts[TaskStatus.RUNNING] == 2
        assert counts[TaskStatus.SUCCEEDED] == 1 and counts[TaskStatus.FAILED] == 1
        assert _index_columns(store, "tasks_bucket") == ["bucket", "created_at", "task_id"]
        store.create(snapshot("new", status=TaskStatus.RUNNING))
        assert store.counts()[TaskStatus.RUNNING] == 3 == len(
            store.query(TaskQuery(statuses=frozenset({TaskStatus.RUNNING})))
        )
    finally:
        store.close()
    # Opening again is a no-op: the counters are not added a second time.
    again = SqliteTaskStore(db_path)
    try:
        assert again.counts()[TaskStatus.RUNNING] == 3
    finally:
        again.close()


def test_a_newer_schema_version_is_refused(db_path: Path) -> None:
    SqliteTaskStore(db_path).close()
    raw = sqlite3.connect(db_path)
    raw.execute(f"PRAGMA user_version = {sqlite_store.SCHEMA_VERSION + 1}")
    raw.close()
    with pytest.raises(StoreError, match="newer than this code"):
        SqliteTaskStore(db_path)


def test_a_subclass_that_replaces_save_gets_exact_counts(db_path: Path) -> None:
    """Only this class's save() moves the counters; a replacement save falls back to GROUP BY."""

    class PlainSave(SqliteTaskStore):
        def save(self, snapshot: Any, *, expect_version: int) -> None:
            with self._connection("save") as conn:
                conn.execute(
                    "UPDATE tasks SET status = ?, status_version = ? WHERE task_id = ?",
                    (snapshot.status.value, snapshot.status_version, snapshot.task_id),
                )

    store = PlainSave(db_path)
    try:
        store.create(snapshot("t1", status=TaskStatus.RUNNING))
        store.save(snapshot("t1", status=TaskStatus.SUCCEEDED, version=2), expect_version=1)
        assert store.counts()[TaskStatus.SUCCEEDED] == 1
        assert store.counts()[TaskStatus.RUNNING] == 0
    finally:
        store.close()
