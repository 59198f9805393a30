"""The obviously-correct model the properties and the state machine compare stores with.

Deliberately written apart from ``reference_stores.memory`` (a store checked
against itself proves nothing): plain dicts, one loop per rule, no cleverness.
Where the contract allows several answers (ties in ``created_at`` for query,
claim and prune), the model does not pick one; the ``check_*`` functions
accept any valid answer, and the state machine then adopts the store's choice.

Every ``check_*`` raises ``AssertionError`` with a message naming the rule,
blamed (:mod:`chongming_conformance.blame`) on the one clause the wrong answer
shows broken when it can tell: a returned task that fails only the tag filter
is QUERY-TAG-EXACT, a released command missing from a claim is
RELEASE-NOT-COMPLETE. A check that cannot tell leaves the failure unblamed,
and the report then marks the clauses it covers NOT VERIFIED, not FAIL.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from .assertions import query_mismatch
from .blame import UNCONFIRMED, blame, record_culprit, records_culprit, snapshot_culprit
from .confirm import (
    claim_leases_beyond_limit,
    claim_order_follows_wall_clock,
    confirmed,
    decide,
    lease_cut_short,
    lease_drawn_out,
    lease_from_wall_clock,
    limit_before_filter,
    query_order_follows_wall_clock,
    release_reopens_finished,
    ties_dropped,
)
from .model import Command, Progress, TaskQuery, TaskSnapshot, TaskStatus, Transition

__all__ = [
    "Model",
    "check_claim",
    "check_prune",
    "check_query",
    "claim_culprits",
    "expected_counts",
    "history_culprits",
    "lease_culprit",
    "matches",
    "query_culprits",
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
    stored = list(tasks)
    hits = [t for t in stored if matches(t, query)]
    count = len(hits) if query.limit is None else min(query.limit, len(hits))
    try:
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
    except AssertionError as exc:
        blame(exc, query_culprits(list(result), stored, query))
        raise


#: The clause each single filter of a TaskQuery is about.
_FILTER_CLAUSES: dict[str, str] = {
    "statuses": "QUERY-STATUSES",
    "name": "QUERY-NAME-EXACT",
    "name_prefix": "QUERY-NAME-PREFIX-LITERAL",
    "tag": "QUERY-TAG-EXACT",
    "buckets": "QUERY-BUCKETS",
    "pipeline_run_id": "QUERY-PIPELINE",
}


def _filter_clauses(task: TaskSnapshot, q: TaskQuery, *, failing: bool) -> set[str]:
    """The clauses of the filters of ``q`` that ``task`` fails (or that are set at all)."""
    out = set()
    for name, cid in _FILTER_CLAUSES.items():
        value = getattr(q, name)
        if value is None:
            continue
        if failing and matches(task, TaskQuery(**{name: value})):
            continue
        empty_set = name in ("statuses", "buckets") and not value
        out.add("QUERY-EMPTY-SET-MATCHES-NOTHING" if empty_set else cid)
    return out


def _wall(t: datetime) -> datetime:
    return t.replace(tzinfo=None)


def query_culprits(
    result: Sequence[TaskSnapshot], stored: Sequence[TaskSnapshot], q: TaskQuery
) -> tuple[str, ...]:
    """The clause(s) a wrong query answer shows broken; ``()`` when it cannot tell."""
    by_id = {t.task_id: t for t in stored}
    hits = [t for t in stored if matches(t, q)]
    extras = [t for t in result if t.task_id in by_id and not matches(by_id[t.task_id], q)]
    if extras:
        culprits = set()
        for t in extras:
            failed = _filter_clauses(by_id[t.task_id], q, failing=True)
            culprits |= failed if len(failed) == 1 else {"QUERY-FILTERS-COMBINE"}
        return tuple(sorted(culprits))
    for got in result:
        want = by_id.get(got.task_id)
        if want is not None and got != want:
            return (snapshot_culprit(want, got, "SNAPSHOT-FULL-ROUNDTRIP"),)
    if q.limit is not None and len(result) > q.limit:
        return ("QUERY-LIMIT",)
    returned = {t.task_id for t in result}
    missing = [t for t in hits if t.task_id not in returned]
    count = len(hits) if q.limit is None else min(q.limit, len(hits))
    if (missing and len(result) < count and q.limit is not None
            and _limit_first(result, stored, q) and confirmed(limit_before_filter())):
        return ("QUERY-LIMIT",)  # a fresh store takes the limit before the filter
    if missing and len(result) < count:
        instants = [instant(t.created_at) for t in hits]
        if any(instants.count(instant(t.created_at)) > 1 for t in missing):
            # A tie is only a suspect: a filter bug can drop a task that happens to tie.
            ties = confirmed(ties_dropped())
            if ties is None:
                return (UNCONFIRMED,)
            if ties:
                return ("QUERY-TIES-COMPLETE",)
        set_filters = _filter_clauses(missing[0], q, failing=False)
        if not set_filters:
            return ("QUERY-ALL",)
        return tuple(sorted(set_filters)) if len(set_filters) == 1 else ()
    if q.limit is None and len(result) > len(hits):
        return ()
    descending = q.newest_first
    keys = [instant(t.created_at) for t in result]
    right = sorted(keys, reverse=descending)
    wrong_way = sorted(keys, reverse=not descending)
    walls = [_wall(t.created_at) for t in result]
    if keys != right and walls == sorted(walls, reverse=descending):
        return (_wall_clock_order(t.created_at for t in result),)
    if keys != right and keys == wrong_way:
        return ("QUERY-ORDER-CREATED",)
    if keys != right:
        return ("QUERY-ORDER-CREATED",)
    # Ordered, but not the right prefix under a limit.
    by_wall = sorted(hits, key=lambda t: _wall(t.created_at), reverse=descending)[: len(result)]
    if sorted(_wall(t.created_at) for t in by_wall) == sorted(walls):
        return (_wall_clock_order(t.created_at for t in hits),)
    return ("QUERY-ORDER-CREATED",)


def _wall_clock_order(created: Iterable[datetime]) -> str:
    """TIME-INSTANT-ORDER if a fresh store orders these times by wall-clock text (the guess
    read off a wrong order), else ``UNCONFIRMED``."""
    return decide(query_order_follows_wall_clock(list(created)), "TIME-INSTANT-ORDER",
                  "QUERY-ORDER-CREATED")


def _limit_first(
    result: Sequence[TaskSnapshot], stored: Sequence[TaskSnapshot], q: TaskQuery
) -> bool:
    """Is ``result`` what a LIMIT applied before the filter gives: the matching tasks among
    the first ``q.limit`` of all tasks in the requested order (ties in any order)?"""
    assert q.limit is not None
    ordered = sorted(stored, key=lambda t: instant(t.created_at), reverse=q.newest_first)
    if q.limit >= len(ordered):
        return False
    cutoff = instant(ordered[q.limit - 1].created_at) if q.limit > 0 else None
    if cutoff is None:
        return False
    # Every task up to the cutoff instant may have been among the first `limit` (ties).
    window = [t for t in ordered
              if (instant(t.created_at) <= cutoff if not q.newest_first
                  else instant(t.created_at) >= cutoff)]
    window_ids = {t.task_id for t in window if matches(t, q)}
    return {t.task_id for t in result} <= window_ids


def history_culprits(
    expected: Sequence[Transition], got: Sequence[Transition], *, since: int, pruned: bool
) -> tuple[str, ...]:
    """The clause a wrong ``history(task_id, since_version=since)`` answer shows broken."""
    if not expected and got and pruned:
        return ("PRUNE-HISTORY",)
    keys = [(t.task_id, t.version) for t in got]
    want = [(t.task_id, t.version) for t in expected]
    if len(set(keys)) < len(keys):
        return ("APPEND-IDEMPOTENT",)
    if sorted(keys) == sorted(want):
        if keys != want:
            return ("HISTORY-ORDERED",)
        return (records_culprit(expected, got, "TRANSITION-ROUNDTRIP"),)
    task_ids = {t.task_id for t in expected} | ({expected[0].task_id} if expected else set())
    if task_ids and any(t.task_id not in task_ids for t in got):
        return ("HISTORY-PER-TASK",)
    if set(want) <= set(keys) and all(t.version <= since for t in got if (t.task_id, t.version)
                                      not in set(want)):
        return ("HISTORY-SINCE",)
    return ()


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


def check_claim(
    result: Sequence[Command],
    commands: Iterable[Command],
    *,
    now: datetime,
    lease_seconds: float,
    limit: int,
    last_ops: Mapping[str, str] | None = None,
    leases: Mapping[str, tuple[datetime, float]] | None = None,
) -> None:
    """Valid claim: the ``limit`` oldest claimable commands (any among ties), each leased.

    A lease that ends exactly at ``now`` may be read as over or as still held (the guide
    leaves the instant open): the claim is valid if it is valid under either reading.
    The order of the returned sequence is not checked, only which commands it holds.
    ``last_ops`` (command id -> the last call that changed it: submit, claim,
    complete, release) lets a failure be blamed on the call that left the command
    in the wrong state.
    """
    known = list(commands)
    # The reading the store's answer suggests goes first, so its failure is the one shown.
    free_first = any(c.lease_until == now for c in known
                     if c.command_id in {r.command_id for r in result})
    failures: list[AssertionError] = []
    for free in (free_first, not free_first):
        try:
            _claim_ok(result, known, now=now, lease_seconds=lease_seconds, limit=limit,
                      free_at_boundary=free)
            return
        except AssertionError as failure:
            failures.append(failure)
    shown = failures[0]
    blame(shown, claim_culprits(result, known, now=now, limit=limit, last_ops=last_ops or {},
                                free_at_boundary=free_first, leases=leases or {},
                                lease_seconds=lease_seconds))
    raise shown


def _claim_ok(
    result: Sequence[Command],
    commands: Sequence[Command],
    *,
    now: datetime,
    lease_seconds: float,
    limit: int,
    free_at_boundary: bool,
) -> None:
    free = claimable(commands, now, free_at_boundary=free_at_boundary)
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


def _past_whole_seconds(lease: tuple[datetime, float] | None, now: datetime) -> bool:
    """Is ``now`` inside a fractional lease but past its whole seconds (1.2 s into 1.5 s)?"""
    if lease is None:
        return False
    claimed_at, seconds = lease
    elapsed = (now - claimed_at).total_seconds()
    return seconds != int(seconds) and int(seconds) <= elapsed < seconds


def _before_rounded_up(lease: tuple[datetime, float] | None, now: datetime) -> bool:
    """Is ``now`` past a fractional lease but before its next whole second (1.75 s of 1.5 s)?"""
    if lease is None:
        return False
    claimed_at, seconds = lease
    elapsed = (now - claimed_at).total_seconds()
    return seconds != int(seconds) and seconds < elapsed < int(seconds) + 1


def lease_culprit(now: datetime, lease_seconds: float, got: datetime | None) -> str:
    """The clause a claim that handed out ``lease_until = got`` (not ``now + lease_seconds``)
    shows broken: counted from the wall-clock reading of ``now`` -- TIME-INSTANT-ORDER, when
    a fresh store does the same; a fractional lease cut or drawn out to whole seconds --
    CLAIM-LEASE-PRECISE, likewise; else the claim's own SUBMIT-THEN-CLAIM."""
    if got is None:
        return "SUBMIT-THEN-CLAIM"
    wall = now.replace(tzinfo=UTC) + timedelta(seconds=lease_seconds)
    if now.utcoffset() and got == wall:
        return decide(lease_from_wall_clock(), "TIME-INSTANT-ORDER", "SUBMIT-THEN-CLAIM")
    if lease_seconds != int(lease_seconds):
        return _lease_precision("SUBMIT-THEN-CLAIM")
    return "SUBMIT-THEN-CLAIM"


