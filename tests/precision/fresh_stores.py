"""Ten fresh broken stores for measuring the kit's precision (issue 33, item 3).

Written from one-line bug descriptions only -- not from the precision matrix's case list
nor from ``tests/broken_stores.py`` -- so the kit was never tuned to them. Each class is
the in-memory reference store (``reference_stores.memory.InMemoryTaskStore``) with ONE
realistic mistake a backend author could make; every other behaviour is the reference's.
``OWN`` names the clause the bug breaks, the one the plugin's report must blame.

A third party names one as ``--chongming-store=fresh_stores:ClassName`` (each is a
zero-argument class). ``tests/precision/test_fresh_stores.py`` runs each through the
plugin; ``tests/precision/fresh_results.md`` records what the first run reported.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import ClassVar

from chongming_conformance import (
    Command,
    Progress,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
)
from reference_stores.memory import InMemoryTaskStore, _locked

__all__ = [
    "STORES",
    "BucketsFilterDropped",
    "ClaimByWallClock",
    "CompleteLostWrite",
    "CountsCachedOnCreate",
    "HistoryNewestFirst",
    "NamePrefixCaseless",
    "PipelineFilterDropped",
    "PruneHistoryLike",
    "StatusesFilterDropped",
    "TouchBumpsVersion",
]


class _Fresh(InMemoryTaskStore):
    #: The clause this store's one bug breaks.
    OWN: ClassVar[str]

    def _filtered(self, q: TaskQuery, keep: object) -> Sequence[TaskSnapshot]:
        """The reference query's ordering and limit over the tasks ``keep`` accepts."""
        found = [t for t in self._tasks.values() if keep(t)]  # type: ignore[operator]
        found.sort(key=lambda t: (t.created_at, t.task_id), reverse=q.newest_first)
        return found if q.limit is None else found[: q.limit]


# -- query filters ------------------------------------------------------------------


def _predicates(q: TaskQuery) -> list[tuple[str, object]]:
    """The filters a query asks for, one predicate each (the full, correct list)."""
    preds: list[tuple[str, object]] = []
    if q.statuses is not None:
        preds.append(("statuses", lambda t: t.status in q.statuses))
    if q.name is not None:
        preds.append(("name", lambda t: t.name == q.name))
    if q.name_prefix is not None:
        preds.append(("name_prefix", lambda t: t.name.startswith(q.name_prefix)))
    if q.tag is not None:
        preds.append(("tag", lambda t: q.tag in t.tags))
    if q.buckets is not None:
        preds.append(("buckets", lambda t: t.bucket in q.buckets))
    if q.pipeline_run_id is not None:
        preds.append(("pipeline_run_id", lambda t: t.pipeline_run_id == q.pipeline_run_id))
    return preds


class _DroppedFilter(_Fresh):
    """A query whose filter table misses one entry (``DROPPED``)."""

    DROPPED: ClassVar[str]

    @_locked
    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        preds = [p for name, p in _predicates(q) if name != self.DROPPED]  # type: ignore[misc]
        return self._filtered(q, lambda t: all(p(t) for p in preds))  # type: ignore[operator]


class BucketsFilterDropped(_DroppedFilter):
    """(a) ``query`` ignores ``buckets``: it answers as if no bucket filter were given.

    The mistake: the filter table was written before ``TaskQuery`` had ``buckets`` and was
    never extended, so a distributed controller asking for "the tasks in my buckets" gets
    every task. Blame: QUERY-BUCKETS.
    """

    OWN = "QUERY-BUCKETS"
    DROPPED = "buckets"


class PipelineFilterDropped(_DroppedFilter):
    """(b) ``query`` ignores ``pipeline_run_id``: every pipeline run's tasks come back.

    The mistake: the column exists and round-trips, but the WHERE-clause builder has no
    entry for it. Blame: QUERY-PIPELINE.
    """

    OWN = "QUERY-PIPELINE"
    DROPPED = "pipeline_run_id"


class StatusesFilterDropped(_DroppedFilter):
    """(c) ``query`` ignores ``statuses``: tasks of every status come back.

    The mistake: the author left statuses out of the store's filter builder because
    "the caller filters statuses itself" (it does not). Blame: QUERY-STATUSES.
    """

    OWN = "QUERY-STATUSES"
    DROPPED = "statuses"


class NamePrefixCaseless(_Fresh):
    """(j) ``name_prefix`` matches case-insensitively (``%``, ``_`` and ``\\`` stay literal).

    The mistake: the author escaped the LIKE wildcards, as the guide warns, but still
    compares through ``lower()`` on both sides, the way SQLite's ``LIKE`` behaves -- so
    ``Build`` also finds ``build-42``. Blame: QUERY-NAME-PREFIX-LITERAL.
    """

    OWN = "QUERY-NAME-PREFIX-LITERAL"

    @_locked
    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        q = query or TaskQuery()
        if q.name_prefix is None:
            return InMemoryTaskStore.query.__wrapped__(self, q)  # type: ignore[attr-defined]
        prefix = q.name_prefix.lower()
        rest = replace(q, name_prefix=None, limit=None)
        found = [
            t for t in InMemoryTaskStore.query.__wrapped__(self, rest)  # type: ignore[attr-defined]
            if t.name.lower().startswith(prefix)
        ]
        return found if q.limit is None else found[: q.limit]


# -- counts ------------------------------------------------------------------------


