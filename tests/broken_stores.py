"""Deliberately broken stores: one realistic mistake each, on top of the in-memory store.

``BROKEN`` maps every contract-scope clause to the broken stores that violate
it. ``test_teeth.py`` runs the clause's contract tests against each one and
requires at least one to fail -- proof that the check can fail, and fails for
the mistake it claims to catch. Most of these mistakes come straight from the
backend guide's trap table.
"""

from __future__ import annotations

import fnmatch
import functools
import json
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

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
from chongming_conformance.protocol import PROTOCOL_METHODS
from reference_stores.memory import InMemoryTaskStore, _matches


def _refuse_after_close(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: InMemoryTaskStore, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise StoreError(f"{method.__name__}() on a closed store")
        return method(self, *args, **kwargs)

    return wrapper


class Base(InMemoryTaskStore):
    """The in-memory store; every method a broken store rewrites still refuses use after
    close(), so each store breaks only its one promise (not CLOSE-THEN-STOREERROR too)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in PROTOCOL_METHODS:
            if name != "close" and name in vars(cls):
                setattr(cls, name, _refuse_after_close(vars(cls)[name]))


def _sorted(tasks: list[TaskSnapshot], q: TaskQuery) -> list[TaskSnapshot]:
    tasks.sort(key=lambda t: (t.created_at, t.task_id), reverse=q.newest_first)
    return tasks if q.limit is None else tasks[: q.limit]


# -- structure -------------------------------------------------------------------------
class TouchWithoutLease(Base):
    """touch() predates the lease: it lacks lease_owner/lease_until."""

    def touch(  # type: ignore[override]
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
    ) -> None:
        super().touch(task_id, progress=progress, heartbeat_at=heartbeat_at)


class PositionalExpectVersion(Base):
    """save() takes expect_version positionally only."""

    def save(self, snapshot: TaskSnapshot, expect_version: int, /) -> None:  # type: ignore[override]
        super().save(snapshot, expect_version=expect_version)


class ClaimLimitDefaultThree(Base):
    """claim_commands() defaults limit to 3: a caller leaving it out gets 3, not 50."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 3
    ) -> Sequence[Command]:
        return super().claim_commands(now=now, lease_seconds=lease_seconds, limit=limit)


class ExpectVersionNotKeywordOnly(Base):
    """save() also accepts expect_version positionally (the * was forgotten)."""

    def save(self, snapshot: TaskSnapshot, expect_version: int) -> None:
        super().save(snapshot, expect_version=expect_version)


# -- create / get --------------------------------------------------------------------------
class CreateResetsVersion(Base):
    """create() assigns version 0 itself instead of storing the caller's."""

    def create(self, snapshot: TaskSnapshot) -> None:
        super().create(replace(snapshot, status_version=0))


class CreateOverwrites(Base):
    """create() is an upsert: a second create silently replaces a running task."""

    def create(self, snapshot: TaskSnapshot) -> None:
        self._tasks[snapshot.task_id] = snapshot


class GetRaisesOnMissing(Base):
    """get() raises KeyError for an unknown id."""

    def get(self, task_id: str) -> TaskSnapshot | None:
        return self._tasks[task_id]


# -- save -------------------------------------------------------------------------------------
class SaveOnlyStatus(Base):
    """save() writes only status and version (a partial UPDATE)."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        current = self.get(snapshot.task_id)
        merged = snapshot if current is None else replace(
            current, status=snapshot.status, status_version=snapshot.status_version
        )
        super().save(merged, expect_version=expect_version)


class SaveWithoutVersionCheck(Base):
    """save() is last-write-wins: no version check at all."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        current = self._tasks.get(snapshot.task_id)
        if current is None:
            raise ConcurrencyConflict(snapshot.task_id, expect_version, None)
        self._tasks[snapshot.task_id] = replace(
            snapshot, lease_owner=current.lease_owner, lease_until=current.lease_until
        )


class SaveConflictWithoutDetails(Base):
    """The conflict carries no actual version and the wrong expected one."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        try:
            super().save(snapshot, expect_version=expect_version)
        except ConcurrencyConflict:
            raise ConcurrencyConflict(snapshot.task_id, snapshot.status_version, None) from None


class SaveAutoRetries(Base):
    """On conflict, save() re-reads the row and writes again -- hiding a second writer."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        try:
            super().save(snapshot, expect_version=expect_version)
        except ConcurrencyConflict as exc:
            if exc.actual is None:
                raise
            super().save(snapshot, expect_version=exc.actual)


class SaveRequiresSuccessor(Base):
    """save() insists the new version is exactly expect_version + 1."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        if snapshot.status_version != expect_version + 1:
            current = self.get(snapshot.task_id)
            actual = None if current is None else current.status_version
            raise ConcurrencyConflict(snapshot.task_id, expect_version, actual)
        super().save(snapshot, expect_version=expect_version)


class SaveWritesLease(Base):
    """save() writes the whole snapshot, lease columns included."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        super().save(snapshot, expect_version=expect_version)
        self._tasks[snapshot.task_id] = snapshot


class SaveUpserts(Base):
    """save() of a missing task inserts it."""

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        if snapshot.task_id not in self._tasks:
            self._tasks[snapshot.task_id] = snapshot
            return
        super().save(snapshot, expect_version=expect_version)


# -- query ----------------------------------------------------------------------------------
class QueryNoneReturnsNothing(Base):
    """query(None) is treated as 'no query', returning nothing."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        return [] if query is None else super().query(query)


class QueryEmptyStoreRaises(Base):
    """query() of an empty store raises (an aggregate over no rows gave NULL)."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        if not self._tasks:
            raise StoreError("no rows")
        return super().query(query)


class QueryIgnoresNewestFirst(Base):
    """newest_first is ignored."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        return super().query(replace(q, newest_first=False))


class QueryDropsTies(Base):
    """Results are keyed by created_at, so tasks created at the same instant collapse."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        by_time = {t.created_at: t for t in super().query(query)}
        return list(by_time.values())


class QueryIgnoresStatuses(Base):
    """Only the first status of the set is used."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if q.statuses:
            first = min(q.statuses, key=lambda s: s.value)
            q = replace(q, statuses=frozenset({first}))
        return super().query(q)


class QueryNameCaseInsensitive(Base):
    """name compares case-insensitively (a collation default)."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if q.name is None:
            return super().query(q)
        rest = super().query(replace(q, name=None, limit=None))
        found = [t for t in rest if t.name.lower() == q.name.lower()]
        return _sorted(found, q)


