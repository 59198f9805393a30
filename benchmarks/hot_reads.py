"""Hot-read latency of a reference store at growing sizes (issue 14's table).

For each size N the script opens a fresh store, bulk-loads N tasks straight
into its table (SQLite ``executemany`` in one transaction, Postgres ``COPY``,
MariaDB multi-row ``INSERT`` batches plus its ``task_tags`` rows and counters;
``create()`` one by one would take an hour at 1M), then times the
controller's hot calls through the store's own API and prints the median µs
per call with the growth relative to the smallest size.

The data: 64 buckets (``bucket = i % 64``), 128 RUNNING tasks spread over the
table (two per bucket), the rest SUCCEEDED, 16 tags, pipelines of 10 tasks,
``created_at`` one second apart. Postgres and MariaDB are ANALYZEd after the load
(autovacuum, InnoDB's automatic statistics, would do it soon anyway); SQLite is
not (its store never runs ANALYZE, so the plan must be right without statistics).

Run::

    .venv/bin/python benchmarks/hot_reads.py sqlite --sizes 10000,1000000
    CHONGMING_TEST_POSTGRES=postgresql://postgres@127.0.0.1:5432/test \\
        .venv/bin/python benchmarks/hot_reads.py postgres --sizes 10000,1000000
    CHONGMING_TEST_MARIADB=mysql://root@127.0.0.1:3306/test \\
        .venv/bin/python benchmarks/hot_reads.py mariadb --sizes 10000,1000000

``--root DIR`` imports ``reference_stores`` from another checkout (e.g. the
main branch, to measure "before").
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent

BUCKETS = 64
RUNNING = 128
TAGS = 16
PIPELINE = 10
MIN_CALLS = 5
MAX_CALLS = 200
BUDGET_SECONDS = 2.0


def _running(n: int) -> frozenset[int]:
    """RUNNING tasks spread over the whole table, exactly RUNNING/BUCKETS per bucket.

    Task j of the 128 sits at ``j * stride + j % 64`` with ``stride`` a multiple
    of 64, so its bucket (``i % 64``) is ``j % 64``: two per bucket at every
    size, and the answer to "bucket b's RUNNING tasks" does not grow with n.
    """
    stride = BUCKETS * (n // (RUNNING * BUCKETS))
    if stride == 0:  # under 8192 tasks: the oldest 128
        return frozenset(range(min(n, RUNNING)))
    return frozenset(j * stride + j % BUCKETS for j in range(RUNNING))


def _rows(n: int) -> Iterator[dict[str, Any]]:
    """The benchmark's tasks as codec rows (SQLite column values)."""
    from chongming_conformance import TaskStatus
    from chongming_conformance.protocol.codec import encode_dt, encode_tags
    from chongming_conformance.strategies.samples import T0

    running_ids = _running(n)
    for i in range(n):
        created = encode_dt(T0 + timedelta(seconds=i))
        running = i in running_ids
        yield {
            "task_id": f"t{i:08d}",
            "name": f"job-{i % 100}",
            "status": (TaskStatus.RUNNING if running else TaskStatus.SUCCEEDED).value,
            "status_version": 2,
            "created_at": created,
            "updated_at": created,
            "started_at": created,
            "finished_at": None if running else created,
            "tags": encode_tags({f"tag{i % TAGS}"}),
            "bucket": i % BUCKETS,
            "pipeline_run_id": f"p{i // PIPELINE}",
            "progress_done": None,
            "progress_total": None,
            "progress_message": None,
            "failure_type": None,
            "failure_message": None,
            "failure_detail": None,
            "heartbeat_at": None,
            "lease_owner": None,
            "lease_until": None,
        }


