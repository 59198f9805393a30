"""Claim+complete throughput: PostgresTaskStore vs the bare SQL it runs (the floor).

For 1, 2 and 4 consumer processes, each configuration drains the same queue
of commands: claim a batch (the store's one-statement CTE with
``FOR UPDATE SKIP LOCKED``), complete each command (one UPDATE), repeat
until nothing is claimable. "store" goes through ``PostgresTaskStore`` (pool,
error wrapping, row decoding into ``Command``); "bare" runs the very same two
statements on one plain psycopg connection per process and keeps raw tuples.
The ratio store/bare is what the store layer costs.

Timing starts when every worker is connected and warmed up (a barrier) and
stops when the last one has drained the queue; process start-up is excluded.
Each configuration runs ``--repeat`` times and the median is reported. Every
run checks that each command was completed exactly once.

Run: ``CHONGMING_TEST_POSTGRES=postgresql://user@host/db .venv/bin/python
benchmarks/pg_claim_throughput.py`` (the DSN defaults to the local test server).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

import psycopg
from psycopg import sql

from reference_stores import postgres as pgstore

DEFAULT_DSN = "postgresql://root@127.0.0.1:5432/test"
LEASE = 30.0


def _store_worker(dsn: str, schema: str, batch: int, barrier: Any, out: Any) -> None:
    store = pgstore.PostgresTaskStore(dsn, schema=schema, min_size=1, max_size=1)
    store.counts()  # warm the pool's connection
    barrier.wait()
    cpu = time.process_time()
    done = 0
    while True:
        claimed = store.claim_commands(now=datetime.now(UTC), lease_seconds=LEASE, limit=batch)
        if not claimed:
            break
        for command in claimed:
            store.complete_command(command.command_id, now=datetime.now(UTC), outcome="ok")
            done += 1
    out.put((done, time.perf_counter(), time.process_time() - cpu))
    store.close()


def _bare_worker(dsn: str, schema: str, batch: int, barrier: Any, out: Any) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        claim = pgstore.claim_statement(schema).as_string(conn)
        complete = pgstore.complete_statement(schema).as_string(conn)
        barrier.wait()
        cpu = time.process_time()
        done = 0
        while True:
            now = datetime.now(UTC)
            rows = conn.execute(
                claim, {"now": now, "until": now + timedelta(seconds=LEASE), "limit": batch}
            ).fetchall()
            if not rows:
                break
            for row in rows:
                conn.execute(
                    complete,
                    {"now": datetime.now(UTC), "outcome": "ok", "command_id": row[0]},
                )
                done += 1
        out.put((done, time.perf_counter(), time.process_time() - cpu))


WORKERS = {"store": _store_worker, "bare": _bare_worker}


def _refill(dsn: str, schema: str, count: int) -> None:
    table = sql.Identifier(schema, "commands")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("TRUNCATE {}").format(table))
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (command_id, task_id, kind, issued_by, created_at) "
                "SELECT 'cmd-' || lpad(g::text, 7, '0'), 'task-' || (g %% 97), 'stop', 'bench', "
                "now() - interval '1 hour' + g * interval '1 millisecond' "
                "FROM generate_series(1, %s) AS g"
            ).format(table),
            [count],
        )
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(table))


def _finished(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE finished_at IS NOT NULL").format(
                sql.Identifier(schema, "commands")
            )
        ).fetchone()
    assert row is not None
    return int(row[0])


def run_once(
    dsn: str, schema: str, mode: str, consumers: int, count: int, batch: int
) -> tuple[float, float]:
    """Drain ``count`` commands with ``consumers`` processes.

    Returns (commands per second of wall time, client CPU microseconds per command).
    The second is what the store layer itself costs, and is far less disturbed
    by other load on the machine than the first.
    """
    _refill(dsn, schema, count)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(consumers + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=WORKERS[mode], args=(dsn, schema, batch, barrier, out))
        for _ in range(consumers)
    ]
    for p in procs:
        p.start()
    barrier.wait(timeout=120)
    start = time.perf_counter()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        if p.exitcode != 0:
            raise RuntimeError(f"{mode} worker exited with {p.exitcode}")
    elapsed: float = max(end for _, end, _ in results) - start
    done = sum(n for n, _, _ in results)
    cpu: float = sum(c for _, _, c in results)
    finished = _finished(dsn, schema)
    if done != count or finished != count:
        raise RuntimeError(f"{mode}: {done} completions reported, {finished} finished, {count}")
    return count / elapsed, cpu / count * 1e6


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dsn", default=os.environ.get(pgstore.DSN_ENV, DEFAULT_DSN))
    parser.add_argument("--commands", type=int, default=3000, help="commands per run")
    parser.add_argument("--batch", type=int, default=10, help="claim limit")
    parser.add_argument("--repeat", type=int, default=3, help="runs per configuration")
    parser.add_argument("--consumers", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args(argv)

    schema = f"chongming_bench_{uuid.uuid4().hex[:12]}"
    pgstore.install_schema(args.dsn, schema)
    try:
        with psycopg.connect(args.dsn) as conn:
            server = conn.execute("SHOW server_version").fetchone()
        print(
            f"# {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
            f"psycopg {psycopg.__version__}, PostgreSQL {server[0] if server else '?'}"
        )
        print(f"# load average at start: {os.getloadavg()[0]:.2f} (1 min)")
        print(
            f"# {args.commands} commands per run, claim limit {args.batch}, "
            f"median of {args.repeat} runs, lease {LEASE}s"
        )
        head = ("consumers", "store cmd/s", "bare cmd/s", "store/bare", "store CPU", "bare CPU")
        print(" | ".join(f"{h:>11}" for h in head) + "   (CPU: client µs per command)")
        print("-+-".join("-" * 11 for _ in head))
        for consumers in args.consumers:
            rates: dict[str, list[float]] = {"store": [], "bare": []}
            cpus: dict[str, list[float]] = {"store": [], "bare": []}
            for _ in range(args.repeat):
                for mode in ("store", "bare"):  # interleaved, so drift hits both alike
                    rate, cpu = run_once(
                        args.dsn, schema, mode, consumers, args.commands, args.batch
                    )
                    rates[mode].append(rate)
                    cpus[mode].append(cpu)
            store, bare = statistics.median(rates["store"]), statistics.median(rates["bare"])
            row = (
                f"{consumers}",
                f"{store:.0f}",
                f"{bare:.0f}",
                f"{store / bare:.2f}",
                f"{statistics.median(cpus['store']):.0f}",
                f"{statistics.median(cpus['bare']):.0f}",
            )
            print(" | ".join(f"{c:>11}" for c in row))
        print(f"# load average at end: {os.getloadavg()[0]:.2f} (1 min)")
    finally:
        pgstore.drop_schema(args.dsn, schema)


if __name__ == "__main__":
    main()