def _lease_precision(otherwise: str) -> str:
    """CLAIM-LEASE-PRECISE when a fresh store shows a 1.5 s lease cut or drawn out to whole
    seconds; ``otherwise`` when it holds such a lease exactly; UNCONFIRMED when the re-check
    could not run."""
    short, long = confirmed(lease_cut_short()), confirmed(lease_drawn_out())
    if short or long:
        return "CLAIM-LEASE-PRECISE"
    return otherwise if short is False and long is False else UNCONFIRMED


#: Which clause a command wrongly *missing* from a claim breaks, by the last call on it.
_MISSING_AFTER = {"submit": "SUBMIT-THEN-CLAIM", "release": "RELEASE-NOT-COMPLETE"}


def claim_culprits(
    result: Sequence[Command],
    commands: Sequence[Command],
    *,
    now: datetime,
    limit: int,
    last_ops: Mapping[str, str],
    free_at_boundary: bool = True,
    leases: Mapping[str, tuple[datetime, float]] | None = None,
    lease_seconds: float | None = None,
) -> tuple[str, ...]:
    """The clause(s) a wrong claim answer shows broken; ``()`` when it cannot tell."""
    free = claimable(commands, now, free_at_boundary=free_at_boundary)
    free_ids = {c.command_id for c in free}
    by_id = {c.command_id: c for c in commands}
    leases = leases or {}
    if len(result) > max(limit, 0):
        return ("CLAIM-LIMIT",)
    if lease_seconds is not None:
        until = now + timedelta(seconds=lease_seconds)
        off = [c.lease_until for c in result if c.lease_until is not None
               and c.lease_until != until]
        if off:
            return (lease_culprit(now, lease_seconds, off[0]),)
    wrong = [c for c in result if c.command_id in by_id and c.command_id not in free_ids]
    if wrong:
        out = set()
        for c in wrong:
            held = by_id[c.command_id]
            if held.finished_at is None and _past_whole_seconds(leases.get(c.command_id), now):
                # inside a fractional lease, past its seconds
                out.add(_lease_precision("CLAIM-LEASE-EXCLUSIVE"))
            elif held.finished_at is None:
                out.add("CLAIM-LEASE-EXCLUSIVE")  # unfinished, so still leased
            elif last_ops.get(c.command_id) == "release":
                # Reopened by the release, or never finished by the complete before it: a
                # fresh store tells which.
                out.add(decide(release_reopens_finished(), "RELEASE-FINISHED-NOOP",
                               "COMPLETE-NEVER-RECLAIMED"))
            else:
                out.add("COMPLETE-NEVER-RECLAIMED")
        return tuple(sorted(out))
    for got in result:
        want = by_id.get(got.command_id)
        if want is not None and replace(got, lease_until=None) != replace(
            want, lease_until=None
        ):
            return (record_culprit(replace(want, lease_until=None),
                                   replace(got, lease_until=None), "COMMAND-ROUNDTRIP"),)
        if want is not None and got.lease_until is None:
            return ("SUBMIT-THEN-CLAIM",)
    returned = {c.command_id for c in result}
    count = min(max(limit, 0), len(free))
    missing = [c for c in free if c.command_id not in returned]
    if len(result) < count and missing:
        if confirmed(claim_leases_beyond_limit()):
            # An earlier claim leased them without returning them: a knock-on of that.
            return ("CLAIM-LIMIT",)
        out = set()
        for c in missing:
            if c.lease_until is not None and _before_rounded_up(leases.get(c.command_id), now):
                # expired, but not yet by the next whole second
                out.add(_lease_precision("CLAIM-EXPIRED-RECLAIM"))
            elif c.lease_until is not None:
                out.add("CLAIM-EXPIRED-RECLAIM")
            else:
                op = last_ops.get(c.command_id)
                if op in _MISSING_AFTER:
                    out.add(_MISSING_AFTER[op])
        return tuple(sorted(out)) if len(out) == 1 else ()
    # A substitution: the right number, but an older claimable command was passed over.
    if result:
        newest = max(instant(c.created_at) for c in result)
        passed_over = [c for c in missing if instant(c.created_at) < newest]
        if passed_over and all(last_ops.get(c.command_id) == "release" for c in passed_over):
            return ("RELEASE-NOT-COMPLETE",)
        expired = [c for c in passed_over if c.lease_until is not None]
        unleased = sorted(instant(c.created_at) for c in free if c.lease_until is None)
        if expired and sorted(instant(c.created_at) for c in result) == unleased[: len(result)]:
            # Exactly the right answer had the ended leases still held: the store does not
            # reclaim them, it does not misorder (a store that ignores expiry would
            # otherwise fail CLAIM-ORDER beside CLAIM-EXPIRED-RECLAIM).
            if all(_before_rounded_up(leases.get(c.command_id), now) for c in expired):
                return (_lease_precision("CLAIM-EXPIRED-RECLAIM"),)
            return ("CLAIM-EXPIRED-RECLAIM",)
    walls = sorted(_wall(c.created_at) for c in result)
    by_wall = sorted(_wall(c.created_at) for c in free)[: len(result)]
    if walls == by_wall:
        probe = claim_order_follows_wall_clock([c.created_at for c in free])
        return (decide(probe, "TIME-INSTANT-ORDER", "CLAIM-ORDER"),)
    return ("CLAIM-ORDER",)


def check_prune(
    dropped: Iterable[str], returned: int, tasks: Mapping[str, TaskSnapshot], keep_terminal: int
) -> None:
    """Valid prune: only terminal tasks, the right number, none newer than a kept one."""
    gone = set(dropped)
    terminal = [t for t in tasks.values() if t.status.is_terminal]
    count = max(len(terminal) - max(keep_terminal, 0), 0)
    what = f"prune(keep_terminal={keep_terminal})"
    alive = sorted(i for i in gone if i in tasks and not tasks[i].status.is_terminal)
    try:
        assert not alive, f"{what}: dropped non-terminal task(s) {alive!r}"
    except AssertionError as exc:
        blame(exc, ("PRUNE-TERMINAL-ONLY",))
        raise
    try:
        _prune_count_ok(gone, returned, tasks, terminal, count, what)
    except AssertionError as exc:
        blame(exc, ("PRUNE-OLDEST-FIRST",))
        raise


def _prune_count_ok(
    gone: set[str],
    returned: int,
    tasks: Mapping[str, TaskSnapshot],
    terminal: Sequence[TaskSnapshot],
    count: int,
    what: str,
) -> None:
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