class QueryPrefixIsLike(Base):
    """name_prefix goes into an unescaped, case-insensitive LIKE: % and _ are wildcards."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if q.name_prefix is None:
            return super().query(q)
        pattern = "".join(
            ".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in q.name_prefix
        )
        rest = super().query(replace(q, name_prefix=None, limit=None))
        found = [t for t in rest if re.match(pattern, t.name, re.IGNORECASE | re.DOTALL)]
        return _sorted(found, q)


class QueryTagSubstring(Base):
    """tag is a substring search on the joined tag text: 'io' matches 'ios'."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if q.tag is None:
            return super().query(q)
        rest = super().query(replace(q, tag=None, limit=None))
        found = [t for t in rest if q.tag in ",".join(sorted(t.tags))]
        return _sorted(found, q)


class QueryBucketZeroIsNone(Base):
    """bucket 0 is falsy, so it is stored as 'no bucket'."""

    def create(self, snapshot: TaskSnapshot) -> None:
        super().create(replace(snapshot, bucket=snapshot.bucket or None))


class QueryPipelinePrefix(Base):
    """pipeline_run_id matches as a prefix."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if q.pipeline_run_id is None:
            return super().query(q)
        rest = super().query(replace(q, pipeline_run_id=None, limit=None))
        found = [t for t in rest if (t.pipeline_run_id or "").startswith(q.pipeline_run_id)]
        return _sorted(found, q)


class QueryIgnoresLimit(Base):
    """limit is ignored."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        return super().query(replace(query or TaskQuery(), limit=None))


class QueryLimitZeroIsNone(Base):
    """limit=0 is falsy, so it means 'no limit'."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        return super().query(replace(q, limit=q.limit or None))


class QueryFiltersOred(Base):
    """Filters are ORed: a task matching any one filter is returned."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        single = [
            TaskQuery(statuses=q.statuses),
            TaskQuery(name=q.name),
            TaskQuery(name_prefix=q.name_prefix),
            TaskQuery(tag=q.tag),
            TaskQuery(buckets=q.buckets),
            TaskQuery(pipeline_run_id=q.pipeline_run_id),
        ]
        active = [s for s in single if s != TaskQuery()]
        if not active:
            return super().query(q)
        found = [t for t in self._tasks.values() if any(_matches(t, s) for s in active)]
        return _sorted(found, q)


