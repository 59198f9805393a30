"""The write-through buffer: every transition reaches the store, outage or not.

Each transition is written as ``save(latest snapshot, expect_version=last
persisted version)`` followed by ``append(transition)``. When the store fails,
the transition stays here and the task keeps running; the next successful
flush saves only the *latest* snapshot, so the stored version jumps (2 -> 4,
guide §2.1 "monotonic but not contiguous"), and then appends every buffered
transition in version order. ``append`` is idempotent on (task_id, version), so
re-sending one whose reply was lost is safe.

A ``ConcurrencyConflict`` is not an outage: it means a second writer exists,
and retrying would hide it (guide §2.1). The one exception is our own earlier
save whose reply was lost -- the stored row then *is* a snapshot we sent,
which a ``get`` shows, and the buffer continues from that version; anything
else is recorded in ``errors`` and the task's writes stop there.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..protocol import TaskStore
from ..protocol.errors import ConcurrencyConflict
from ..protocol.model import TaskSnapshot, Transition

__all__ = ["WriteThrough"]

T = TypeVar("T")
#: Runs one store call (the controller serialises its calls through this).
StoreCall = Callable[..., Any]


@dataclass(slots=True)
class _Entry:
    persisted_version: int
    latest: TaskSnapshot
    transitions: list[Transition] = field(default_factory=list)
    #: Snapshots whose save raised without a verdict: any of them may be in the store.
    unconfirmed: list[TaskSnapshot] = field(default_factory=list)
    conflict: str | None = None


class WriteThrough:
    """Per-task buffer of unwritten snapshots and transitions, flushed in order."""

    def __init__(self, store: TaskStore, call: StoreCall) -> None:
        self._store = store
        self._call = call
        self._lock = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        #: Conflicts and the last outage per task, newest last (for diagnosis).
        self.errors: list[str] = []
        self.last_outage: str | None = None

    def track(self, created: TaskSnapshot, transition: Transition) -> None:
        """Start tracking a task just created at ``created.status_version``."""
        with self._lock:
            self._entries[created.task_id] = _Entry(
                created.status_version, created, [transition]
            )

    def record(self, snapshot: TaskSnapshot, transition: Transition) -> None:
        """Buffer a new latest snapshot and its transition (not yet written)."""
        with self._lock:
            entry = self._entries[snapshot.task_id]
            entry.latest = snapshot
            entry.transitions.append(transition)

    def persisted_version(self, task_id: str) -> int:
        with self._lock:
            return self._entries[task_id].persisted_version

    def buffered(self, task_id: str) -> tuple[Transition, ...]:
        """Transitions not yet confirmed appended."""
        with self._lock:
            entry = self._entries.get(task_id)
            return tuple(entry.transitions) if entry is not None else ()

    def is_clean(self, task_id: str) -> bool:
        with self._lock:
            entry = self._entries.get(task_id)
            return entry is None or (
                not entry.transitions
                and entry.latest.status_version == entry.persisted_version
            )

    def flush(self, task_id: str) -> bool:
        """Write what is buffered for ``task_id``; True when nothing is left buffered."""
        with self._lock:
            entry = self._entries.get(task_id)
            if entry is None:
                return True
            if entry.conflict is not None:
                return False
            try:
                self._write(entry)
            except ConcurrencyConflict:
                return False  # recorded in errors by _write; never retried
            except Exception as exc:  # an outage: keep everything, try again later
                self.last_outage = f"{task_id}: {type(exc).__name__}: {exc}"
                return False
            return True

    def flush_all(self) -> bool:
        with self._lock:
            ids = list(self._entries)
        results = [self.flush(task_id) for task_id in ids]
        return all(results)

    def forget_clean(self, task_id: str) -> None:
        """Stop tracking a finished task once everything reached the store."""
        with self._lock:
            if self.is_clean(task_id):
                self._entries.pop(task_id, None)

    def _write(self, entry: _Entry) -> None:
        latest = entry.latest
        if latest.status_version != entry.persisted_version:
            try:
                self._save(entry, latest)
            except ConcurrencyConflict as exc:
                stored = self._call(self._store.get, latest.task_id)
                if not any(_is_same_write(stored, s) for s in entry.unconfirmed):
                    self._conflict(entry, exc)
                    raise
                # One of our own saves landed before its reply was lost: the stored
                # version is ours. Continue from it (not a retry against another writer).
                assert stored is not None
                entry.persisted_version = stored.status_version
                entry.unconfirmed.clear()
                if stored.status_version != latest.status_version:
                    try:
                        self._save(entry, latest)
                    except ConcurrencyConflict as again:
                        self._conflict(entry, again)
                        raise
            entry.persisted_version = latest.status_version
            entry.unconfirmed.clear()
        while entry.transitions:
            self._call(self._store.append, entry.transitions[0])
            entry.transitions.pop(0)

    def _save(self, entry: _Entry, snapshot: TaskSnapshot) -> None:
        """save(); remember a snapshot whose save failed without a verdict (it may have landed)."""
        try:
            self._call(self._store.save, snapshot, expect_version=entry.persisted_version)
        except ConcurrencyConflict:
            raise
        except Exception:
            entry.unconfirmed.append(snapshot)
            raise

    def _conflict(self, entry: _Entry, exc: ConcurrencyConflict) -> None:
        entry.conflict = str(exc)
        self.errors.append(
            f"{entry.latest.task_id}: a second writer changed the task "
            f"(expected version {entry.persisted_version}): {exc}"
        )


def _is_same_write(stored: TaskSnapshot | None, attempted: TaskSnapshot) -> bool:
    """True when the stored row is a snapshot we tried to save (its reply was lost)."""
    return (
        stored is not None
        and stored.status_version == attempted.status_version
        and stored.status is attempted.status
        and stored.updated_at == attempted.updated_at
    )
