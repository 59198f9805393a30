"""Broken SQLite stores for the cross-process controller checks (shareable, unlike the
in-memory ones in tests/broken_stores.py).

Each is the reference ``SqliteTaskStore`` with one guide §9 trap. The module must
stay importable by name: spawned controllers unpickle ``functools.partial(<class
here>, path)`` by reference.
"""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from chongming_conformance import Command, TaskSnapshot
from chongming_conformance.protocol.codec import COMMAND_COLUMNS, encode_dt, row_to_command
from reference_stores.sqlite import SqliteTaskStore


class ReleaseCompletesSqlite(SqliteTaskStore):
    """release_command() finishes the command: the holder never receives it (§9)."""

    def release_command(self, command_id: str, *, now: datetime) -> None:
        self.complete_command(command_id, now=now, outcome="released")


class ExpiryIgnoredClaimSqlite(SqliteTaskStore):
    """claim_commands() takes only never-leased commands: a dead holder's claim is forever."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        until = encode_dt(now + timedelta(seconds=lease_seconds))
        with self._connection("claim_commands", write=True) as conn:
            rows = conn.execute(
                "UPDATE commands SET lease_until = ? WHERE command_id IN (SELECT command_id "
                "FROM commands WHERE finished_at IS NULL AND lease_until IS NULL "
                f"ORDER BY created_at, command_id LIMIT ?) RETURNING {', '.join(COMMAND_COLUMNS)}",
                (until, max(limit, 0)),
            ).fetchall()
        return sorted((row_to_command(r) for r in rows), key=lambda c: (c.created_at,
                                                                        c.command_id))


class CachingGetSqlite(SqliteTaskStore):
    """get() answers from a per-instance cache: another process's writes stay invisible."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._cache: dict[str, TaskSnapshot | None] = {}

    def get(self, task_id: str) -> TaskSnapshot | None:
        if task_id not in self._cache:
            self._cache[task_id] = super().get(task_id)
        return self._cache[task_id]


def shared(cls: type[SqliteTaskStore]) -> Callable[[], Iterator[Callable[[], Any]]]:
    """A ``make_shared_store``: one fresh file, a picklable opener of ``cls`` on it."""

    def make_shared_store() -> Iterator[Callable[[], Any]]:
        directory = tempfile.mkdtemp(prefix="chongming-ctrl-broken-")
        path = str(Path(directory) / "tasks.db")
        cls(path).close()
        try:
            yield functools.partial(cls, path)
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    return make_shared_store