class QueryEmptySetIsNoFilter(Base):
    """An empty statuses/buckets set is treated like None (`if q.statuses:`)."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        return super().query(
            replace(q, statuses=q.statuses or None, buckets=q.buckets or None)
        )


# -- text compared as something other than code points ------------------------------------
def _codec_escape(text: str) -> str:
    """What the codec (Python's json) writes: ``\\u000b`` for U+000B."""
    return json.dumps(text)


def _engine_escape(text: str) -> str:
    """What an engine's JSON_QUOTE writes: the same, except ``\\u000B`` for U+000B only."""
    return "".join("\\u000B" if ch == "\x0b" else json.dumps(ch)[1:-1] for ch in text)


def _engine_quote(text: str) -> str:
    return f'"{_engine_escape(text)}"'


def _pad_space(text: str) -> str:
    """A PAD SPACE collation's view: trailing spaces do not count."""
    return text.rstrip(" ")


class _TextComparedAs(Base):
    """One filter compares ``key(stored)`` with ``probe(wanted)`` instead of the code points."""

    filter: str = ""  # "name", "name_prefix", "tag" or "pipeline_run_id"

    @staticmethod
    def key(text: str) -> str:
        return text

    @classmethod
    def probe(cls, text: str) -> str:
        return cls.key(text)

    def _hit(self, task: TaskSnapshot, wanted: str) -> bool:
        probe = self.probe(wanted)
        if self.filter == "tag":
            return any(self.key(tag) == probe for tag in task.tags)
        if self.filter == "name_prefix":
            return self.key(task.name).startswith(probe)
        stored = task.name if self.filter == "name" else task.pipeline_run_id
        return stored is not None and self.key(stored) == probe

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        wanted = getattr(q, self.filter)
        if wanted is None:
            return super().query(q)
        rest = super().query(replace(q, limit=None, **{self.filter: None}))
        return _sorted([t for t in rest if self._hit(t, wanted)], q)


class TagMatchedAsEscapedJson(_TextComparedAs):
    """tag matches escaped JSON text (MariaDB JSON_CONTAINS): the codec wrote \\u000b, the
    query's JSON_QUOTE writes \\u000B -- tags holding U+000B never match."""

    filter = "tag"
    key = staticmethod(_codec_escape)
    probe = staticmethod(_engine_quote)  # type: ignore[assignment]


class NameMatchedAsEscapedText(_TextComparedAs):
    """name is compared as escaped text, escaped differently (\\u000B) on the query side."""

    filter = "name"
    key = staticmethod(_codec_escape)
    probe = staticmethod(_engine_quote)  # type: ignore[assignment]


class PrefixMatchedAsEscapedText(_TextComparedAs):
    """name_prefix is matched on escaped text; the query side escapes U+000B as \\u000B."""

    filter = "name_prefix"

    @staticmethod
    def key(text: str) -> str:
        return _codec_escape(text)[1:-1]

    @staticmethod
    def probe(text: str) -> str:  # type: ignore[override]
        return _engine_escape(text)


class TagPadSpace(_TextComparedAs):
    """tags compare under a PAD SPACE collation: 'io ' matches 'io'."""

    filter = "tag"
    key = staticmethod(_pad_space)


class NamePadSpace(_TextComparedAs):
    """name compares under a PAD SPACE collation (utf8mb4_bin): 'build ' matches 'build'."""

    filter = "name"
    key = staticmethod(_pad_space)


class PrefixPadSpace(_TextComparedAs):
    """name_prefix compares SUBSTR(name, 1, len) = prefix under PAD SPACE."""

    filter = "name_prefix"

    def _hit(self, task: TaskSnapshot, wanted: str) -> bool:
        return _pad_space(task.name[: len(wanted)]) == _pad_space(wanted)


class PipelinePadSpace(_TextComparedAs):
    """pipeline_run_id compares under PAD SPACE: 'build ' matches 'build'."""

    filter = "pipeline_run_id"
    key = staticmethod(_pad_space)


class TagCaseFolded(_TextComparedAs):
    """tags compare case-folded (a _ci collation): 'STRASSE' matches 'straße'."""

    filter = "tag"
    key = staticmethod(str.casefold)


class NameCaseFolded(_TextComparedAs):
    """name compares with full case folding: 'STRASSE' matches 'straße'."""

    filter = "name"
    key = staticmethod(str.casefold)


class PrefixCaseFolded(_TextComparedAs):
    """name_prefix compares case-folded (ILIKE / a _ci collation)."""

    filter = "name_prefix"
    key = staticmethod(str.casefold)


class PipelineCaseFolded(_TextComparedAs):
    """pipeline_run_id compares case-folded."""

    filter = "pipeline_run_id"
    key = staticmethod(str.casefold)


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


class NameNormalised(_TextComparedAs):
    """name compares after NFC normalisation: 'cafe' + U+0301 matches 'café'."""

    filter = "name"
    key = staticmethod(_nfc)


class TagNormalised(_TextComparedAs):
    """tags compare after NFC normalisation."""

    filter = "tag"
    key = staticmethod(_nfc)


class NameTruncatedAtNul(_TextComparedAs):
    """name is compared as a C string: everything from the first NUL on is ignored."""

    filter = "name"

    @staticmethod
    def key(text: str) -> str:
        return text.split("\x00", 1)[0]


class TaskIdPadSpace(Base):
    """task_id is a PAD SPACE primary key: 'build ' and 'build' are the same row."""

    def _same(self, task_id: str) -> str | None:
        return next((k for k in self._tasks if _pad_space(k) == _pad_space(task_id)), None)

    def create(self, snapshot: TaskSnapshot) -> None:
        if self._same(snapshot.task_id) is not None:
            raise StoreError(f"duplicate key {snapshot.task_id!r}")
        super().create(snapshot)

    def get(self, task_id: str) -> TaskSnapshot | None:
        same = self._same(task_id)
        return None if same is None else self._tasks[same]


class TaskIdCaseFolded(Base):
    """get() looks the id up case-insensitively (a _ci collation on the key)."""

    def get(self, task_id: str) -> TaskSnapshot | None:
        wanted = task_id.casefold()
        return next((t for k, t in self._tasks.items() if k.casefold() == wanted), None)


class HistoryTaskIdCaseFolded(Base):
    """history() selects rows by a case-insensitive task_id comparison."""

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        rows = [
            row
            for key, by_version in self._history.items()
            if key.casefold() == task_id.casefold()
            for row in by_version.values()
            if row.version > since_version
        ]
        return sorted(rows, key=lambda r: r.version)


class CommandIdPadSpace(Base):
    """submit is INSERT IGNORE on a PAD SPACE key: 'c ' is silently dropped after 'c'."""

    def submit_command(self, command: Command) -> None:
        padded = _pad_space(command.command_id)
        if command.command_id not in self._commands and any(
            _pad_space(k) == padded for k in self._commands
        ):
            return
        super().submit_command(command)


# -- counts --------------------------------------------------------------------------------
class CountsCachedAtCreate(Base):
    """counts() is a counter updated by create() only; save() forgets to move it."""

    def __init__(self) -> None:
        super().__init__()
        self._counter = dict.fromkeys(TaskStatus, 0)

    def create(self, snapshot: TaskSnapshot) -> None:
        super().create(snapshot)
        self._counter[snapshot.status] += 1

    def counts(self) -> Mapping[TaskStatus, int]:
        return dict(self._counter)


class CountsOmitsZeros(Base):
    """counts() is a plain GROUP BY: statuses with no tasks are missing."""

    def counts(self) -> Mapping[TaskStatus, int]:
        return {k: v for k, v in super().counts().items() if v}


# -- history -----------------------------------------------------------------------------------
class AppendDuplicates(Base):
    """append() is a plain INSERT into a list."""

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[Transition] = []

    def append(self, transition: Transition) -> None:
        self._rows.append(transition)

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        rows = [t for t in self._rows if t.task_id == task_id and t.version > since_version]
        return sorted(rows, key=lambda t: t.version)


class AppendUpserts(Base):
    """append() replaces an existing row (INSERT OR REPLACE)."""

    def append(self, transition: Transition) -> None:
        self._history.setdefault(transition.task_id, {})[transition.version] = transition


class HistoryUnordered(Base):
    """history() returns rows in append order."""

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        rows = self._history.get(task_id, {})
        return [t for t in rows.values() if t.version > since_version]


class HistoryIgnoresSince(Base):
    """history() ignores since_version."""

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        return super().history(task_id)


class HistorySinceInclusive(Base):
    """history() uses >= since_version."""

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        return super().history(task_id, since_version=since_version - 1 if since_version else 0)


class HistoryPrefixTask(Base):
    """history() selects with LIKE task_id || '%'."""

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        rows = [
            t
            for tid, versions in self._history.items()
            if tid.startswith(task_id)
            for t in versions.values()
            if t.version > since_version
        ]
        return sorted(rows, key=lambda t: t.version)


class HistoryUnknownRaises(Base):
    """history() raises KeyError for a task with no rows."""

    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[Transition]:
        if task_id not in self._history:
            raise KeyError(task_id)
        return super().history(task_id, since_version=since_version)


class TransitionDropsReason(Base):
    """append() has no reason column."""

    def append(self, transition: Transition) -> None:
        super().append(replace(transition, reason=None))


# -- touch ----------------------------------------------------------------------------------
class TouchBumpsVersion(Base):
    """touch() goes through the versioned path and bumps status_version."""

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {
            "progress": progress,
            "heartbeat_at": heartbeat_at,
            "lease_owner": lease_owner,
            "lease_until": lease_until,
        }
        super().touch(task_id, **kwargs)
        current = self._tasks.get(task_id)
        if current is not None and any(v is not None for v in kwargs.values()):
            self._tasks[task_id] = replace(current, status_version=current.status_version + 1)


class TouchWritesAllFields(Base):
    """touch() writes all four columns, None included."""

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
        if current is not None:
            self._tasks[task_id] = replace(
                current,
                progress=progress,
                heartbeat_at=heartbeat_at,
                lease_owner=lease_owner,
                lease_until=lease_until,
            )


class TouchMissingRaises(Base):
    """touch() of an unknown task raises."""

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {
            "progress": progress,
            "heartbeat_at": heartbeat_at,
            "lease_owner": lease_owner,
            "lease_until": lease_until,
        }
        if task_id not in self._tasks:
            raise StoreError(f"no task {task_id!r}")
        super().touch(task_id, **kwargs)


class TouchIgnoresLease(Base):
    """touch() only knows progress and heartbeat; the lease arguments are dropped."""

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {
            "progress": progress,
            "heartbeat_at": heartbeat_at,
            "lease_owner": lease_owner,
            "lease_until": lease_until,
        }
        kwargs.pop("lease_owner", None)
        kwargs.pop("lease_until", None)
        super().touch(task_id, **kwargs)


class TouchDerivesLease(Base):
    """touch() derives the lease from the heartbeat (heartbeat + 30 s)."""

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {
            "progress": progress,
            "heartbeat_at": heartbeat_at,
            "lease_owner": lease_owner,
            "lease_until": lease_until,
        }
        heartbeat = kwargs.get("heartbeat_at")
        if heartbeat is not None:
            kwargs["lease_until"] = heartbeat + timedelta(seconds=30)
        super().touch(task_id, **kwargs)


# -- commands ------------------------------------------------------------------------------
class ClaimReturnsUnleasedCopy(Base):
    """claim_commands() returns the commands as they were before the lease."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        claimed = super().claim_commands(now=now, lease_seconds=lease_seconds, limit=limit)
        return [replace(c, lease_until=None) for c in claimed]


class SubmitOverwrites(Base):
    """submit_command() replaces a command with the same id."""

    def submit_command(self, command: Command) -> None:
        self._commands[command.command_id] = command


class ClaimIgnoresLease(Base):
    """claim_commands() only checks finished_at."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        self._commands = {k: replace(c, lease_until=None) for k, c in self._commands.items()}
        return super().claim_commands(now=now, lease_seconds=lease_seconds, limit=limit)


class ClaimBoundaryExclusive(Base):
    """A lease is treated as expired only strictly after lease_until."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        tick = timedelta(microseconds=1)
        held = {k for k, c in self._commands.items() if c.lease_until == now}
        for k in held:  # pretend these are still leased for one more microsecond
            self._commands[k] = replace(self._commands[k], lease_until=now + tick)
        try:
            return super().claim_commands(now=now, lease_seconds=lease_seconds, limit=limit)
        finally:
            for k in held:
                if self._commands[k].lease_until == now + tick:
                    self._commands[k] = replace(self._commands[k], lease_until=now)


class ClaimNeverExpires(Base):
    """Only never-leased commands are claimable: a crashed holder blocks its command forever."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        free = sorted(
            (c for c in self._commands.values() if c.finished_at is None and c.lease_until is None),
            key=lambda c: (c.created_at, c.command_id),
        )[:limit]
        until = now + timedelta(seconds=lease_seconds)
        for c in free:
            self._commands[c.command_id] = replace(c, lease_until=until)
        return [self._commands[c.command_id] for c in free]


