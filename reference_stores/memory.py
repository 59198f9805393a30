"""In-memory TaskStore: the smallest store that meets the whole contract.

Guarantees: every single-process clause, thread safety (one lock around every
operation, so check-and-write in ``save`` and pick-and-lease in
``claim_commands`` are atomic among threads).

Does not: survive the process, or share anything with another process -- the
kit reports its cross-process clauses NOT VERIFIED.

Stored values are the frozen model objects themselves; being immutable, they
can be handed out without copying.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import ParamSpec, TypeVar

from chongming_conformance import (
    Command,
    ConcurrencyConflict,
    Progress,
    StoreError,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)

__all__ = ["InMemoryTaskStore", "make_store"]

P = ParamSpec("P")
R = TypeVar("R")


def _locked(method: Callable[P, R]) -> Callable[P, R]:
    """Run the method under the store's lock, refusing use after close()."""

    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        self = args[0]
        assert isinstance(self, InMemoryTaskStore)
        with self._lock:
            if self._closed:
                raise StoreError(f"{method.__name__}() on a closed InMemoryTaskStore")
            return method(*args, **kwargs)

    wrapper.__name__ = method.__name__
    wrapper.__doc__ = method.__doc__
    wrapper.__wrapped__ = method  # type: ignore[attr-defined]  # keeps the real signature
    return wrapper


def _matches(task: TaskSnapshot, q: TaskQuery) -> bool:
    if q.statuses is not None and task.status not in q.statuses:
        return False
    if q.name is not None and task.name != q.name:
        return False
    if q.name_prefix is not None and not task.name.startswith(q.name_prefix):
        return False
    if q.tag is not None and q.tag not in task.tags:  # set membership: exact match
        return False
    if q.buckets is not None and task.bucket not in q.buckets:
        return False
    return q.pipeline_run_id is None or task.pipeline_run_id == q.pipeline_run_id


class InMemoryTaskStore:
    """Dict-backed store; see the module docstring for what it guarantees."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._closed = False
        self._tasks: dict[str, TaskSnapshot] = {}
        self._history: dict[str, dict[int, Transition]] = {}
        self._commands: dict[str, Command] = {}

    # -- task snapshots ------------------------------------------------------------
    @_locked
    def create(self, snapshot: TaskSnapshot) -> None:
        if snapshot.task_id in self._tasks:
            raise StoreError(f"task {snapshot.task_id!r} already exists")
        self._tasks[snapshot.task_id] = snapshot

    @_locked
    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        current = self._tasks.get(snapshot.task_id)
        actual = None if current is None else current.status_version
        if actual != expect_version:  # equality is the only rule: versions may skip
            raise ConcurrencyConflict(snapshot.task_id, expect_version, actual)
        assert current is not None
        # The lease belongs to touch(); carry the stored one over.
        self._tasks[snapshot.task_id] = replace(
            snapshot, lease_owner=current.lease_owner, lease_until=current.lease_until
        )

    @_locked
    def get(self, task_id: str) -> TaskSnapshot | None:
        return self._tasks.get(task_id)

    @_locked
    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        found = [t for t in self._tasks.values() if _matches(t, q)]
        # Ties on created_at are broken by task_id for a stable, documented order.
        found.sort(key=lambda t: (t.created_at, t.task_id), reverse=q.newest_first)
        return found if q.limit is None else found[: q.limit]

    @_locked
    def counts(self) -> Mapping[TaskStatus, int]:
        result = dict.fromkeys(TaskStatus, 0)
        for task in self._tasks.values():
            result[task.status] += 1
        return result

    # -- history -----------------------------------------------------------------------
    @_locked
    def append(self, transition: Transition) -> None:
        # setdefault: a replay of an existing (task_id, version) keeps the first row.
        self._history.setdefault(transition.task_id, {}).setdefault(
            transition.version, transition
        )

    @_locked
    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        rows = self._history.get(task_id, {})
        return [rows[v] for v in sorted(rows) if v > since_version]

    # -- touch -------------------------------------------------------------------------------
    @_locked
    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        current = self._tasks.get(task_id)
        if current is None:
            return  # a late heartbeat for a vanished task is not an error
        changes: dict[str, object] = {
            name: value
            for name, value in (
                ("progress", progress),
                ("heartbeat_at", heartbeat_at),
                ("lease_owner", lease_owner),
                ("lease_until", lease_until),
            )
            if value is not None
        }
        if changes:  # status_version deliberately untouched
            self._tasks[task_id] = current.evolve(**changes)

    # -- commands ---------------------------------------------------------------------------
    @_locked
    def submit_command(self, command: Command) -> None:
        if command.command_id in self._commands:
            raise StoreError(f"command {command.command_id!r} already exists")
        self._commands[command.command_id] = command

    @_locked
    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        lease_until = now + timedelta(seconds=lease_seconds)
        free = [
            c
            for c in self._commands.values()
            if c.finished_at is None and (c.lease_until is None or c.lease_until <= now)
        ]
        free.sort(key=lambda c: (c.created_at, c.command_id))
        claimed = []
        for command in free[: max(limit, 0)]:
            leased = replace(command, lease_until=lease_until)
            self._commands[command.command_id] = leased
            claimed.append(leased)
        return claimed

    @_locked
    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        command = self._commands.get(command_id)
        if command is None or command.finished_at is not None:
            return  # unknown or already finished: nothing to do
        self._commands[command_id] = replace(command, finished_at=now, outcome=outcome)

    @_locked
    def release_command(self, command_id: str, *, now: datetime) -> None:
        command = self._commands.get(command_id)
        if command is None or command.finished_at is not None:
            return
        self._commands[command_id] = replace(command, lease_until=None)

    # -- operations -----------------------------------------------------------------------------
    @_locked
    def prune(self, *, keep_terminal: int) -> int:
        terminal = sorted(
            (t for t in self._tasks.values() if t.status.is_terminal),
            key=lambda t: (t.created_at, t.task_id),
        )
        doomed = terminal[: max(len(terminal) - keep_terminal, 0)]
        gone = {t.task_id for t in doomed}
        for task_id in gone:
            del self._tasks[task_id]
            self._history.pop(task_id, None)
        self._commands = {k: c for k, c in self._commands.items() if c.task_id not in gone}
        return len(gone)

    def close(self) -> None:
        with self._lock:
            self._closed = True


def make_store() -> InMemoryTaskStore:
    """A fresh, empty store (the kit's zero-argument factory)."""
    return InMemoryTaskStore()