class CountsCachedOnCreate(_Fresh):
    """(g) ``counts()`` reads a counter kept per status, bumped by ``create`` only.

    The mistake: to avoid reading every record (COUNTS-AGGREGATED) the author keeps a
    running tally, but only ``create`` maintains it -- a ``save`` that moves a task from
    PENDING to RUNNING leaves it counted as PENDING. Blame: COUNTS-PER-STATUS.
    """

    OWN = "COUNTS-PER-STATUS"

    def __init__(self) -> None:
        super().__init__()
        self._tally: dict[TaskStatus, int] = dict.fromkeys(TaskStatus, 0)

    @_locked
    def create(self, snapshot: TaskSnapshot) -> None:
        InMemoryTaskStore.create.__wrapped__(self, snapshot)  # type: ignore[attr-defined]
        self._tally[snapshot.status] += 1

    @_locked
    def counts(self) -> Mapping[TaskStatus, int]:
        return dict(self._tally)


# -- history -----------------------------------------------------------------------


class HistoryNewestFirst(_Fresh):
    """(e) ``history(task_id)`` returns the rows newest first (descending by version).

    The mistake: the author had the dashboard's "latest transition on top" in mind and
    sorted descending; ``since_version`` still selects the right rows. Blame:
    HISTORY-ORDERED.
    """

    OWN = "HISTORY-ORDERED"

    @_locked
    def history(self, task_id: str, *, since_version: int = 0) -> Sequence[object]:
        rows = self._history.get(task_id, {})
        return [rows[v] for v in sorted(rows, reverse=True) if v > since_version]


# -- touch -------------------------------------------------------------------------


class TouchBumpsVersion(_Fresh):
    """(i) ``touch()`` increments ``status_version`` whenever it writes something.

    The mistake: the author routed every write through one "update row" helper that
    bumps the version "so readers notice the change" -- and then the controller's next
    status save conflicts with its own heartbeat. Blame: TOUCH-NO-VERSION.
    """

    OWN = "TOUCH-NO-VERSION"

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
            return
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
        if changes:
            changes["status_version"] = current.status_version + 1
            self._tasks[task_id] = current.evolve(**changes)


# -- commands ----------------------------------------------------------------------


class CompleteLostWrite(_Fresh):
    """(d) ``complete_command`` is a no-op: the finished copy is built and never stored.

    The mistake: ``Command`` is frozen, so the author writes
    ``command = replace(command, finished_at=now, ...)`` and forgets to put it back in
    the table. The command keeps its lease, and is claimed again once the lease runs out.
    Blame: COMPLETE-NEVER-RECLAIMED.
    """

    OWN = "COMPLETE-NEVER-RECLAIMED"

    @_locked
    def complete_command(
        self, command_id: str, *, now: datetime, outcome: str | None = None
    ) -> None:
        command = self._commands.get(command_id)
        if command is None or command.finished_at is not None:
            return
        command = replace(command, finished_at=now, outcome=outcome)  # never written back


class ClaimByWallClock(_Fresh):
    """(f) ``claim_commands`` takes commands in order of their ``created_at`` wall-clock
    reading, ignoring the UTC offset (a naive sort); leases are compared correctly.

    The mistake: the author sorts by ``created_at.replace(tzinfo=None)`` -- what a column
    holding local time without its zone does -- so a command made at 10:00+08:00 (02:00
    UTC) is taken after one made at 09:00+00:00. Which commands are free, the limit and
    the lease are all right; only "oldest first" compares wall clocks.

    Blame: TIME-INSTANT-ORDER. The guide (§2, §5) says claims take the oldest
    ``created_at`` first (CLAIM-ORDER) and §7 says times are compared as instants, not
    wall-clock readings, when offsets differ (TIME-INSTANT-ORDER: "Ordering and lease
    comparisons follow the instant, not the wall-clock text"); with one offset this store
    orders correctly, so what it breaks is the instant rule -- the original's §4 rule 1,
    "时间一律先转 UTC 再存 ... 跨时区部署时排序与比较都会错".
    """

    OWN = "TIME-INSTANT-ORDER"

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
        free.sort(key=lambda c: (c.created_at.replace(tzinfo=None), c.command_id))
        claimed = []
        for command in free[: max(limit, 0)]:
            leased = replace(command, lease_until=lease_until)
            self._commands[command.command_id] = leased
            claimed.append(leased)
        return claimed


# -- prune -------------------------------------------------------------------------


def _like(pattern: str) -> re.Pattern[str]:
    """SQL LIKE as SQLite applies it: ``%`` any run, ``_`` one character, ASCII caseless."""
    body = "".join(
        ".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern
    )
    return re.compile(body, re.IGNORECASE | re.DOTALL)


class PruneHistoryLike(_Fresh):
    """(h) ``prune`` deletes the dropped tasks' history with ``task_id LIKE ?``.

    The mistake: a port of ``DELETE FROM history WHERE task_id LIKE ?`` (the author meant
    ``=``): ``_`` and ``%`` in a dropped id are wildcards and the match ignores case, so
    dropping ``job_1`` also wipes the history of ``jobX1`` and ``JOB_1``, which are kept.
    Tasks and commands are deleted by exact id. Blame: PRUNE-HISTORY.
    """

    OWN = "PRUNE-HISTORY"

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
            like = _like(task_id)
            for other in [h for h in self._history if like.fullmatch(h)]:
                del self._history[other]
        self._commands = {k: c for k, c in self._commands.items() if c.task_id not in gone}
        return len(gone)


#: Every fresh store, in the order of the issue's descriptions (a .. j).
STORES: tuple[type[_Fresh], ...] = (
    BucketsFilterDropped,
    PipelineFilterDropped,
    StatusesFilterDropped,
    CompleteLostWrite,
    HistoryNewestFirst,
    ClaimByWallClock,
    CountsCachedOnCreate,
    PruneHistoryLike,
    TouchBumpsVersion,
    NamePrefixCaseless,
)