@contextlib.contextmanager
def sqlite_store(n: int) -> Iterator[Any]:
    sqlite_mod = importlib.import_module("reference_stores.sqlite")
    from chongming_conformance.protocol.codec import SNAPSHOT_COLUMNS

    with tempfile.TemporaryDirectory(prefix="chongming-bench-") as directory:
        store = sqlite_mod.SqliteTaskStore(Path(directory) / "tasks.db")
        conn = store._conn
        columns = ", ".join(SNAPSHOT_COLUMNS)
        marks = ", ".join(":" + c for c in SNAPSHOT_COLUMNS)
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(f"INSERT INTO tasks ({columns}) VALUES ({marks})", _rows(n))
        conn.execute("COMMIT")
        try:
            yield store
        finally:
            store.close()


@contextlib.contextmanager
def postgres_store(n: int) -> Iterator[Any]:
    import psycopg
    from psycopg import sql

    from chongming_conformance.protocol.codec import SNAPSHOT_COLUMNS, decode_dt

    pg = importlib.import_module("reference_stores.postgres")
    dsn = os.environ.get("CHONGMING_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")
    schema = f"chongming_bench_{uuid.uuid4().hex[:12]}"
    pg.install_schema(dsn, schema)
    dt_columns = {"created_at", "updated_at", "started_at", "finished_at"}
    try:
        with psycopg.connect(dsn) as conn:
            copy_sql = sql.SQL("COPY {} ({}) FROM STDIN").format(
                sql.Identifier(schema, "tasks"),
                sql.SQL(", ").join(sql.Identifier(c) for c in SNAPSHOT_COLUMNS),
            )
            with conn.cursor() as cur, cur.copy(copy_sql) as copy:
                for row in _rows(n):
                    copy.write_row(
                        [
                            decode_dt(row[c]) if c in dt_columns else row[c]
                            for c in SNAPSHOT_COLUMNS
                        ]
                    )
            conn.commit()
            conn.autocommit = True
            conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(schema, "tasks")))
        store = pg.PostgresTaskStore(dsn, schema=schema)
        try:
            yield store
        finally:
            store.close()
    finally:
        pg.drop_schema(dsn, schema)


@contextlib.contextmanager
def mariadb_store(n: int) -> Iterator[Any]:
    from datetime import UTC

    from chongming_conformance.protocol.codec import SNAPSHOT_COLUMNS, decode_dt

    mdb = importlib.import_module("reference_stores.mariadb")
    schema = importlib.import_module("reference_stores.mariadb_schema")
    dsn = os.environ.get("CHONGMING_TEST_MARIADB", "mysql://root@127.0.0.1:3306/test")
    database = f"chongming_bench_{uuid.uuid4().hex[:12]}"
    mdb.install_schema(dsn, database)
    dt_columns = {"created_at", "updated_at", "started_at", "finished_at"}

    def naive_utc(value: str | None) -> Any:
        parsed = decode_dt(value)
        return None if parsed is None else parsed.astimezone(UTC).replace(tzinfo=None)

    try:
        conn = schema.parse_dsn(dsn).connect(database=database, autocommit=False)
        try:
            with conn.cursor() as cur:
                insert_task = (
                    f"INSERT INTO tasks ({', '.join(SNAPSHOT_COLUMNS)}) "
                    f"VALUES ({', '.join(['%s'] * len(SNAPSHOT_COLUMNS))})"
                )
                insert_tag = "INSERT INTO task_tags (task_id, tag, created_at) VALUES (%s, %s, %s)"
                tasks: list[list[Any]] = []
                tags: list[tuple[Any, ...]] = []
                for row in _rows(n):
                    values = [
                        naive_utc(row[c]) if c in dt_columns else row[c] for c in SNAPSHOT_COLUMNS
                    ]
                    tasks.append(values)
                    created = values[SNAPSHOT_COLUMNS.index("created_at")]
                    tags.extend((row["task_id"], t, created) for t in json.loads(row["tags"]))
                    if len(tasks) == 5000:
                        cur.executemany(insert_task, tasks)
                        cur.executemany(insert_tag, tags)
                        conn.commit()
                        tasks, tags = [], []
                if tasks:
                    cur.executemany(insert_task, tasks)
                    cur.executemany(insert_tag, tags)
                conn.commit()
        finally:
            conn.close()
        # The store keeps the counters itself; rows loaded around it are counted once here.
        schema.recount_tasks(dsn, database)
        conn = schema.parse_dsn(dsn).connect(database=database)
        try:
            with conn.cursor() as cur:
                cur.execute("ANALYZE TABLE tasks, task_tags")
                cur.fetchall()
        finally:
            conn.close()
        store = mdb.MariaDBTaskStore(dsn, database=database)
        try:
            yield store
        finally:
            store.close()
    finally:
        mdb.drop_schema(dsn, database)


