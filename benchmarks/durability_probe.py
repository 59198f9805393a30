"""Does a crash lose commits that had returned? (a count per configuration, not a test)

Usage: .venv/bin/python benchmarks/durability_probe.py [CRASHES] [CONFIG ...]

CONFIG is one of ``pg-sync`` (Postgres, synchronous_commit=on), ``pg-async``
(synchronous_commit=off), ``maria-1`` / ``maria-2`` / ``maria-0``
(innodb_flush_log_at_trx_commit = 1 / 2 / 0); default: all. CRASHES defaults to 20.

For each configuration one throwaway server (tests/integration/throwaway_servers.py)
is started; then, CRASHES times: WRITERS threads, each on its own autocommit
connection, insert single rows as fast as they can and record every id whose
INSERT (= COMMIT) returned; after a random 0.3-0.8 s the server is crashed
(Postgres: ``pg_ctl stop -m immediate``; MariaDB: SIGKILL of mariadbd), the
writers stop on their first error, the server is started again (crash
recovery) and the acknowledged ids that are not in the table are counted.

Both crashes are process crashes: what the server had handed to the OS (page
cache) survives, only what it held in its own memory is lost. So the probe
separates "written to the OS at commit" from "kept in the server's buffers";
it says nothing about an OS crash or power loss (fsync), which it cannot cause.
Prints one line per configuration: crashes that lost >= 1 acknowledged row, rows
lost in total / acknowledged in total, the largest loss of one crash.
"""

from __future__ import annotations

import contextlib
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

import throwaway_servers as ts

WRITERS = 4
JOIN = 60.0  # bound on a writer noticing the crash


@dataclass
class Cycle:
    acked: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Server:
    """What the probe needs of a server, for either engine."""

    connect: Callable[[], Any]
    insert: str  # one placeholder: the id
    crash: Callable[[], None]
    start: Callable[[], None]
    close: Callable[[], None]


def postgres(settings: dict[str, str]) -> Server:
    import psycopg

    pg = ts.ThrowawayPostgres(settings)
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE probe (id bigint PRIMARY KEY)")

    def connect() -> Any:
        return psycopg.connect(pg.dsn, autocommit=True, connect_timeout=10)

    return Server(connect, "INSERT INTO probe VALUES (%s)", pg.crash, pg.start, pg.close)


def mariadb(settings: dict[str, str]) -> Server:
    db = ts.ThrowawayMariaDB(settings)
    conn = db.connect()
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE probe (id BIGINT PRIMARY KEY) ENGINE=InnoDB")
    conn.close()

    class Conn:
        def __init__(self) -> None:
            self.raw = db.connect()

        def execute(self, query: str, params: Any = ()) -> Any:
            cur = self.raw.cursor()
            cur.execute(query, params)
            return cur

        def close(self) -> None:
            self.raw.close()

    return Server(Conn, "INSERT INTO probe VALUES (%s)", db.crash, db.start, db.close)


CONFIGS: dict[str, Callable[[], Server]] = {
    "pg-sync": lambda: postgres({"synchronous_commit": "on"}),
    "pg-async": lambda: postgres({"synchronous_commit": "off"}),
    "maria-1": lambda: mariadb({"innodb_flush_log_at_trx_commit": "1"}),
    "maria-2": lambda: mariadb({"innodb_flush_log_at_trx_commit": "2"}),
    "maria-0": lambda: mariadb({"innodb_flush_log_at_trx_commit": "0"}),
}


def writer(server: Server, cycle: Cycle, first_id: int, stop: threading.Event) -> None:
    try:
        conn = server.connect()
    except Exception:
        return
    next_id = first_id
    try:
        while not stop.is_set():
            conn.execute(server.insert, (next_id,))  # autocommit: returns after COMMIT
            with cycle.lock:
                cycle.acked.append(next_id)
            next_id += 1
    except Exception:  # the crash: the connection is gone
        pass
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def probe(name: str, crashes: int, rng: random.Random) -> str:
    server = CONFIGS[name]()
    lossy = lost_total = acked_total = worst = 0
    try:
        for n in range(crashes):
            cycle, stop = Cycle(), threading.Event()
            threads = [
                threading.Thread(
                    target=writer, args=(server, cycle, (n * WRITERS + w) * 10**9, stop),
                    daemon=True,
                )
                for w in range(WRITERS)
            ]  # fmt: skip
            for t in threads:
                t.start()
            time.sleep(rng.uniform(0.3, 0.8))
            server.crash()
            stop.set()
            for t in threads:
                t.join(JOIN)
                if t.is_alive():
                    raise RuntimeError(f"a writer did not notice the crash within {JOIN:g} s")
            server.start()
            conn = server.connect()
            try:
                present = {int(r[0]) for r in conn.execute("SELECT id FROM probe").fetchall()}
            finally:
                conn.close()
            lost = [i for i in cycle.acked if i not in present]
            lossy += bool(lost)
            lost_total += len(lost)
            acked_total += len(cycle.acked)
            worst = max(worst, len(lost))
    finally:
        server.close()
    return (
        f"{name}: {lossy}/{crashes} crashes lost >= 1 acknowledged row; "
        f"{lost_total}/{acked_total} acknowledged rows lost; worst crash lost {worst}"
    )


def main(argv: list[str]) -> None:
    crashes = int(argv[0]) if argv else 20
    names = argv[1:] or list(CONFIGS)
    rng = random.Random(20240611)
    for name in names:
        print(probe(name, crashes, rng), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
