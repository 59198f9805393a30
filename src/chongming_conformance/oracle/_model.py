"""The oracle's state and its selection rules: what a correct store holds, and which of it
a call picks.

Split out of :mod:`chongming_conformance.oracle` because everything else builds on it: the
checks there, the diagnosis in :mod:`._culprits`, the strategies that aim queries at
stored tasks and the stress run's linearizability check all read the same ``Model``,
``matches`` and ``claimable``. It imports nothing of the kit but the data model, so any
layer may use it. Import the names from :mod:`chongming_conformance.oracle`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from ..protocol.model import Command, Progress, TaskQuery, TaskSnapshot, TaskStatus, Transition

__all__ = ["Model", "claimable", "expected_counts", "instant", "matches"]


def instant(value: datetime) -> datetime:
    """The UTC instant: the only thing ordering may depend on."""
    return value.astimezone(UTC)


def matches(task: TaskSnapshot, q: TaskQuery) -> bool:
    """Does ``task`` pass every filter of ``q``? One line per filter, all ANDed."""
    if q.statuses is not None and task.status not in q.statuses:
        return False  # an empty set matches nothing
    if q.name is not None and task.name != q.name:
        return False
    if q.name_prefix is not None and task.name[: len(q.name_prefix)] != q.name_prefix:
        return False  # literal: '%' and '_' are ordinary characters
    if q.tag is not None and q.tag not in task.tags:
        return False  # element of the set, never a substring
    if q.buckets is not None and (task.bucket is None or task.bucket not in q.buckets):
        return False
    return q.pipeline_run_id is None or task.pipeline_run_id == q.pipeline_run_id


def expected_counts(tasks: Iterable[TaskSnapshot]) -> dict[TaskStatus, int]:
    """Every status with its number of tasks, 0 included."""
    result = {status: 0 for status in TaskStatus}
    for task in tasks:
        result[task.status] += 1
    return result


def claimable(
    commands: Iterable[Command], now: datetime, *, free_at_boundary: bool = True
) -> list[Command]:
    """Unfinished commands with no lease or a lease that ended before ``now`` -- or at
    ``now``, under the reading ``free_at_boundary`` (the kit's SHOULD, CLAIM-LEASE-BOUNDARY:
    the original guide says "an expired lease" without fixing the instant, so the MUST
    checks accept both readings; see :func:`check_claim`)."""
    return [
        c
        for c in commands
        if c.finished_at is None and (
            c.lease_until is None or c.lease_until < now
            or (free_at_boundary and c.lease_until == now))
    ]


@dataclass
class Model:
    """What a correct store holds: tasks, history rows and commands, in plain dicts."""

    tasks: dict[str, TaskSnapshot] = field(default_factory=dict)
    history: dict[tuple[str, int], Transition] = field(default_factory=dict)
    commands: dict[str, Command] = field(default_factory=dict)
    #: command id -> the last call that changed it (submit, claim, complete, release):
    #: what a wrong claim is blamed on.
    last_ops: dict[str, str] = field(default_factory=dict)
    #: Commands of pruned tasks: a store may or may not still hold them (see adopt_prune).
    orphans: set[str] = field(default_factory=set)
    #: command id -> (when it was last claimed, for how many seconds): what tells a
    #: lease cut to whole seconds from a lease ignored.
    leases: dict[str, tuple[datetime, float]] = field(default_factory=dict)

    def create(self, snapshot: TaskSnapshot) -> bool:
        """True if created; False means the store must raise StoreError and change nothing."""
        if snapshot.task_id in self.tasks:
            return False
        self.tasks[snapshot.task_id] = snapshot
        return True

    def version_of(self, task_id: str) -> int | None:
        """The stored status_version, None for a missing task."""
        current = self.tasks.get(task_id)
        return None if current is None else current.status_version

    def save(self, snapshot: TaskSnapshot, expect_version: int) -> bool:
        """True if saved (carrying the stored lease); False means ConcurrencyConflict."""
        current = self.tasks.get(snapshot.task_id)
        if current is None or current.status_version != expect_version:
            return False
        self.tasks[snapshot.task_id] = replace(
            snapshot, lease_owner=current.lease_owner, lease_until=current.lease_until
        )
        return True

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        """Write only the non-None fields; never the version; missing task: nothing."""
        current = self.tasks.get(task_id)
        if current is None:
            return
        if progress is not None:
            current = replace(current, progress=progress)
        if heartbeat_at is not None:
            current = replace(current, heartbeat_at=heartbeat_at)
        if lease_owner is not None:
            current = replace(current, lease_owner=lease_owner)
        if lease_until is not None:
            current = replace(current, lease_until=lease_until)
        self.tasks[task_id] = current

    def append(self, transition: Transition) -> None:
        """First row per (task_id, version) wins."""
        key = (transition.task_id, transition.version)
        if key not in self.history:
            self.history[key] = transition

    def history_of(self, task_id: str, since_version: int = 0) -> list[Transition]:
        """The task's rows with version > since_version, ascending."""
        rows = [
            row for (tid, version), row in self.history.items()
            if tid == task_id and version > since_version
        ]
        return sorted(rows, key=lambda row: row.version)

    def submit(self, command: Command) -> bool:
        """True if stored; False means the store must raise StoreError and change nothing."""
        if command.command_id in self.commands:
            return False
        self.commands[command.command_id] = command
        self.last_ops[command.command_id] = "submit"
        return True

    def adopt_claim(
        self, claimed: Iterable[Command], *, now: datetime | None = None,
        lease_seconds: float | None = None,
    ) -> None:
        """Record the store's (already validated) claim, made at ``now`` for ``lease_seconds``."""
        for command in claimed:
            self.commands[command.command_id] = command
            self.last_ops[command.command_id] = "claim"
            if now is not None and lease_seconds is not None:
                self.leases[command.command_id] = (now, lease_seconds)

    def complete(self, command_id: str, now: datetime, outcome: str | None) -> None:
        """Finish an unfinished command; unknown or finished: nothing."""
        command = self.commands.get(command_id)
        if command is not None and command.finished_at is None:
            self.commands[command_id] = replace(command, finished_at=now, outcome=outcome)
        if command is not None:
            self.last_ops[command_id] = "complete"

    def release(self, command_id: str) -> None:
        """Clear the lease of an unfinished command; unknown or finished: nothing."""
        command = self.commands.get(command_id)
        if command is not None and command.finished_at is None:
            self.commands[command_id] = replace(command, lease_until=None)
        if command is not None:
            self.last_ops[command_id] = "release"

    def adopt_prune(self, dropped: Iterable[str]) -> list[str]:
        """Drop the (already validated) tasks with their history; return the ids of their
        commands, which become *orphans*.

        Whether prune drops a pruned task's commands is a SHOULD (PRUNE-COMMANDS): a
        store may keep them. So the model cannot know whether an orphan is still stored.
        It keeps the orphans, and a caller settles the ambiguity: completing an unfinished
        orphan (a no-op where the store dropped it) makes it unclaimable either way, and
        :meth:`settle_submit` adopts the store's answer when an orphan's id is submitted
        again.
        """
        gone = set(dropped)
        for task_id in gone:
            del self.tasks[task_id]
        self.history = {k: v for k, v in self.history.items() if k[0] not in gone}
        found = sorted(cid for cid, c in self.commands.items() if c.task_id in gone)
        self.orphans.update(found)
        return found

    def settle_submit(self, command: Command, accepted: bool) -> None:
        """A command whose id was an orphan's was submitted: adopt what the store did
        (accepted: it had dropped the orphan; refused: it had kept it)."""
        self.orphans.discard(command.command_id)
        if accepted:
            self.commands[command.command_id] = command
            self.last_ops[command.command_id] = "submit"
