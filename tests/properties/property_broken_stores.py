"""Deliberately broken stores: each overrides one method of InMemoryTaskStore with a real bug.

Every one of them must be caught by a property or the state machine
(tests/properties/test_property_broken_stores.py). They emulate what a SQL store gets
wrong, on top of the in-memory store so that each has exactly one bug.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from broken_stores import (
    Base,
    PipelineTestedByTruthiness,
    PruneHistoryByPattern,
    TagRowsKeepCreatedAt,
)

from chongming_conformance import (
    Command,
    ConcurrencyConflict,
    Progress,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from reference_stores.memory import InMemoryTaskStore, _matches


class SaveRequiresNextVersion(Base):
    """Accepts a save only when the new version is exactly stored + 1 (forbids skips)."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        current = self.get(snapshot.task_id)
        if current is not None and snapshot.status_version != current.status_version + 1:
            raise ConcurrencyConflict(snapshot.task_id, expect_version, current.status_version)
        super().save(snapshot, expect_version=expect_version)


class TouchBumpsVersion(Base):
    """touch() increments status_version, as if it were a save."""

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        super().touch(
            task_id,
            progress=progress,
            heartbeat_at=heartbeat_at,
            lease_owner=lease_owner,
            lease_until=lease_until,
        )
        with self._lock:
            current = self._tasks.get(task_id)
            if current is not None:
                self._tasks[task_id] = replace(current, status_version=current.status_version + 1)


class SaveClobbersLease(Base):
    """save() writes the whole snapshot, lease columns included."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        super().save(snapshot, expect_version=expect_version)
        with self._lock:
            self._tasks[snapshot.task_id] = snapshot


def _like(pattern: str, text: str) -> bool:
    """SQL LIKE without ESCAPE: '%' is any run, '_' any one character (no other escaping)."""
    regex = "".join(".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern)
    return re.fullmatch(regex, text, re.DOTALL) is not None


class _QueryOverride(Base):
    def _hit(self, task: TaskSnapshot, q: TaskQuery) -> bool:
        raise NotImplementedError

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        with self._lock:
            found = [t for t in self._tasks.values() if self._hit(t, q)]
        found.sort(key=lambda t: (t.created_at, t.task_id), reverse=q.newest_first)
        return found if q.limit is None else found[: q.limit]


class TagSubstringMatch(_QueryOverride):
    """tag filter as a substring search on the encoded JSON text (LIKE '%io%')."""

    def _hit(self, task: TaskSnapshot, q: TaskQuery) -> bool:
        if q.tag is None:
            return _matches(task, q)
        text = ",".join(sorted(task.tags))
        return q.tag in text and _matches(task, replace(q, tag=None))


class UnescapedLikePrefix(_QueryOverride):
    """name_prefix as ``LIKE prefix || '%'`` with no escaping: % and _ are wildcards."""

    def _hit(self, task: TaskSnapshot, q: TaskQuery) -> bool:
        if q.name_prefix is None:
            return _matches(task, q)
        rest = replace(q, name_prefix=None)
        return _like(q.name_prefix + "%", task.name) and _matches(task, rest)


def _wall_clock_as_utc(value: datetime | None) -> datetime | None:
    return None if value is None else value.replace(tzinfo=UTC)


class StoresLocalTime(Base):
    """Drops the offset: stores the wall-clock time as if it were UTC."""

    _FIELDS = ("created_at", "updated_at", "started_at", "finished_at", "heartbeat_at",
               "lease_until")

    def _local(self, snapshot: TaskSnapshot) -> TaskSnapshot:
        moved = {f: _wall_clock_as_utc(getattr(snapshot, f)) for f in self._FIELDS}
        return snapshot.evolve(**moved)

    def create(self, snapshot: TaskSnapshot) -> None:
        super().create(self._local(snapshot))

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        super().save(self._local(snapshot), expect_version=expect_version)

    def append(self, transition: Transition) -> None:
        at = _wall_clock_as_utc(transition.at)
        assert at is not None
        super().append(replace(transition, at=at))


class ClaimIgnoresLease(Base):
    """claim_commands() takes every unfinished command, leased or not."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        with self._lock:
            free = sorted(
                (c for c in self._commands.values() if c.finished_at is None),
                key=lambda c: (c.created_at, c.command_id),
            )
            claimed = []
            for command in free[: max(limit, 0)]:
                leased = replace(command, lease_until=now + timedelta(seconds=lease_seconds))
                self._commands[command.command_id] = leased
                claimed.append(leased)
            return claimed


class ReleaseMarksComplete(Base):
    """release_command() finishes the command instead of handing it back."""

    def release_command(self, command_id: str, *, now: datetime) -> None:
        self.complete_command(command_id, now=now, outcome="released")


class PruneDropsNonTerminal(Base):
    """prune() counts every task, not only terminal ones, towards what it drops."""

    def prune(self, *, keep_terminal: int) -> int:
        with self._lock:
            ordered = sorted(self._tasks.values(), key=lambda t: (t.created_at, t.task_id))
            doomed = ordered[: max(len(ordered) - keep_terminal, 0)]
            doomed = [t for t in doomed if t.status.is_terminal or t.status is TaskStatus.RUNNING]
            for task in doomed:
                del self._tasks[task.task_id]
                self._history.pop(task.task_id, None)
            return len(doomed)


class _PadSpaceKeys(dict[str, TaskSnapshot]):
    """A dict whose keys compare as a PAD SPACE collation does: trailing spaces ignored."""

    def __getitem__(self, key: str) -> TaskSnapshot:
        return super().__getitem__(key.rstrip(" "))

    def __setitem__(self, key: str, value: TaskSnapshot) -> None:
        super().__setitem__(key.rstrip(" "), value)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key.rstrip(" "))

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.rstrip(" "))

    def get(self, key: str, default: TaskSnapshot | None = None) -> TaskSnapshot | None:  # type: ignore[override]
        return super().get(key.rstrip(" "), default)

    def pop(self, key: str, *default: TaskSnapshot | None) -> TaskSnapshot | None:  # type: ignore[override]
        return super().pop(key.rstrip(" "), *default)


class TaskIdPadSpace(Base):
    """Task ids are keys under a PAD SPACE collation (MariaDB utf8mb4_bin): 'build ' is 'build'."""

    def __init__(self) -> None:
        super().__init__()
        self._tasks = _PadSpaceKeys()


BROKEN_STORES: dict[str, type[InMemoryTaskStore]] = {
    "save requires exactly version+1": SaveRequiresNextVersion,
    "touch bumps the version": TouchBumpsVersion,
    "save clobbers the lease": SaveClobbersLease,
    "tag substring match": TagSubstringMatch,
    "unescaped LIKE in name_prefix": UnescapedLikePrefix,
    "local time stored": StoresLocalTime,
    "claim ignores an unexpired lease": ClaimIgnoresLease,
    "release marks complete": ReleaseMarksComplete,
    "prune drops a non-terminal task": PruneDropsNonTerminal,
    "task ids compared with PAD SPACE": TaskIdPadSpace,
    "tag rows keep a stale created_at": TagRowsKeepCreatedAt,
    "pipeline filter tested by truthiness": PipelineTestedByTruthiness,
    "history pruned by a LIKE on the id": PruneHistoryByPattern,
}