def hot_calls(n: int) -> list[tuple[str, Callable[[Any, random.Random], object]]]:
    """The table's rows: a label and a call on (store, rng)."""
    from chongming_conformance import TaskQuery, TaskStatus

    running = frozenset({TaskStatus.RUNNING})
    pipelines = max(n // PIPELINE, 1)
    return [
        ("get", lambda s, r: s.get(f"t{r.randrange(n):08d}")),
        (
            "query(buckets={b}, statuses={RUNNING})",
            lambda s, r: s.query(
                TaskQuery(buckets=frozenset({r.randrange(BUCKETS)}), statuses=running)
            ),
        ),
        (
            "query(buckets={b}, limit=50)",
            lambda s, r: s.query(TaskQuery(buckets=frozenset({r.randrange(BUCKETS)}), limit=50)),
        ),
        (
            "query(pipeline_run_id=p)",
            lambda s, r: s.query(TaskQuery(pipeline_run_id=f"p{r.randrange(pipelines)}")),
        ),
        (
            "query(tag=t, limit=50)",
            lambda s, r: s.query(TaskQuery(tag=f"tag{r.randrange(TAGS)}", limit=50)),
        ),
        (
            "query(newest_first, limit=50)",
            lambda s, r: s.query(TaskQuery(newest_first=True, limit=50)),
        ),
        ("counts()", lambda s, r: s.counts()),
    ]


def median_us(store: Any, call: Callable[[Any, random.Random], object]) -> float:
    """Median µs of ``call``: at least MIN_CALLS, at most MAX_CALLS or the time budget."""
    rng = random.Random(14)
    call(store, rng)  # warm caches and the connection
    samples: list[float] = []
    deadline = time.perf_counter() + BUDGET_SECONDS
    while len(samples) < MAX_CALLS and (
        len(samples) < MIN_CALLS or time.perf_counter() < deadline
    ):
        start = time.perf_counter()
        call(store, rng)
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", choices=("sqlite", "postgres", "mariadb"))
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument(
        "--root", default=str(HERE), help="the checkout to import reference_stores from"
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(args.root).resolve()))
    sizes = [int(s) for s in args.sizes.split(",")]
    opener = {"sqlite": sqlite_store, "postgres": postgres_store, "mariadb": mariadb_store}[
        args.store
    ]
    results: dict[int, dict[str, float]] = {}
    for n in sizes:
        started = time.perf_counter()
        with opener(n) as store:
            loaded = time.perf_counter() - started
            print(f"{args.store} {n:,} tasks loaded in {loaded:.1f} s", file=sys.stderr)
            counts = store.counts()
            assert sum(counts.values()) == n, f"counts() {counts} != {n} loaded rows"
            results[n] = {label: median_us(store, call) for label, call in hot_calls(n)}
    base = sizes[0]
    header = ["call"] + [f"{n:,}" for n in sizes] + [f"growth {n:,}/{base:,}" for n in sizes[1:]]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for label in results[base]:
        cells = [f"`{label}`"] + [f"{results[n][label]:,.0f}" for n in sizes]
        cells += [f"×{results[n][label] / results[base][label]:.1f}" for n in sizes[1:]]
        print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
