"""The obviously-correct model the properties and the state machine compare stores with.

Deliberately written apart from ``reference_stores.memory`` (a store checked
against itself proves nothing): plain dicts, one loop per rule, no cleverness.
Where the contract allows several answers (ties in ``created_at`` for query,
claim and prune), the model does not pick one; the ``check_*`` functions
accept any valid answer, and the state machine then adopts the store's choice.

Every ``check_*`` raises ``AssertionError`` with a message naming the rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from .assertions import query_mismatch
from .model import Command, Progress, TaskQuery, TaskSnapshot, TaskStatus, Transition

__all__ = [
    "Model",
    "check_claim",
    "check_prune",
    "check_query",
    "expected_counts",
    "matches",
]


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


def _ordered_prefix_ok(
    result: Sequence[TaskSnapshot],
    candidates: Sequence[TaskSnapshot],
    *,
    descending: bool,
    count: int,
    what: str,
) -> None:
    """``result`` must be ``count`` distinct candidates, ordered, forming a valid prefix."""
    assert len(result) == count, (
        f"{what}: expected {count} task(s), got {len(result)}: "
        f"{[t.task_id for t in result]!r}"
    )
    ids = [t.task_id for t in result]
    assert len(set(ids)) == len(ids), f"{what}: a task is returned twice: {ids!r}"
    by_id = {t.task_id: t for t in candidates}
    for got in result:
        want = by_id.get(got.task_id)
        assert want is not None, f"{what}: task {got.task_id!r} should not match"
        assert got == want, (
            f"{what}: task {got.task_id!r} differs:\n  stored {want!r}\n  got    {got!r}"
        )
    keys = [instant(t.created_at) for t in result]
    assert keys == sorted(keys, reverse=descending), (
        f"{what}: not ordered by created_at {'descending' if descending else 'ascending'}: "
        f"{[(t.task_id, t.created_at.isoformat()) for t in result]!r}"
    )
    # With ties treated as unordered, a valid answer has exactly the created_at
    # values of the first `count` candidates in sorted order.
    all_keys = sorted((instant(t.created_at) for t in candidates), reverse=descending)
    assert keys == all_keys[:count], (
        f"{what}: not the {'newest' if descending else 'oldest'} {count} matching task(s); "
        f"got created_at {[k.isoformat() for k in keys]!r}, "
        f"expected {[k.isoformat() for k in all_keys[:count]]!r}"
    )


def check_query(
    result: Sequence[TaskSnapshot], tasks: Iterable[TaskSnapshot], q: TaskQuery | None
) -> None:
    """Is ``result`` a valid answer to ``q`` over ``tasks``? Ties in created_at: any order."""
    query = TaskQuery() if q is None else q
    hits = [t for t in tasks if matches(t, query)]
    count = len(hits) if query.limit is None else min(query.limit, len(hits))
    # Wrong membership first, worded with the values the filters read (name='build ').
    hit_ids = {t.task_id for t in hits}
    if any(t.task_id not in hit_ids for t in result) or (
        query.limit is None and len(result) != len(hits)
    ):
        message = query_mismatch(f"query({q!r})", result, hits, q, ordered=False)
        assert message is None, message
    _ordered_prefix_ok(
        list(result), hits, descending=query.newest_first, count=count, what=f"query({q!r})"
    )


def expected_counts(tasks: Iterable[TaskSnapshot]) -> dict[TaskStatus, int]:
    """Every status with its number of tasks, 0 included."""
    result = {status: 0 for status in TaskStatus}
    for task in tasks:
        result[task.status] += 1
    return result


def claimable(commands: Iterable[Command], now: datetime) -> list[Command]:
    """Unfinished commands with no lease or a lease that ended at or before ``now``."""
    return [
        c
        for c in commands
        if c.finished_at is None and (c.lease_until is None or c.lease_until <= now)
    ]


def check_claim(
    result: Sequence[Command],
    commands: Iterable[Command],
    *,
    now: datetime,
    lease_seconds: float,
    limit: int,
) -> None:
    """Valid claim: the ``limit`` oldest claimable commands (any among ties), each leased."""
    free = claimable(commands, now)
    count = min(max(limit, 0), len(free))
    what = f"claim_commands(now={now.isoformat()}, lease_seconds={lease_seconds}, limit={limit})"
    assert len(result) == count, (
        f"{what}: expected {count} command(s), got {len(result)}: "
        f"{[c.command_id for c in result]!r}"
    )
    ids = [c.command_id for c in result]
    assert len(set(ids)) == len(ids), f"{what}: a command is returned twice: {ids!r}"
    by_id = {c.command_id: c for c in free}
    until = now + timedelta(seconds=lease_seconds)
    for got in result:
        want = by_id.get(got.command_id)
        assert want is not None, (
            f"{what}: command {got.command_id!r} is not claimable (finished or leased)"
        )
        want = replace(want, lease_until=until)
        assert got == want, (
            f"{what}: command {got.command_id!r} differs:\n  want {want!r}\n  got  {got!r}"
        )
    keys = sorted(instant(c.created_at) for c in result)
    all_keys = sorted(instant(c.created_at) for c in free)
    assert keys == all_keys[:count], (
        f"{what}: did not take the oldest commands first; took created_at "
        f"{[k.isoformat() for k in keys]!r}, "
        f"oldest are {[k.isoformat() for k in all_keys[:count]]!r}"
    )


def check_prune(
    dropped: Iterable[str], returned: int, tasks: Mapping[str, TaskSnapshot], keep_terminal: int
) -> None:
    """Valid prune: only terminal tasks, the right number, none newer than a kept one."""
    gone = set(dropped)
    terminal = [t for t in tasks.values() if t.status.is_terminal]
    count = max(len(terminal) - max(keep_terminal, 0), 0)
    what = f"prune(keep_terminal={keep_terminal})"
    alive = sorted(i for i in gone if i in tasks and not tasks[i].status.is_terminal)
    assert not alive, f"{what}: dropped non-terminal task(s) {alive!r}"
    assert len(gone) == count, (
        f"{what}: dropped {len(gone)} task(s) {sorted(gone)!r}, expected {count}"
    )
    assert returned == count, f"{what}: returned {returned}, but {count} task(s) had to go"
    if gone and len(gone) < len(terminal):
        newest_dropped = max(instant(tasks[i].created_at) for i in gone)
        oldest_kept = min(instant(t.created_at) for t in terminal if t.task_id not in gone)
        assert newest_dropped <= oldest_kept, (
            f"{what}: dropped a task created at {newest_dropped.isoformat()} but kept an older "
            f"one created at {oldest_kept.isoformat()}"
        )


@dataclass
class Model:
    """What a correct store holds: tasks, history rows and commands, in plain dicts."""

    tasks: dict[str, TaskSnapshot] = field(default_factory=dict)
    history: dict[tuple[str, int], Transition] = field(default_factory=dict)
    commands: dict[str, Command] = field(default_factory=dict)

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
        return True

    def adopt_claim(self, claimed: Iterable[Command]) -> None:
        """Record the store's (already validated) claim."""
        for command in claimed:
            self.commands[command.command_id] = command

    def complete(self, command_id: str, now: datetime, outcome: str | None) -> None:
        """Finish an unfinished command; unknown or finished: nothing."""
        command = self.commands.get(command_id)
        if command is not None and command.finished_at is None:
            self.commands[command_id] = replace(command, finished_at=now, outcome=outcome)

    def release(self, command_id: str) -> None:
        """Clear the lease of an unfinished command; unknown or finished: nothing."""
        command = self.commands.get(command_id)
        if command is not None and command.finished_at is None:
            self.commands[command_id] = replace(command, lease_until=None)

    def adopt_prune(self, dropped: Iterable[str]) -> None:
        """Drop the (already validated) tasks with their history and commands."""
        gone = set(dropped)
        for task_id in gone:
            del self.tasks[task_id]
        self.history = {k: v for k, v in self.history.items() if k[0] not in gone}
        self.commands = {k: c for k, c in self.commands.items() if c.task_id not in gone}
