"""Diagnosis: the one clause a wrong query, claim or history answer shows broken.

The checks in :mod:`chongming_conformance.oracle` decide *whether* an answer is valid; this
reads the *shape* of an invalid one (a task that fails only the tag filter, a released
command missing from a claim, a lease cut to whole seconds) and names its clause, or ``()``
when it cannot tell. Kept apart because it is the larger and the more speculative half: a
guess read off a shape is confirmed on a fresh store (:mod:`chongming_conformance.oracle.confirm`)
before it is blamed, and none of that touches what passes or fails. Import the names from
:mod:`chongming_conformance.oracle`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from ..protocol.model import Command, TaskQuery, TaskSnapshot, Transition
from ._model import claimable, instant, matches
from .blame import UNCONFIRMED, record_culprit, records_culprit, snapshot_culprit
from .confirm import (
    claim_leases_beyond_limit,
    claim_order_follows_wall_clock,
    confirmed,
    decide,
    lease_cut_short,
    lease_drawn_out,
    lease_from_wall_clock,
    limit_before_filter,
    query_admits,
    query_order_follows_wall_clock,
    release_reopens_finished,
    set_filter_ignored,
    ties_dropped,
)

__all__ = ["FILTER_CLAUSES", "claim_culprits", "history_culprits", "lease_culprit",
           "query_culprits"]


#: The clause each single filter of a TaskQuery is about.
FILTER_CLAUSES: dict[str, str] = {
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
    for name, cid in FILTER_CLAUSES.items():
        value = getattr(q, name)
        if value is None:
            continue
        if failing and matches(task, TaskQuery(**{name: value})):
            continue
        empty_set = name in ("statuses", "buckets") and not value
        out.add(_empty_set_clause(name, cid) if empty_set else cid)
    return out


def _one_filter_failed(task: TaskSnapshot, q: TaskQuery, clause: str) -> str:
    """The clause a returned ``task`` that fails exactly one filter of ``q`` (its clause
    ``clause``) shows broken. With other filters beside it, a store that ORs them returns
    it too: QUERY-FILTERS-COMBINE when, alone in a fresh store, the task is left out by
    that filter alone yet returned by the whole query (confirm.query_admits); otherwise --
    the filter lets it through alone, or neither does (a bug a fresh store does not
    show) -- ``clause``."""
    names = [n for n in FILTER_CLAUSES if getattr(q, n) is not None]
    if len(names) < 2:
        return clause
    failing = [n for n in names if not matches(task, TaskQuery(**{n: getattr(q, n)}))]
    if len(failing) != 1:
        return clause  # two empty sets, one clause
    name = failing[0]
    alone = confirmed(query_admits(task, TaskQuery(**{name: getattr(q, name)})))
    if alone is False and confirmed(query_admits(task, q)):
        return "QUERY-FILTERS-COMBINE"
    return clause


def _empty_set_clause(name: str, cid: str) -> str:
    """The clause an empty ``statuses`` / ``buckets`` set that matched a task shows broken:
    QUERY-EMPTY-SET-MATCHES-NOTHING only when a non-empty set of that filter does filter on
    a fresh store; a store ignoring the filter altogether returns everything for the empty
    set too, and that is the filter's own clause (``cid``)."""
    return decide(set_filter_ignored(name), cid, "QUERY-EMPTY-SET-MATCHES-NOTHING")


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
            if len(failed) != 1:
                culprits.add("QUERY-FILTERS-COMBINE")
            else:
                culprits.add(_one_filter_failed(by_id[t.task_id], q, failed.pop()))
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
    # Taken by wall-clock text rather than the instant? Asked first: a command passed over
    # for its offset looks just like one a release lost (the rule below). A fresh store
    # claiming as many of these times as this claim took tells (confirm.py).
    walls = sorted(_wall(c.created_at) for c in result)
    by_wall = sorted(_wall(c.created_at) for c in free)[: len(result)]
    if result and walls == by_wall:
        probe = claim_order_follows_wall_clock([c.created_at for c in free], len(result))
        verdict = confirmed(probe)
        if verdict is None:
            return (UNCONFIRMED,)
        if verdict:
            return ("TIME-INSTANT-ORDER",)
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
    return ("CLAIM-ORDER",)
