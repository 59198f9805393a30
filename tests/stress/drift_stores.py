"""A SQLite store whose counts() drift across processes, for the after-scenario integrity
check's teeth (tests/stress/test_integrity_blame.py).

``WriteBehindCounts`` keeps counts() in a side table fed by a write-behind buffer: each
instance counts its own creates and status moves in memory and flushes them every
``FLUSH_EVERY`` changes. In one process counts() adds the instance's own pending changes,
so the single-connection contract sees exact counts; a process that exits before its next
flush takes its changes with it, and every other instance's counts() drifts from the
tasks it can read. None of the scenarios reads counts() (create_race does not), so only
the integrity check after the scenario sees it.

The module must stay importable by name: spawned workers unpickle openers
``functools.partial(WriteBehindCounts, path)`` by reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from stress_stores import shared, single

from chongming_conformance import TaskSnapshot, TaskStatus
from reference_stores.sqlite import SqliteTaskStore

FLUSH_EVERY = 1000


class WriteBehindCounts(SqliteTaskStore):
    """counts() from a side table a per-instance buffer flushes every FLUSH_EVERY changes
    (prune is not counted: no scenario run here prunes)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._pending: dict[str, int] = {}
        with self._connection("schema", write=True) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS behind_counts "
                         "(status TEXT PRIMARY KEY, n INTEGER NOT NULL)")

    def _note(self, status: TaskStatus, delta: int) -> None:
        self._pending[status.value] = self._pending.get(status.value, 0) + delta
        if sum(abs(n) for n in self._pending.values()) >= FLUSH_EVERY:
            with self._connection("flush", write=True) as conn:
                for status_value, n in self._pending.items():
                    conn.execute("INSERT INTO behind_counts (status, n) VALUES (?, ?) ON "
                                 "CONFLICT(status) DO UPDATE SET n = n + excluded.n",
                                 (status_value, n))
            self._pending = {}

    def create(self, snapshot: TaskSnapshot) -> None:
        super().create(snapshot)
        self._note(snapshot.status, 1)

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        before = self.get(snapshot.task_id)
        super().save(snapshot, expect_version=expect_version)
        if before is not None and before.status is not snapshot.status:
            self._note(before.status, -1)
            self._note(snapshot.status, 1)

    def counts(self) -> Mapping[TaskStatus, int]:
        with self._connection("counts") as conn:
            rows = conn.execute("SELECT status, n FROM behind_counts").fetchall()
        stored = {str(r[0]): int(r[1]) for r in rows}
        return {s: stored.get(s.value, 0) + self._pending.get(s.value, 0) for s in TaskStatus}


#: The factories a backend author would configure (``--chongming-store=drift_stores:make_store
#: --chongming-shared-store=drift_stores:make_shared_store``), for the plugin-level test.
make_store = single(WriteBehindCounts)
make_shared_store = shared(WriteBehindCounts)
