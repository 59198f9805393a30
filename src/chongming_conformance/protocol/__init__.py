"""The ``TaskStore`` protocol: fourteen methods, structural, no base class.

A backend is any object with these methods and these semantics; nothing needs
to inherit or register. ``runtime_checkable`` makes ``isinstance(x, TaskStore)``
check that the names exist (not the signatures -- ``chongming_conformance.seam.factory``
checks those and names any mismatch).

The part ``protocol`` (docs/architecture.md, "The parts") is what a store is: this
protocol, its records (:mod:`.model`), its errors (:mod:`.errors`), the row codec a store
may reuse (:mod:`.codec`), the clause catalogue (:mod:`.clauses`), the capabilities a
store declares (:mod:`.capabilities`) and the adversarial alphabet the text domain is
drawn against (:mod:`.alphabet`). It is the bottom layer: it imports nothing else of the
kit. This module, ``model``, ``errors`` and ``codec`` are what a store itself may import
(the reference stores import nothing else at import time); ``chongming_conformance``
re-exports their names.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from .model import Command, Progress, TaskQuery, TaskSnapshot, TaskStatus, Transition

__all__ = ["PROTOCOL_METHODS", "TaskStore"]


@runtime_checkable
class TaskStore(Protocol):
    """Persistence backend for the task controller. Semantics: docs/backend-guide.md."""

    # -- task snapshots (optimistic concurrency) --------------------------------
    def create(self, snapshot: TaskSnapshot) -> None:
        """Insert a new task; raise StoreError if ``task_id`` exists (never overwrite)."""
        ...

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        """Replace the task iff its stored ``status_version == expect_version``, atomically.

        Otherwise raise ConcurrencyConflict, never retry. Must not write the lease columns.
        """
        ...

    def get(self, task_id: str) -> TaskSnapshot | None:
        """Return the task, or None if it does not exist."""
        ...

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        """Filtered tasks ordered by ``created_at`` (descending if ``newest_first``)."""
        ...

    def counts(self) -> Mapping[TaskStatus, int]:
        """Number of tasks per status, every status present (0 when none)."""
        ...

    # -- audit trail (append-only) ------------------------------------------------
    def append(self, transition: Transition) -> None:
        """Record a transition; idempotent on ``(task_id, version)``."""
        ...

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        """Transitions with ``version > since_version``, ascending by version."""
        ...

    # -- high-frequency side path (never touches the version) ----------------------
    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        """Update only the given fields; no version check or bump; missing task: no-op."""
        ...

    # -- control commands (cross-process) -----------------------------------------
    def submit_command(self, command: Command) -> None:
        """Store a command for the task's owner; raise StoreError on a duplicate id."""
        ...

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        """Atomically pick unfinished, unleased (or expired) commands and lease them."""
        ...

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        """Mark the command finished; it is never claimed again."""
        ...

    def release_command(self, command_id: str, *, now: datetime) -> None:
        """Clear the lease without finishing, so the real owner can claim it at once."""
        ...

    # -- operations ---------------------------------------------------------------------
    def prune(self, *, keep_terminal: int) -> int:
        """Drop the oldest terminal tasks beyond ``keep_terminal``, with their history."""
        ...

    def close(self) -> None:
        """Release resources; idempotent; later calls raise StoreError."""
        ...


PROTOCOL_METHODS: tuple[str, ...] = (
    "create",
    "save",
    "get",
    "query",
    "counts",
    "append",
    "history",
    "touch",
    "submit_command",
    "claim_commands",
    "complete_command",
    "release_command",
    "prune",
    "close",
)