class ClaimInsertionOrder(Base):
    """claim_commands() takes commands in insertion order, not created_at."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        free = [
            c
            for c in self._commands.values()
            if c.finished_at is None and (c.lease_until is None or c.lease_until <= now)
        ][:limit]
        until = now + timedelta(seconds=lease_seconds)
        for c in free:
            self._commands[c.command_id] = replace(c, lease_until=until)
        return [self._commands[c.command_id] for c in free]


class ClaimLeasesBeyondLimit(Base):
    """claim_commands() leases every free command but returns only `limit` of them."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        return super().claim_commands(now=now, lease_seconds=lease_seconds, limit=10**9)[:limit]


class CompleteOnlyClearsLease(Base):
    """complete_command() clears the lease instead of finishing the command."""

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        self.release_command(command_id, now=now)


class CompleteRaisesWhenDone(Base):
    """complete_command() raises for an already-completed command (and an unknown one): a
    controller completing again after a lost reply gets an error for ever."""

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        command = self._commands.get(command_id)
        if command is None or command.finished_at is not None:
            raise StoreError(f"command {command_id!r} is not open")
        super().complete_command(command_id, now=now, outcome=outcome)


class CompleteUnknownKeyError(Base):
    """complete_command() looks the command up with ``self._commands[command_id]``: an id
    never submitted raises KeyError, where the store may do nothing or raise StoreError."""

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        command = self._commands[command_id]
        if command.finished_at is None:
            self._commands[command_id] = replace(command, finished_at=now, outcome=outcome)


class ReleaseCompletes(Base):
    """release_command() is implemented as complete_command() -- a silent drop."""

    def release_command(self, command_id: str, *, now: datetime) -> None:
        self.complete_command(command_id, now=now, outcome="released")


class ReleaseReopens(Base):
    """release_command() clears finished_at too, resurrecting completed commands."""

    def release_command(self, command_id: str, *, now: datetime) -> None:
        command = self._commands.get(command_id)
        if command is not None:
            self._commands[command_id] = replace(command, lease_until=None, finished_at=None)


class ReleaseUnknownKeyError(Base):
    """release_command() looks the command up with ``self._commands[command_id]``: an id
    never submitted raises KeyError, where the store may do nothing or raise StoreError."""

    def release_command(self, command_id: str, *, now: datetime) -> None:
        command = self._commands[command_id]
        if command.finished_at is None:
            self._commands[command_id] = replace(command, lease_until=None)


# -- prune -------------------------------------------------------------------------------------
class PruneAnyStatus(Base):
    """prune() drops the oldest tasks whatever their status."""

    def prune(self, *, keep_terminal: int) -> int:
        ordered = sorted(self._tasks.values(), key=lambda t: (t.created_at, t.task_id))
        doomed = ordered[: max(len(ordered) - keep_terminal, 0)]
        for t in doomed:
            del self._tasks[t.task_id]
            self._history.pop(t.task_id, None)
        return len(doomed)


class PruneNewestFirst(Base):
    """prune() drops the newest terminal tasks and keeps the oldest."""

    def prune(self, *, keep_terminal: int) -> int:
        terminal = sorted(
            (t for t in self._tasks.values() if t.status.is_terminal),
            key=lambda t: (t.created_at, t.task_id),
        )
        doomed = terminal[keep_terminal:]
        for t in doomed:
            del self._tasks[t.task_id]
            self._history.pop(t.task_id, None)
        return len(doomed)


class PruneKeepsHistory(Base):
    """prune() deletes tasks but leaves their transitions behind."""

    def prune(self, *, keep_terminal: int) -> int:
        saved = {k: dict(v) for k, v in self._history.items()}
        dropped = super().prune(keep_terminal=keep_terminal)
        self._history = saved
        return dropped


class PruneKeepsCommands(Base):
    """prune() deletes tasks but leaves their commands claimable."""

    def prune(self, *, keep_terminal: int) -> int:
        saved = dict(self._commands)
        dropped = super().prune(keep_terminal=keep_terminal)
        self._commands = saved
        return dropped


