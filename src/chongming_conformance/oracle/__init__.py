"""The obviously-correct model the properties and the state machine compare stores with.

Deliberately written apart from ``reference_stores.memory`` (a store checked
against itself proves nothing): plain dicts, one loop per rule, no cleverness.
Where the contract allows several answers (ties in ``created_at`` for query,
claim and prune), the model does not pick one; the ``check_*`` functions
accept any valid answer, and the state machine then adopts the store's choice.

Every ``check_*`` raises ``AssertionError`` with a message naming the rule,
blamed (:mod:`chongming_conformance.oracle.blame`) on the one clause the wrong answer
shows broken when it can tell: a returned task that fails only the tag filter
is QUERY-TAG-EXACT, a released command missing from a claim is
RELEASE-NOT-COMPLETE. A check that cannot tell leaves the failure unblamed,
and the report then marks the clauses it covers NOT VERIFIED, not FAIL.

The model and its selection rules live in :mod:`._model`, the diagnosis of a wrong
answer in :mod:`._culprits`; this module holds the checks and is the one to import
every name from.

The part ``oracle`` (docs/architecture.md, "The parts") is what a right answer is and
which clause a wrong one breaks: the model and these checks, the culprits, the probes that
confirm a guessed culprit on a fresh store (:mod:`.confirm`), the ``chongming-blame:``
note (:mod:`.blame`, which the report reads back), how a mismatch is described
(:mod:`.assertions`) and how an error or a long text is shortened (:mod:`.messages`). It
may import ``protocol`` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from ..protocol.model import Command, TaskQuery, TaskSnapshot
from ._culprits import (
    FILTER_CLAUSES,
    claim_culprits,
    history_culprits,
    lease_culprit,
    query_culprits,
)
from ._model import Model, claimable, expected_counts, instant, matches
from .assertions import query_mismatch
from .blame import blame

__all__ = [
    "FILTER_CLAUSES",
    "Model",
    "check_claim",
    "check_prune",
    "check_query",
    "claim_culprits",
    "claimable",
    "expected_counts",
    "history_culprits",
    "instant",
    "lease_culprit",
    "matches",
    "query_culprits",
]


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
