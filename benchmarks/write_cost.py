"""What the hot-read fix costs the write paths: before vs after, in ONE run.

"Before" is a reference store module as committed at ``--before-ref`` (default
``main``), loaded from ``git show`` under another module name; "after" is the
checkout's. Both run in this process, interleaved (before, after, after,
before, ...), so machine load hits both alike; the table shows the median
ops/s of each and the ratio after/before.

Measured per store, each repetition on a fresh database/schema:

* ``create``: N tasks, one call each (the counters' insert path);
* ``save (status changes)``: each task RUNNING -> SUCCEEDED (counter moves);
* ``save (same status)``: each task saved again, status unchanged;
* Postgres only, ``create x4 threads``: four threads creating at once, one
  connection each (contention on the counter rows, if any);
* Postgres only, ``claim+complete``: N commands drained by one consumer,
  ``claim_commands(limit=10)`` then ``complete_command`` for each.

Run::

    .venv/bin/python benchmarks/write_cost.py sqlite
    CHONGMING_TEST_POSTGRES=postgresql://postgres@127.0.0.1:5432/test \\
        .venv/bin/python benchmarks/write_cost.py postgres
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))  # run from a checkout

from chongming_conformance import TaskStatus  # noqa: E402
from chongming_conformance.strategies.samples import T0, at, command, snapshot  # noqa: E402

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
SQLITE_DIR: str | None = None  # --sqlite-dir; None = the system temp directory


def load_before(store: str, ref: str) -> ModuleType:
    """The store module as committed at ``ref``, importable beside the checkout's."""
    source = subprocess.run(
        ["git", "-C", str(HERE), "show", f"{ref}:reference_stores/{store}.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp(prefix="chongming-before-")) / f"before_{store}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"before_{store}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def open_store(module: ModuleType, kind: str, *, max_size: int = 4) -> Iterator[Any]:
    if kind == "sqlite":
        with tempfile.TemporaryDirectory(prefix="chongming-write-", dir=SQLITE_DIR) as directory:
            store = module.SqliteTaskStore(Path(directory) / "tasks.db")
            try:
                yield store
            finally:
                store.close()
        return
    dsn = os.environ.get("CHONGMING_TEST_POSTGRES", DEFAULT_DSN)
    schema = f"chongming_write_{uuid.uuid4().hex[:12]}"
    module.install_schema(dsn, schema)
    try:
        store = module.PostgresTaskStore(dsn, schema=schema, min_size=max_size, max_size=max_size)
        try:
            yield store
        finally:
            store.close()
    finally:
        module.drop_schema(dsn, schema)


def _timed(work: Callable[[], int], results: dict[str, float], path: str) -> None:
    """Record ops/s (wall) and client CPU µs/op (steadier on a loaded machine)."""
    cpu = time.process_time()
    start = time.perf_counter()
    done = work()
    results[path] = done / (time.perf_counter() - start)
    results[f"{path} [CPU µs/op]"] = (time.process_time() - cpu) * 1e6 / done


def measure(module: ModuleType, kind: str, n: int) -> dict[str, float]:
    """ops/s of each write path on a fresh store."""
    results: dict[str, float] = {}
    with open_store(module, kind) as store:

        def creates() -> int:
            for i in range(n):
                store.create(snapshot(f"t{i:06d}", status=TaskStatus.RUNNING, created=i))
            return n

        def saves_changing() -> int:
            for i in range(n):
                task = snapshot(f"t{i:06d}", status=TaskStatus.SUCCEEDED, version=2, created=i)
                store.save(task, expect_version=1)
            return n

        def saves_same() -> int:
            for i in range(n):
                task = snapshot(f"t{i:06d}", status=TaskStatus.SUCCEEDED, version=3, created=i)
                store.save(task, expect_version=2)
            return n

        _timed(creates, results, "create")
        _timed(saves_changing, results, "save (status changes)")
        _timed(saves_same, results, "save (same status)")
        assert store.counts()[TaskStatus.SUCCEEDED] == n
    if kind == "postgres":
        results["create x4 threads"] = _concurrent_creates(module, n)
        results["claim+complete"] = _claim_complete(module, n)
    return results


def _concurrent_creates(module: ModuleType, n: int) -> float:
    threads = 4
    with open_store(module, "postgres", max_size=threads) as store:
        barrier = threading.Barrier(threads + 1)

        def worker(w: int) -> None:
            barrier.wait()
            for i in range(n // threads):
                store.create(snapshot(f"w{w}-{i:06d}", status=TaskStatus.RUNNING, created=i))

        pool = [threading.Thread(target=worker, args=(w,)) for w in range(threads)]
        for thread in pool:
            thread.start()
        barrier.wait()
        start = time.perf_counter()
        for thread in pool:
            thread.join()
        elapsed = time.perf_counter() - start
        total = threads * (n // threads)
        assert store.counts()[TaskStatus.RUNNING] == total
    return total / elapsed


def _claim_complete(module: ModuleType, n: int) -> float:
    with open_store(module, "postgres") as store:
        for i in range(n):
            store.submit_command(command(f"c{i:06d}", f"t{i:06d}", created=i))
        now = T0 + timedelta(days=1)
        start = time.perf_counter()
        done = 0
        while claimed := store.claim_commands(now=now, lease_seconds=30, limit=10):
            for cmd in claimed:
                store.complete_command(cmd.command_id, now=at(86_400), outcome="ok")
                done += 1
        elapsed = time.perf_counter() - start
        assert done == n, f"drained {done} of {n}"
    return done / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", choices=("sqlite", "postgres"))
    parser.add_argument("-n", type=int, default=1000, help="operations per path and run")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side (interleaved)")
    parser.add_argument("--before-ref", default="main")
    parser.add_argument(
        "--sqlite-dir",
        help="where the SQLite files go; /dev/shm (tmpfs) takes the disk's fsync latency, "
        "equal on both sides, out of the comparison",
    )
    args = parser.parse_args(argv)
    global SQLITE_DIR
    SQLITE_DIR = args.sqlite_dir
    before = load_before(args.store, args.before_ref)
    after = importlib.import_module(f"reference_stores.{args.store}")
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    order = ["before", "after"]
    for rep in range(args.repeat):
        for side in order if rep % 2 == 0 else order[::-1]:
            module = before if side == "before" else after
            runs[side].append(measure(module, args.store, args.n))
            print(f"run {rep + 1} {side}: done", file=sys.stderr)
    print(f"{args.store}, n={args.n}, {args.repeat} runs per side, median ops/s "
          f"(before = {args.before_ref}, after = this checkout)")
    print("| path | before ops/s | after ops/s | after/before | before CPU µs/op "
          "| after CPU µs/op |")
    print("|---|---:|---:|---:|---:|---:|")
    for path in runs["before"][0]:
        if path.endswith("[CPU µs/op]"):
            continue
        b = statistics.median(r[path] for r in runs["before"])
        a = statistics.median(r[path] for r in runs["after"])
        cells = f"| {path} | {b:,.0f} | {a:,.0f} | {a / b:.2f} |"
        cpu_key = f"{path} [CPU µs/op]"
        if cpu_key in runs["before"][0]:
            cb = statistics.median(r[cpu_key] for r in runs["before"])
            ca = statistics.median(r[cpu_key] for r in runs["after"])
            cells += f" {cb:,.0f} | {ca:,.0f} |"
        else:
            cells += " | |"
        print(cells)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