# -- round-trip and time ---------------------------------------------------------------------
class DropsProgressTotal(Base):
    """The progress_total column was forgotten."""

    def create(self, snapshot: TaskSnapshot) -> None:
        if snapshot.progress is not None:
            snapshot = replace(snapshot, progress=replace(snapshot.progress, total=None))
        super().create(snapshot)

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        if snapshot.progress is not None:
            snapshot = replace(snapshot, progress=replace(snapshot.progress, total=None))
        super().save(snapshot, expect_version=expect_version)


def _wall_clock_as_utc(value: datetime | None) -> datetime | None:
    """What storing local wall-clock time and reading it back as UTC does."""
    return None if value is None else value.replace(tzinfo=UTC)


class StoresLocalTime(Base):
    """Datetimes are stored as their local wall-clock text and read back as UTC."""

    _FIELDS = ("created_at", "updated_at", "started_at", "finished_at", "heartbeat_at",
               "lease_until")

    def create(self, snapshot: TaskSnapshot) -> None:
        changes = {f: _wall_clock_as_utc(getattr(snapshot, f)) for f in self._FIELDS}
        super().create(snapshot.evolve(**changes))

    def append(self, transition: Transition) -> None:
        at = _wall_clock_as_utc(transition.at)
        assert at is not None
        super().append(replace(transition, at=at))

    def submit_command(self, command: Command) -> None:
        created = _wall_clock_as_utc(command.created_at)
        assert created is not None
        super().submit_command(replace(command, created_at=created))


class TruncatesMicroseconds(Base):
    """Datetimes are stored to the second (a DATETIME(0)-style column)."""

    def create(self, snapshot: TaskSnapshot) -> None:
        super().create(replace(snapshot, created_at=snapshot.created_at.replace(microsecond=0)))

    def append(self, transition: Transition) -> None:
        super().append(replace(transition, at=transition.at.replace(microsecond=0)))


