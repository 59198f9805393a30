"""``FaultyStore``: a store wrapper that fails on demand, to stage an outage.

Two kinds of fault, both things a real network store does:

* ``fail`` -- the call raises ``StoreError`` *before* reaching the store (the
  server is down: nothing was written);
* ``lose_reply`` -- the call reaches the store and *then* raises (the write
  committed but the reply was lost: the caller cannot know it landed, so it
  will send it again -- which is why ``append`` must be idempotent).

It names every protocol method explicitly (no ``__getattr__``), so it is
structurally a ``TaskStore`` and the protocol check sees through nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TypeVar

from ...protocol import PROTOCOL_METHODS, TaskStore
from ...protocol.errors import StoreError
from ...protocol.model import Command, Progress, TaskQuery, TaskSnapshot, TaskStatus, Transition

__all__ = ["WRITE_METHODS", "FaultyStore"]

T = TypeVar("T")

#: The methods that change the store (what an outage of a write path hits).
WRITE_METHODS: frozenset[str] = frozenset(
    {"create", "save", "append", "touch", "submit_command", "claim_commands",
     "complete_command", "release_command", "prune"}
)


class FaultyStore:
    """Wraps ``inner``; the ``fail`` and ``lose_reply`` sets say which methods misbehave."""

    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._fail: frozenset[str] = frozenset()
        self._lose_reply: frozenset[str] = frozenset()
        #: (method, outcome) of every call: outcome is "ok", "failed" or "reply-lost".
        self.calls: list[tuple[str, str]] = []
        #: (expect_version, saved status_version) of every save that reached the store.
        self.saves: list[tuple[int, int]] = []

    def set_faults(self, *, fail: frozenset[str] | set[str] = frozenset(),
                   lose_reply: frozenset[str] | set[str] = frozenset()) -> None:
        """Replace the current faults (empty sets: the outage is over)."""
        unknown = (set(fail) | set(lose_reply)) - set(PROTOCOL_METHODS)
        if unknown:
            raise ValueError(f"not protocol methods: {sorted(unknown)}")
        with self._lock:
            self._fail = frozenset(fail)
            self._lose_reply = frozenset(lose_reply)

    def _run(self, name: str, call: Callable[[], T]) -> T:
        with self._lock:
            fail, lose = name in self._fail, name in self._lose_reply
        if fail:
            self.calls.append((name, "failed"))
            raise StoreError(f"injected outage: {name}() did not reach the store")
        result = call()
        if lose:
            self.calls.append((name, "reply-lost"))
            raise StoreError(f"injected outage: {name}() committed but its reply was lost")
        self.calls.append((name, "ok"))
        return result

    # -- the 14 methods --------------------------------------------------------------------
    def create(self, snapshot: TaskSnapshot) -> None:
        self._run("create", lambda: self.inner.create(snapshot))

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        def call() -> None:
            self.inner.save(snapshot, expect_version=expect_version)
            self.saves.append((expect_version, snapshot.status_version))

        self._run("save", call)

    def get(self, task_id: str) -> TaskSnapshot | None:
        return self._run("get", lambda: self.inner.get(task_id))

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        return self._run("query", lambda: self.inner.query(query))

    def counts(self) -> Mapping[TaskStatus, int]:
        return self._run("counts", self.inner.counts)

    def append(self, transition: Transition) -> None:
        self._run("append", lambda: self.inner.append(transition))

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        return self._run("history", lambda: self.inner.history(task_id,
                                                                since_version=since_version))

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        self._run("touch", lambda: self.inner.touch(
            task_id, progress=progress, heartbeat_at=heartbeat_at,
            lease_owner=lease_owner, lease_until=lease_until))

    def submit_command(self, command: Command) -> None:
        self._run("submit_command", lambda: self.inner.submit_command(command))

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        return self._run("claim_commands", lambda: self.inner.claim_commands(
            now=now, lease_seconds=lease_seconds, limit=limit))

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        self._run("complete_command",
                  lambda: self.inner.complete_command(command_id, now=now, outcome=outcome))

    def release_command(self, command_id: str, *, now: datetime) -> None:
        self._run("release_command", lambda: self.inner.release_command(command_id, now=now))

    def prune(self, *, keep_terminal: int) -> int:
        return self._run("prune", lambda: self.inner.prune(keep_terminal=keep_terminal))

    def close(self) -> None:
        self._run("close", self.inner.close)