class SortsByWallClockText(Base):
    """query() and claim order by the ISO text of the original datetimes."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        found = [t for t in self._tasks.values() if _matches(t, q)]
        found.sort(key=lambda t: t.created_at.isoformat(), reverse=q.newest_first)
        return found if q.limit is None else found[: q.limit]

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        text = now.isoformat()
        free = sorted(
            (
                c
                for c in self._commands.values()
                if c.finished_at is None
                and (c.lease_until is None or c.lease_until.isoformat() <= text)
            ),
            key=lambda c: c.created_at.isoformat(),
        )[:limit]
        until = now + timedelta(seconds=lease_seconds)
        for c in free:
            self._commands[c.command_id] = replace(c, lease_until=until)
        return [self._commands[c.command_id] for c in free]


class LeaseExpiryByWallClock(Base):
    """Lease expiry compares wall-clock readings, ignoring the offsets."""

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        wall = now.replace(tzinfo=UTC)  # its wall clock, read as if it were UTC
        return super().claim_commands(now=wall, lease_seconds=lease_seconds, limit=limit)


class CommandDropsIssuedBy(Base):
    """The issued_by column was forgotten; every command comes back as 'unknown'."""

    def submit_command(self, command: Command) -> None:
        super().submit_command(replace(command, issued_by="unknown"))


# -- close --------------------------------------------------------------------------------------
class CloseTwiceRaises(Base):
    """close() raises when the store is already closed."""

    def close(self) -> None:
        if self._closed:
            raise StoreError("already closed")
        super().close()


class CloseClosesEveryStore(Base):
    """close() tears down what every store of the process shares (a module-level pool)."""

    _opened: list[InMemoryTaskStore] = []  # noqa: RUF012 -- shared on purpose: the bug

    def __init__(self) -> None:
        super().__init__()
        CloseClosesEveryStore._opened.append(self)

    def close(self) -> None:
        for store in CloseClosesEveryStore._opened:
            InMemoryTaskStore.close(store)
        CloseClosesEveryStore._opened.clear()


class UsableAfterClose(Base):
    """close() does nothing; the store keeps working."""

    def close(self) -> None:
        pass


class AttributeErrorAfterClose(Base):
    """close() drops the data structures; later calls die with AttributeError/TypeError."""

    def close(self) -> None:
        self._tasks = None  # type: ignore[assignment]
        self._commands = None  # type: ignore[assignment]
        self._history = None  # type: ignore[assignment]
        self._closed = False


#: clause id -> broken stores that violate it (every contract-scope clause appears).
# -- blind spots of an outside audit (issue 23): realistic bugs, one each ----------------
class LimitBeforeFilter(Base):
    """LIMIT taken before the WHERE: the first `limit` tasks in order, then the filter."""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        everything = list(super().query(TaskQuery(newest_first=q.newest_first, limit=q.limit)))
        return [t for t in everything if _matches(t, q)]


class PruneByUpdatedAt(Base):
    """prune() orders terminal tasks by updated_at, not created_at."""

    def prune(self, *, keep_terminal: int) -> int:
        terminal = sorted((t for t in self._tasks.values() if t.status.is_terminal),
                          key=lambda t: (t.updated_at, t.task_id))
        doomed = terminal[: max(len(terminal) - keep_terminal, 0)]
        for t in doomed:
            del self._tasks[t.task_id]
            self._history.pop(t.task_id, None)
        gone = {t.task_id for t in doomed}
        self._commands = {k: c for k, c in self._commands.items() if c.task_id not in gone}
        return len(doomed)


class WholeSecondLeases(Base):
    """The lease is kept as a whole-second TTL (Redis ``EX``): a 1.5 s lease ends after 1 s.

    The command handed out still says ``lease_until = now + 1.5 s``; only the expiry the
    store enforces is cut.
    """

    def __init__(self) -> None:
        super().__init__()
        self._expires: dict[str, datetime] = {}

    def claim_commands(
        self, *, now: datetime, lease_seconds: float, limit: int = 50
    ) -> Sequence[Command]:
        # Commands whose whole-second TTL ran out look unleased to the claim.
        saved = {}
        for cid, ends in self._expires.items():
            c = self._commands.get(cid)
            if c is not None and c.lease_until is not None and ends <= now:
                saved[cid] = c.lease_until
                self._commands[cid] = replace(c, lease_until=None)
        claimed = list(super().claim_commands(now=now, lease_seconds=lease_seconds, limit=limit))
        for cid, until in saved.items():
            c = self._commands[cid]
            if c.lease_until is None:
                self._commands[cid] = replace(c, lease_until=until)
        for c in claimed:
            self._expires[c.command_id] = now + timedelta(seconds=int(lease_seconds))
        return claimed


class _PatternPrefix(Base):
    """name_prefix handed to a pattern language unescaped."""

    def _prefix_matches(self, name: str, prefix: str) -> bool:
        raise NotImplementedError

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if q.name_prefix is None:
            return super().query(q)
        prefix = q.name_prefix
        found = [t for t in super().query(replace(q, name_prefix=None, limit=None))
                 if self._prefix_matches(t.name, prefix)]
        return _sorted(found, q)


class GlobPrefix(_PatternPrefix):
    """name_prefix as SQLite ``name GLOB prefix || '*'``: ``*``, ``?`` and ``[`` are patterns."""

    def _prefix_matches(self, name: str, prefix: str) -> bool:
        return fnmatch.fnmatchcase(name, prefix + "*")


class RegexPrefix(_PatternPrefix):
    """name_prefix as a regular expression anchored at the start (``REGEXP '^' || prefix``)."""

    def _prefix_matches(self, name: str, prefix: str) -> bool:
        try:
            return re.match(prefix, name) is not None
        except re.error as exc:
            raise StoreError(f"invalid name_prefix pattern: {exc}") from exc


class JsonPathTag(Base):
    """tag looked up with a JSON path built from it (``json_extract(tags, '$.' || tag)``):
    a tag holding ``.`` or ``[`` becomes a path into nested keys, and is never found."""

    @staticmethod
    def _has(tags: frozenset[str], tag: str) -> bool:
        path = re.split(r"[.\[]", tag)  # '$.a.b' walks a, then b; '$.a[0]' walks a, then 0]
        obj: object = {t: True for t in tags}
        for step in path:
            if not isinstance(obj, dict) or step not in obj:
                return False
            obj = obj[step]
        return obj is True

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if q.tag is None:
            return super().query(q)
        tag = q.tag
        found = [t for t in super().query(replace(q, tag=None, limit=None))
                 if self._has(t.tags, tag)]
        return _sorted(found, q)


#: What a VARCHAR(200) column allows.
_SHORT_COLUMN = 200


class ShortIdColumns(Base):
    """Ids and tags live in VARCHAR(200) columns: a 255-character id is refused (with
    StoreError: no corruption, so LENGTH-IDS holds; only the SHOULD on capacity fails)."""

    def _check(self, *values: str | None) -> None:
        for value in values:
            if value is not None and len(value) > _SHORT_COLUMN:
                raise StoreError(f"Data too long for column ({len(value)} > {_SHORT_COLUMN})")

    def create(self, snapshot: TaskSnapshot) -> None:
        self._check(snapshot.task_id, snapshot.pipeline_run_id, *snapshot.tags)
        super().create(snapshot)

    def submit_command(self, command: Command) -> None:
        self._check(command.command_id, command.task_id, command.issued_by)
        super().submit_command(command)


def _cut(value: str | None) -> str | None:
    return None if value is None else value[:_SHORT_COLUMN]


class TruncatedIds(Base):
    """Ids, tags, run ids, lease owners and issuers are cut to what a VARCHAR(200) column
    keeps, silently (MySQL outside strict mode): a 255-character id is stored as another,
    which a read by the id sent never finds."""

    def create(self, snapshot: TaskSnapshot) -> None:
        super().create(replace(
            snapshot, task_id=snapshot.task_id[:_SHORT_COLUMN],
            pipeline_run_id=_cut(snapshot.pipeline_run_id),
            tags=frozenset(t[:_SHORT_COLUMN] for t in snapshot.tags),
            lease_owner=_cut(snapshot.lease_owner)))

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        super().touch(task_id, progress=progress, heartbeat_at=heartbeat_at,
                      lease_owner=_cut(lease_owner), lease_until=lease_until)

    def append(self, transition: Transition) -> None:
        super().append(replace(transition, task_id=transition.task_id[:_SHORT_COLUMN]))

    def submit_command(self, command: Command) -> None:
        super().submit_command(replace(
            command, command_id=command.command_id[:_SHORT_COLUMN],
            task_id=command.task_id[:_SHORT_COLUMN],
            issued_by=command.issued_by[:_SHORT_COLUMN]))


class TruncatedText(Base):
    """Names and free text are cut to what a VARCHAR(512) column keeps (silently)."""

    _KEEP = 512

    def create(self, snapshot: TaskSnapshot) -> None:
        cut = self._KEEP
        progress = snapshot.progress
        if progress is not None and progress.message is not None:
            progress = replace(progress, message=progress.message[:cut])
        failure = snapshot.failure
        if failure is not None:
            failure = replace(failure, detail=None if failure.detail is None
                              else failure.detail[:cut])
        super().create(replace(snapshot, name=snapshot.name[:cut], progress=progress,
                               failure=failure))


#: The longest name, progress message and command outcome :class:`ShortTextColumns` holds.
_SHORT_TEXT = 255


class ShortTextColumns(Base):
    """Names, progress messages and command outcomes live in VARCHAR(255) columns: longer
    ones are refused with StoreError (no corruption, so LENGTH-TEXT holds; only the SHOULD on
    capacity fails). The failure and the transition reason, which the controller writes
    itself, are in TEXT columns and taken."""

    def _check(self, *values: str | None) -> None:
        for value in values:
            if value is not None and len(value) > _SHORT_TEXT:
                raise StoreError(f"Data too long for column ({len(value)} > {_SHORT_TEXT})")

    def create(self, snapshot: TaskSnapshot) -> None:
        self._check(snapshot.name, None if snapshot.progress is None
                    else snapshot.progress.message)
        super().create(snapshot)

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        current = self._tasks.get(snapshot.task_id)
        if current is not None and current.status_version == expect_version:
            self._check(snapshot.name, None if snapshot.progress is None
                        else snapshot.progress.message)
        super().save(snapshot, expect_version=expect_version)

    def touch(
        self,
        task_id: str,
        *,
        progress: Progress | None = None,
        heartbeat_at: datetime | None = None,
        lease_owner: str | None = None,
        lease_until: datetime | None = None,
    ) -> None:
        if task_id in self._tasks and progress is not None:
            self._check(progress.message)
        super().touch(task_id, progress=progress, heartbeat_at=heartbeat_at,
                      lease_owner=lease_owner, lease_until=lease_until)

    def submit_command(self, command: Command) -> None:
        self._check(command.outcome)
        super().submit_command(command)

    def complete_command(self, command_id: str, *, now: datetime,
                         outcome: str | None = None) -> None:
        self._check(outcome)
        super().complete_command(command_id, now=now, outcome=outcome)


class PruneWithParameterList(Base):
    """prune() deletes with ``WHERE task_id IN (?, ?, ...)``, one parameter per task: past
    65,535 parameters the driver refuses the statement."""

    def prune(self, *, keep_terminal: int) -> int:
        terminal = [t for t in self._tasks.values() if t.status.is_terminal]
        if len(terminal) - max(keep_terminal, 0) > 65_535:
            raise StoreError("the number of parameters must be between 0 and 65535")
        return super().prune(keep_terminal=keep_terminal)


# -- falsy filters and ids matched as patterns (issue 33) ----------------------------------
class _FilterTestedByTruthiness(Base):
    """``if q.<field>:`` decides whether to filter, so the empty string means "no filter"."""

    FIELD = ""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if not getattr(q, self.FIELD):
            q = replace(q, **{self.FIELD: None})
        return super().query(q)


class PipelineTestedByTruthiness(_FilterTestedByTruthiness):
    """``if q.pipeline_run_id: sql += " AND pipeline_run_id = ?"``: the run id "" is no filter."""

    FIELD = "pipeline_run_id"


class NameTestedByTruthiness(_FilterTestedByTruthiness):
    """``if q.name:``: the name "" is no filter."""

    FIELD = "name"


class TagTestedByTruthiness(_FilterTestedByTruthiness):
    """``if q.tag:``: the tag "" is no filter."""

    FIELD = "tag"


def _like(pattern: str, text: str) -> bool:
    """SQL ``text LIKE pattern`` under a case-insensitive collation, no ESCAPE clause."""
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, text, re.IGNORECASE | re.DOTALL) is not None


def _doomed(store: InMemoryTaskStore, keep_terminal: int) -> list[str]:
    """The ids the in-memory prune is about to drop (its own rule, oldest terminal first)."""
    terminal = sorted((t for t in store._tasks.values() if t.status.is_terminal),
                      key=lambda t: (t.created_at, t.task_id))
    return [t.task_id for t in terminal[: max(len(terminal) - keep_terminal, 0)]]


class PruneHistoryByPattern(Base):
    """prune() clears history with ``DELETE FROM history WHERE task_id LIKE ?``, binding each
    pruned id: its '_' and '%' match other ids, and the collation folds case."""

    def prune(self, *, keep_terminal: int) -> int:
        doomed = _doomed(self, keep_terminal)
        dropped = super().prune(keep_terminal=keep_terminal)
        for task_id in list(self._history):
            if any(_like(d, task_id) for d in doomed):
                del self._history[task_id]
        return dropped


class PruneCommandsByPattern(Base):
    """prune() drops commands with ``WHERE task_id LIKE ?`` per pruned id."""

    def prune(self, *, keep_terminal: int) -> int:
        doomed = _doomed(self, keep_terminal)
        dropped = super().prune(keep_terminal=keep_terminal)
        self._commands = {k: c for k, c in self._commands.items()
                          if not any(_like(d, c.task_id) for d in doomed)}
        return dropped


class CompleteMatchesIdByPattern(Base):
    """complete_command() runs ``UPDATE commands SET finished_at = ? WHERE command_id LIKE ?``
    (a case-insensitive collation, the id bound as a pattern): look-alike commands finish too."""

    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        for other in [k for k in self._commands if _like(command_id, k)]:
            super().complete_command(other, now=now, outcome=outcome)


class TagRowsKeepCreatedAt(Base):
    """Tag rows carry a copy of ``created_at`` so a tag query can be ordered from the tag
    table alone; the copy is rewritten only when the tags change, so a save that changes
    ``created_at`` and keeps the tags leaves tag queries in the old order."""

    def __init__(self) -> None:
        super().__init__()
        self._tag_created: dict[str, datetime] = {}

    def create(self, snapshot: TaskSnapshot) -> None:
        super().create(snapshot)
        self._tag_created[snapshot.task_id] = snapshot.created_at

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        before = self._tasks.get(snapshot.task_id)
        super().save(snapshot, expect_version=expect_version)
        if before is None or before.tags != snapshot.tags:
            self._tag_created[snapshot.task_id] = snapshot.created_at

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if q.tag is None:
            return super().query(q)
        with self._lock:
            found = [t for t in self._tasks.values() if _matches(t, q)]
        found.sort(key=lambda t: (self._tag_created[t.task_id], t.task_id),
                   reverse=q.newest_first)
        return found if q.limit is None else found[: q.limit]


class _IndexFromCreate(Base):
    """One filter answered from a copy of its field written at create and never again (an
    index table the save path forgets): a save changing only that field leaves the filter
    answering from the old value."""

    FIELD = ""
    FILTER = ""

    def __init__(self) -> None:
        super().__init__()
        self._at_create: dict[str, object] = {}

    def create(self, snapshot: TaskSnapshot) -> None:
        super().create(snapshot)
        self._at_create[snapshot.task_id] = getattr(snapshot, self.FIELD)

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if getattr(q, self.FILTER) is None:
            return super().query(q)
        rest = super().query(replace(q, limit=None, **{self.FILTER: None}))
        only = replace(TaskQuery(), **{self.FILTER: getattr(q, self.FILTER)})
        found = [t for t in rest if _matches(
            replace(t, **{self.FIELD: self._at_create.get(t.task_id, getattr(t, self.FIELD))}),
            only)]
        return found if q.limit is None else found[: q.limit]


class TagIndexFromCreate(_IndexFromCreate):
    """Tag rows written at create and never again."""

    FIELD, FILTER = "tags", "tag"


class NameIndexFromCreate(_IndexFromCreate):
    """The name filter reads a name index written at create and never again."""

    FIELD, FILTER = "name", "name"


class BucketIndexFromCreate(_IndexFromCreate):
    """The bucket filter reads a bucket index written at create and never again."""

    FIELD, FILTER = "bucket", "buckets"


class PipelineIndexFromCreate(_IndexFromCreate):
    """The run-id filter reads an index written at create and never again."""

    FIELD, FILTER = "pipeline_run_id", "pipeline_run_id"


class StatusIndexFromCreate(_IndexFromCreate):
    """The status filter reads a status index written at create and never again."""

    FIELD, FILTER = "status", "statuses"


BROKEN: dict[str, tuple[type[InMemoryTaskStore], ...]] = {
    "PROTOCOL-METHODS": (TouchWithoutLease, PositionalExpectVersion, ClaimLimitDefaultThree),
    "PROTOCOL-KEYWORD-ONLY": (ExpectVersionNotKeywordOnly,),
    "CREATE-THEN-GET": (CreateResetsVersion, TaskIdPadSpace),
    "CREATE-DUPLICATE-RAISES": (CreateOverwrites,),
    "GET-MISSING-NONE": (GetRaisesOnMissing, TaskIdPadSpace, TaskIdCaseFolded),
    "SAVE-CAS": (SaveOnlyStatus,),
    "SAVE-CONFLICT-RAISES": (SaveWithoutVersionCheck,),
    "SAVE-CONFLICT-DETAILS": (SaveConflictWithoutDetails,),
    "SAVE-NO-AUTO-RETRY": (SaveAutoRetries,),
    "SAVE-VERSION-SKIP": (SaveRequiresSuccessor,),
    "SAVE-KEEPS-LEASE": (SaveWritesLease,),
    "SAVE-MISSING-RAISES": (SaveUpserts,),
    "QUERY-ALL": (QueryNoneReturnsNothing, QueryEmptyStoreRaises),
    "QUERY-ORDER-CREATED": (QueryIgnoresNewestFirst, TagRowsKeepCreatedAt),
    "QUERY-TIES-COMPLETE": (QueryDropsTies,),
    "QUERY-STATUSES": (QueryIgnoresStatuses, StatusIndexFromCreate),
    "QUERY-NAME-EXACT": (
        QueryNameCaseInsensitive, NameMatchedAsEscapedText, NamePadSpace, NameCaseFolded,
        NameNormalised, NameTestedByTruthiness, NameIndexFromCreate,
    ),
    "QUERY-NAME-PREFIX-LITERAL": (
        QueryPrefixIsLike, PrefixMatchedAsEscapedText, PrefixPadSpace, PrefixCaseFolded,
        GlobPrefix, RegexPrefix,
    ),
    "QUERY-TAG-EXACT": (
        QueryTagSubstring, TagMatchedAsEscapedJson, TagPadSpace, TagCaseFolded, TagNormalised,
        JsonPathTag, TagTestedByTruthiness, TagIndexFromCreate,
    ),
    "QUERY-BUCKETS": (QueryBucketZeroIsNone, BucketIndexFromCreate),
    "QUERY-PIPELINE": (
        QueryPipelinePrefix, PipelinePadSpace, PipelineCaseFolded, PipelineTestedByTruthiness,
        PipelineIndexFromCreate,
    ),
    "QUERY-LIMIT": (QueryIgnoresLimit, QueryLimitZeroIsNone, LimitBeforeFilter),
    "QUERY-FILTERS-COMBINE": (QueryFiltersOred,),
    "QUERY-EMPTY-SET-MATCHES-NOTHING": (QueryEmptySetIsNoFilter,),
    "COUNTS-PER-STATUS": (CountsCachedAtCreate,),
    "COUNTS-ALL-KEYS": (CountsOmitsZeros,),
    "APPEND-IDEMPOTENT": (AppendDuplicates,),
    "APPEND-FIRST-WINS": (AppendUpserts,),
    "HISTORY-ORDERED": (HistoryUnordered,),
    "HISTORY-SINCE": (HistoryIgnoresSince, HistorySinceInclusive),
    "HISTORY-PER-TASK": (HistoryPrefixTask, HistoryTaskIdCaseFolded),
    "HISTORY-UNKNOWN-EMPTY": (HistoryUnknownRaises,),
    "TRANSITION-ROUNDTRIP": (TransitionDropsReason,),
    "TOUCH-NO-VERSION": (TouchBumpsVersion,),
    "TOUCH-ONLY-NAMED-FIELDS": (TouchWritesAllFields,),
    "TOUCH-MISSING-IGNORED": (TouchMissingRaises,),
    "TOUCH-LEASE": (TouchIgnoresLease,),
    "TOUCH-SIGNALS-SEPARATE": (TouchDerivesLease,),
    "SUBMIT-THEN-CLAIM": (ClaimReturnsUnleasedCopy,),
    "SUBMIT-DUPLICATE-RAISES": (SubmitOverwrites,),
    "CLAIM-LEASE-EXCLUSIVE": (ClaimIgnoresLease,),
    "CLAIM-LEASE-BOUNDARY": (ClaimBoundaryExclusive,),
    "CLAIM-LEASE-PRECISE": (WholeSecondLeases,),
    "CLAIM-EXPIRED-RECLAIM": (ClaimNeverExpires, CompleteMatchesIdByPattern),
    "CLAIM-ORDER": (ClaimInsertionOrder,),
    "CLAIM-LIMIT": (ClaimLeasesBeyondLimit,),
    "COMPLETE-NEVER-RECLAIMED": (CompleteOnlyClearsLease,),
    "COMPLETE-IDEMPOTENT": (CompleteRaisesWhenDone, CompleteUnknownKeyError),
    "RELEASE-NOT-COMPLETE": (ReleaseCompletes,),
    "RELEASE-FINISHED-NOOP": (ReleaseReopens, ReleaseUnknownKeyError),
    "PRUNE-TERMINAL-ONLY": (PruneAnyStatus,),
    "PRUNE-OLDEST-FIRST": (PruneNewestFirst, PruneByUpdatedAt),
    "PRUNE-HISTORY": (PruneKeepsHistory, PruneHistoryByPattern),
    "PRUNE-COMMANDS": (PruneKeepsCommands, PruneCommandsByPattern),
    "PRUNE-LARGE": (PruneWithParameterList,),
    "SNAPSHOT-FULL-ROUNDTRIP": (DropsProgressTotal,),
    "TIME-UTC-ROUNDTRIP": (StoresLocalTime, TruncatesMicroseconds),
    "TIME-INSTANT-ORDER": (SortsByWallClockText, LeaseExpiryByWallClock),
    "COMMAND-ROUNDTRIP": (CommandDropsIssuedBy, CommandIdPadSpace),
    "LENGTH-IDS": (TruncatedIds,),
    "LENGTH-IDS-CAPACITY": (ShortIdColumns,),
    "LENGTH-TEXT": (TruncatedText,),
    "LENGTH-TEXT-CAPACITY": (ShortTextColumns,),
    "CLOSE-IDEMPOTENT": (CloseTwiceRaises,),
    "CLOSE-THEN-STOREERROR": (UsableAfterClose, AttributeErrorAfterClose, CloseClosesEveryStore),
}
