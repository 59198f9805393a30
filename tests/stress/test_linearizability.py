"""The linearizability checker (``stress.lincheck``) on hand-written histories.

(a) linearizable histories that the mixed workload's former hand-written invariants
rejected (false alarms) and its verdict -- this checker -- accepts; (b) non-linearizable
ones that every one of those invariants accepted and the verdict rejects; (c) the
budget; (d) the
minimal failing sub-history; (e) soundness: random concurrent executions of a
correct store are always linearizable; and the decisions the model makes
(unknown outcomes, SKIP LOCKED, ties, touch racing save, prune's choices).
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lincheck_helpers import FAILED, TASKS, Recorder, leased

from chongming_conformance.protocol.errors import ConcurrencyConflict, StoreError
from chongming_conformance.protocol.model import (
    Command,
    CommandKind,
    Progress,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from chongming_conformance.stress.lincheck import (
    Budget,
    Call,
    Outcome,
    UnrecordedCalls,
    Verdict,
    calls_from_logs,
    check,
)
from chongming_conformance.stress.lincheck.minimise import trial
from chongming_conformance.stress.lincheck.partition import partition_history
from chongming_conformance.stress.lincheck.search import Meter
from chongming_conformance.stress.log import Logs, Op
from chongming_conformance.stress.records import at, command, task, transition
from chongming_conformance.stress.scenarios._mix_calls import LEASE_BASE
from reference_stores.memory import InMemoryTaskStore

V0 = {tid: task(tid, name="w0-create") for tid in TASKS}


def saved(version: int, name: str, **changes: Any) -> TaskSnapshot:
    """The snapshot of mix-t0 a save to ``version`` writes (no lease: a controller's)."""
    return task("mix-t0", version=version, name=name, **changes)


def kinds(r: Recorder) -> set[str]:
    """The anomaly kinds the mixed workload's verdict (``mixed_workload.judge``) finds."""
    return {a.kind for a in r.judge()}


# -- (a) linearizable, yet a former hand-written invariant rejected it --------------------

def test_a_claim_that_skipped_a_released_command_is_linearizable() -> None:
    """The false alarm a SKIP LOCKED MariaDB store raised: a release returned, and the next
    claim came back short without the command -- skipped because a concurrent claim held
    it locked while scanning. A claim may skip what another transaction locks."""
    r = Recorder()
    r.setup()
    c1, c0 = command("c1", "mix-t0", 1.0), command("c0", "mix-t0", 0.0)
    r.submit(0, c1, (0.1, 0.2))
    r.claim(1, 0, 1, [leased(c1, 0)], (1.0, 2.0))
    r.submit(0, c0, (2.1, 2.2))
    r.release(1, "c1", 0, (3.0, 4.0))
    r.claim(2, 0, 2, [], (5.0, 6.0))  # both locked by w3's claim: skipped
    r.claim(3, 0, 1, [leased(c0, 0)], (5.1, 7.0))
    assert not kinds(r)  # the old 'released-still-leased' invariant flagged it
    result = check(r.calls())
    assert result.verdict is Verdict.LINEARIZABLE, result.report()


def test_the_strict_skip_policy_still_allows_a_skip_under_a_concurrent_claim() -> None:
    r = Recorder()
    r.setup()
    c1, c0 = command("c1", "mix-t0", 1.0), command("c0", "mix-t0", 0.0)
    r.submit(0, c1, (0.1, 0.2))
    r.claim(1, 0, 1, [leased(c1, 0)], (1.0, 2.0))
    r.submit(0, c0, (2.1, 2.2))
    r.release(1, "c1", 0, (3.0, 4.0))
    r.claim(2, 0, 2, [], (5.0, 6.0))
    r.claim(3, 0, 1, [leased(c0, 0)], (5.1, 7.0))  # the concurrent claim that locked them
    assert check(r.calls(), skip="concurrent").ok


def test_the_strict_skip_policy_catches_a_release_that_kept_the_lease() -> None:
    """Nothing concurrent could lock the released command, yet the claim came back short
    without it: a release that kept the lease (ReleaseKeepsLease). The default policy
    leaves it to the starvation rule."""
    r = Recorder()
    r.setup()
    c = command("c", "mix-t0", 0.0)
    r.submit(0, c, (0.1, 0.2))
    r.claim(1, 0, 1, [leased(c, 0)], (1.0, 2.0))
    r.release(1, "c", 0, (3.0, 4.0))
    r.claim(2, 1, 2, [], (5.0, 6.0))
    assert check(r.calls()).ok
    result = check(r.calls(), skip="concurrent")
    assert result.verdict is Verdict.VIOLATION
    assert "without 'c', which was free and locked by no concurrent call" in (
        result.violations[0].explanation)


def test_the_strict_skip_policy_allows_what_the_limit_cut_off() -> None:
    r = Recorder()
    r.setup()
    old, new = command("old", "mix-t0", 0.0), command("new", "mix-t1", 5.0)
    r.submit(0, old, (0.1, 0.2))
    r.submit(0, new, (0.3, 0.4))
    r.claim(1, 0, 1, [leased(old, 0)], (1.0, 2.0))  # full: 'new' sorts after it
    assert check(r.calls(), skip="concurrent").ok
    r.claim(2, 0, 1, [], (3.0, 4.0))  # short, and 'new' was free
    assert check(r.calls(), skip="concurrent").verdict is Verdict.VIOLATION


def test_the_strict_skip_policy_lets_a_lease_hold_at_exactly_lease_until() -> None:
    """CLAIM-LEASE-BOUNDARY is a SHOULD: at now == lease_until a store may still hold the
    lease (LeaseHeldAtBoundary in tests/latitude), so a claim there may leave the command
    out -- or take it; a moment later it must take it."""
    r = Recorder()
    r.setup()
    c = command("c", "mix-t0", 0.0)
    r.submit(0, c, (0.1, 0.2))
    r.claim(1, 0, 1, [leased(c, 0)], (1.0, 2.0))  # leased until t+2
    r.claim(2, 2, 5, [], (3.0, 4.0))  # at t+2: held (the MUST allows it)
    assert check(r.calls(), skip="concurrent").ok
    taken = Recorder()
    taken.setup()
    taken.submit(0, c, (0.1, 0.2))
    taken.claim(1, 0, 1, [leased(c, 0)], (1.0, 2.0))
    taken.claim(2, 2, 5, [leased(c, 2)], (3.0, 4.0))  # at t+2: free (the SHOULD)
    assert check(taken.calls(), skip="concurrent").ok
    r.claim(3, 2.5, 5, [], (5.0, 6.0))  # after lease_until nothing may hold it
    assert check(r.calls(), skip="concurrent").verdict is Verdict.VIOLATION


def test_a_save_of_unknown_outcome_that_took_effect_is_linearizable() -> None:
    """A save raised StoreError, yet wrote: the next save chains from its version. The old
    invariant 'successful saves form one chain from 0' called it a broken chain; the
    verdict flags only the error, which a healthy store does not raise there."""
    r = Recorder()
    r.setup()
    r.save(1, saved(1, "w1-s1"), 0, (1.0, 2.0), outcome=FAILED)
    r.get(2, "mix-t0", saved(1, "w1-s1"), (3.0, 4.0))
    r.save(2, saved(2, "w2-s2"), 1, (5.0, 6.0))
    assert kinds(r) == {"unexpected-error"}
    assert check(r.calls()).ok


def test_an_unknown_outcome_may_take_effect_after_the_call_raised() -> None:
    r = Recorder()
    r.setup()
    r.save(1, saved(1, "w1-s1"), 0, (1.0, 2.0), outcome=FAILED)
    r.get(2, "mix-t0", V0["mix-t0"], (3.0, 4.0))  # not yet
    r.get(2, "mix-t0", saved(1, "w1-s1"), (5.0, 6.0))  # now it landed
    assert check(r.calls()).ok


def test_a_pending_call_may_take_effect_or_not() -> None:
    r = Recorder()
    r.setup()
    r.save(3, saved(1, "w3-s1"), 0, (1.0, None))  # the worker was killed mid-call
    r.get(2, "mix-t0", V0["mix-t0"], (3.0, 4.0))
    assert check(r.calls()).ok
    r.get(2, "mix-t0", saved(1, "w3-s1"), (5.0, 6.0))
    assert check(r.calls()).ok
    r.get(1, "mix-t0", V0["mix-t0"], (7.0, 8.0))  # and it cannot be undone
    assert check(r.calls()).verdict is Verdict.VIOLATION


def test_reads_concurrent_with_a_save_may_see_either_version_in_either_invoke_order() -> None:
    """'A read invoked later never sees an older version' is wrong for overlapping reads."""
    r = Recorder()
    r.setup()
    r.save(1, saved(1, "w1-s1"), 0, (1.0, 3.0))
    r.get(2, "mix-t0", saved(1, "w1-s1"), (1.5, 4.0))  # invoked first, sees the new one
    r.get(3, "mix-t0", V0["mix-t0"], (2.0, 2.5))  # invoked later, sees the old one
    assert check(r.calls()).ok


@pytest.mark.parametrize("touch_last", [True, False])
def test_a_touch_racing_a_save_may_land_before_or_after_it(touch_last: bool) -> None:
    """Either order is a linearization: the progress is the later writer's, the lease the
    toucher's either way (a save never writes the lease)."""
    r = Recorder()
    r.setup()
    r.renew(0, "mix-t0", 1, (1.0, 3.0))
    r.save(1, saved(1, "w1-s1"), 0, (2.0, 4.0))
    lease = {"lease_owner": "w0", "lease_until": at(LEASE_BASE + 1)}
    progress = Progress(done=1, message="w0") if touch_last else Progress(done=1,
                                                                          message="p1")
    r.get(2, "mix-t0", saved(1, "w1-s1", progress=progress, **lease), (5.0, 6.0))
    assert check(r.calls()).ok
    assert not kinds(r)


def test_ties_in_created_at_may_come_back_in_any_order() -> None:
    r = Recorder()
    r.setup()
    r.query(1, [V0[t] for t in reversed(TASKS)], (1.0, 2.0))  # all created at t+0
    assert check(r.calls()).ok
    r.query(1, [V0[t] for t in TASKS[:2]], (3.0, 4.0), q=TaskQuery(limit=2))  # any 2 of 4
    assert check(r.calls()).ok


def test_a_query_cut_by_its_limit_may_leave_out_only_what_sorts_after_it() -> None:
    r = Recorder()
    r.setup()
    older = task("old", name="old", created_at=at(-5))
    r.create(1, older, (0.1, 0.2))
    r.query(2, [V0["mix-t0"]], (1.0, 2.0), q=TaskQuery(limit=1))  # 'old' sorts first
    result = check(r.calls())
    assert result.verdict is Verdict.VIOLATION, result.report()
    assert "left out task 'old'" in result.report()


# -- (b) not linearizable, yet every former hand-written invariant accepted it ------------

def test_a_stale_get_in_the_middle_of_a_round() -> None:
    r = Recorder()
    r.setup()
    save = r.save(1, saved(1, "w1-s1"), 0, (1.0, 2.0))
    r.append(1, "mix-t0", 1, (2.1, 2.2))
    stale = r.get(2, "mix-t0", V0["mix-t0"], (3.0, 4.0))
    assert kinds(r) == {"not-linearizable"}
    result = check(r.calls())
    assert result.verdict is Verdict.VIOLATION
    (v,) = result.violations
    assert {c.seq for c in v.calls} == {save.seq, stale.seq} and len(v.calls) == 2
    assert "returned v0" in v.explanation and "v1" in v.explanation
    assert "after w1 #" in v.explanation  # the real-time fact that forces the order


def test_a_touchs_lease_lost_to_a_concurrent_save() -> None:
    """The save is ordered after the touch, so it must carry the lease; the lease is gone
    in a query (the invariants only look at leases through get)."""
    r = Recorder()
    r.setup()
    r.renew(0, "mix-t0", 1, (1.0, 3.0))
    r.save(1, saved(1, "w1-s1"), 0, (2.0, 4.0))
    lost = saved(1, "w1-s1")  # no lease
    r.query(2, [lost, *(V0[t] for t in TASKS[1:])], (5.0, 6.0))
    assert kinds(r) == {"not-linearizable"}
    result = check(r.calls())
    assert result.verdict is Verdict.VIOLATION
    assert "lease" in result.violations[0].explanation


def test_a_claim_of_a_command_whose_lease_held_at_every_possible_point() -> None:
    r = Recorder()
    r.setup()
    c = command("c1", "mix-t0", 0.0)
    r.submit(0, c, (0.1, 0.2))
    r.claim(1, 5, 1, [leased(c, 5)], (1.0, 2.0))  # leased until t+7
    r.claim(2, 3, 1, [leased(c, 3)], (3.0, 4.0))  # at t+3: still leased
    r.complete(2, "c1", 3, (4.1, 4.2))
    assert kinds(r) == {"not-linearizable"}
    result = check(r.calls())
    assert result.verdict is Verdict.VIOLATION
    assert "leased until t+7s" in result.violations[0].explanation


def test_a_prune_that_dropped_a_task_a_save_had_revived_before_it() -> None:
    r = Recorder()
    r.setup()
    doomed = task("mix-done-w1-1", status=TaskStatus.SUCCEEDED)
    r.create(1, doomed, (0.1, 0.2))
    r.save(1, task("mix-done-w1-1", version=1, name="w1-revive", status=TaskStatus.RUNNING),
           0, (1.0, 2.0), revive=True)
    r.prune(0, 0, 1, (3.0, 4.0))
    r.query(2, list(V0.values()), (5.0, 6.0))  # the revived task is gone
    assert kinds(r) == {"prune-count", "not-linearizable"}
    result = check(r.calls())
    found = {v.kind for v in result.violations}
    assert found == {"prune-count", "not-linearizable"}, result.report()
    shown = result.report(limit=2)
    assert "[prune-count]" in shown and "[not-linearizable]" in shown


def test_a_history_row_that_appears_then_disappears() -> None:
    r = Recorder()
    r.setup()
    r.append(1, "mix-t0", 1, (1.0, 2.0))
    r.history(2, "mix-t0", [transition("mix-t0", 1, reason="w1")], (3.0, 4.0))
    r.history(3, "mix-t0", [], (5.0, 6.0))
    assert kinds(r) == {"not-linearizable"}
    result = check(r.calls())
    assert result.verdict is Verdict.VIOLATION
    assert result.violations[0].where == "history of 'mix-t0'"


def test_counts_outside_what_any_point_of_the_call_allows() -> None:
    r = Recorder()
    r.setup()
    r.call(1, "counts", {}, "counts", {}, (1.0, 2.0),
           result={TaskStatus.PENDING: 3, TaskStatus.RUNNING: 1}, summary=4)
    assert kinds(r) == {"counts-range"}
    result = check(r.calls())
    assert [v.kind for v in result.violations] == ["counts-range", "counts-range"]
    assert "4 task(s) were pending at every instant" in result.violations[0].explanation


def test_counts_during_a_save_may_count_either_status() -> None:
    r = Recorder()
    r.setup()
    r.save(1, saved(1, "w1-s1"), 0, (1.0, 3.0))  # PENDING -> RUNNING
    for pending in (4, 3):
        r.call(2, "counts", {}, "counts", {}, (2.0, 2.5),
               result={TaskStatus.PENDING: pending, TaskStatus.RUNNING: 4 - pending},
               summary=4)
    assert check(r.calls()).ok


def test_a_write_a_read_has_shown_is_certain_from_that_read_on() -> None:
    """A save whose writer was killed mid-call may take effect at any instant -- until a
    read returns its snapshot: from then on it has, and a count that still holds the task
    under its old status (an index entry the crash left behind) fails. Before that read,
    either count is possible."""
    new = saved(1, "w1-s1")  # PENDING -> RUNNING
    counted = {TaskStatus.PENDING: 4, TaskStatus.RUNNING: 1}  # the task under both
    r = Recorder()
    r.setup()
    r.save(1, new, 0, (1.0, None))  # killed: pending for ever
    r.get(2, "mix-t0", new, (2.0, 2.1))  # it took effect
    r.call(3, "counts", {}, "counts", {}, (3.0, 3.1), result=counted, summary=5)
    result = check(r.calls())
    assert [v.kind for v in result.violations] == ["counts-range"], result.report()
    assert "at most 3 task(s) could have been pending" in result.violations[0].explanation

    before = Recorder()
    before.setup()
    before.save(1, new, 0, (1.0, None))
    before.call(3, "counts", {}, "counts", {}, (3.0, 3.1),
                result={TaskStatus.PENDING: 4}, summary=4)
    before.get(2, "mix-t0", new, (4.0, 4.1))  # shown only after the count
    assert check(before.calls()).ok


def test_a_write_still_in_flight_that_a_read_has_shown_is_certain_from_that_read_on() -> None:
    """The same for a save that returns later (frozen between two of its requests while
    the check phase reads): a get shows its new status, so a counts() invoked after that
    get must count the task there, though the save has not returned yet. The twin: a
    counts() invoked before the get returned may still count either status."""
    new = saved(1, "w1-s1")  # PENDING -> RUNNING
    counted = {TaskStatus.PENDING: 4, TaskStatus.RUNNING: 1}  # the task under both
    r = Recorder()
    r.setup()
    r.save(1, new, 0, (1.0, 5.0))  # returns ok, long after the reads
    r.get(2, "mix-t0", new, (2.0, 2.1))
    r.call(3, "counts", {}, "counts", {}, (3.0, 3.1), result=counted, summary=5)
    result = check(r.calls())
    assert [v.kind for v in result.violations] == ["counts-range"], result.report()

    twin = Recorder()
    twin.setup()
    twin.save(1, new, 0, (1.0, 5.0))
    twin.call(3, "counts", {}, "counts", {}, (2.0, 2.05),
              result={TaskStatus.PENDING: 4}, summary=4)  # still pending: allowed
    twin.get(2, "mix-t0", new, (2.0, 2.1))
    assert check(twin.calls()).ok, check(twin.calls()).report()


def test_a_killed_save_a_later_certain_save_overtook_is_gone_once_that_save_returned() -> None:
    """A killed save expecting version 0 may take effect at any instant -- unless another
    save, also expecting 0, succeeded: versions only grow, so the killed one took effect
    before it or never, and once that save returned its value replaced the killed one's. A
    counts() invoked afterwards that still holds the task under the killed save's status
    (a stale index entry) fails. The twin: a counts() invoked while the overtaking save is
    in flight may still count either status."""
    killed = saved(1, "w1-s1", status=TaskStatus.RUNNING)
    won = saved(2, "w2-s1", status=TaskStatus.PENDING)
    counted = {TaskStatus.PENDING: 4, TaskStatus.RUNNING: 1}  # the task under both
    r = Recorder()
    r.setup()
    r.save(1, killed, 0, (1.0, None))  # killed: pending for ever
    r.save(2, won, 0, (2.0, 2.1))
    r.call(3, "counts", {}, "counts", {}, (3.0, 3.1), result=counted, summary=5)
    result = check(r.calls())
    assert [v.kind for v in result.violations] == ["counts-range"], result.report()
    assert "at most 0 task(s) could have been running" in result.violations[0].explanation

    twin = Recorder()
    twin.setup()
    twin.save(1, killed, 0, (1.0, None))
    twin.save(2, won, 0, (2.0, 2.1))
    twin.call(3, "counts", {}, "counts", {}, (2.05, 2.08),
              result={TaskStatus.PENDING: 3, TaskStatus.RUNNING: 1}, summary=4)
    assert check(twin.calls()).ok, check(twin.calls()).report()


def test_a_count_read_status_by_status_may_count_a_task_moved_inside_it_under_both() -> None:
    """The guide asks counts() for a number per status, not for one snapshot of them all: a
    key-value store reads its status indexes one after another, and a save taking effect
    between two of those reads is counted under both statuses (or neither). So a save in
    flight across the call may count its task twice -- the CI failure of 2026-12-07, the
    careful KvTaskStore counting a revived task under running and succeeded. The twin: the
    same count while nothing could move the task (two saves, both returned before the
    call: either status, never both) is out of the total."""
    moving = saved(1, "w1-s1", status=TaskStatus.RUNNING)
    twice = {TaskStatus.PENDING: 4, TaskStatus.RUNNING: 1}
    r = Recorder()
    r.setup()
    r.save(1, moving, 0, (1.0, 3.0))
    r.call(2, "counts", {}, "counts", {}, (2.0, 2.5), result=twice, summary=5)
    assert check(r.calls()).ok, check(r.calls()).report()

    twin = Recorder()
    twin.setup()
    twin.save(1, moving, 0, (1.0, 2.0))  # concurrent saves: running or succeeded at 3.0
    twin.save(2, saved(2, "w2-s1", status=TaskStatus.SUCCEEDED), 1, (1.5, 2.2))
    twin.call(3, "counts", {}, "counts", {}, (3.0, 3.1),
              result={TaskStatus.PENDING: 3, TaskStatus.RUNNING: 1,
                      TaskStatus.SUCCEEDED: 1}, summary=5)
    result = check(twin.calls())
    assert [v.kind for v in result.violations] == ["counts-range"], result.report()
    assert "returned 5 task(s) in all, but at most 4 could have been counted" in \
        result.violations[0].explanation
    assert [v.kind for v in check(_one_status(twin.calls())).violations] == []


def _one_status(calls: list[Any]) -> list[Any]:
    """``calls`` with the last counts() holding the moved task under one status only."""
    *rest, last = calls
    fixed = {TaskStatus.PENDING: 3, TaskStatus.SUCCEEDED: 1}
    return [*rest, dataclasses.replace(last, result=fixed)]


def test_a_write_explains_a_task_counted_twice_in_one_call_only() -> None:
    """A save whose writer was killed may take effect at any instant -- but at one: it
    explains a task counted under both statuses in one counts() call, not in every call
    after it (an index entry the crash left behind, counted for ever). The twin: one such
    call, or two that overlap (the instant may lie in both), passes."""
    moving = saved(1, "w1-s1", status=TaskStatus.RUNNING)
    twice = {TaskStatus.PENDING: 4, TaskStatus.RUNNING: 1}
    r = Recorder()
    r.setup()
    r.save(1, moving, 0, (1.0, None))  # killed: unknown for ever
    r.call(2, "counts", {}, "counts", {}, (2.0, 2.1), result=twice, summary=5)
    r.call(3, "counts", {}, "counts", {}, (3.0, 3.1), result=twice, summary=5)
    result = check(r.calls())
    assert [v.kind for v in result.violations] == ["counts-range"], result.report()
    assert "2 time(s) over 2 calls that do not overlap, but only 1 write(s)" in \
        result.violations[0].explanation

    once = Recorder()
    once.setup()
    once.save(1, moving, 0, (1.0, None))
    once.call(2, "counts", {}, "counts", {}, (2.0, 2.1), result=twice, summary=5)
    once.call(3, "counts", {}, "counts", {}, (3.0, 3.1),
              result={TaskStatus.PENDING: 3, TaskStatus.RUNNING: 1}, summary=4)
    assert check(once.calls()).ok, check(once.calls()).report()

    overlapping = Recorder()
    overlapping.setup()
    overlapping.save(1, moving, 0, (1.0, None))
    overlapping.call(2, "counts", {}, "counts", {}, (2.0, 2.5), result=twice, summary=5)
    overlapping.call(3, "counts", {}, "counts", {}, (2.2, 3.1), result=twice, summary=5)
    assert check(overlapping.calls()).ok, check(overlapping.calls()).report()


def test_a_duplicate_create_of_a_task_never_pruned_cannot_land_once_it_exists() -> None:
    """A create that raised (a duplicate id) has an unknown effect -- but a create lands
    only on a missing task, and a task never terminal is never pruned: once it certainly
    exists the create took effect before or never, so a count after that holds the task
    under the create's status fails. The twin: on a task a save made terminal (a prune may
    drop it, and the create land on the gap) the same count passes."""
    dup = saved(0, "w1-dup", status=TaskStatus.RUNNING)
    r = Recorder()
    r.setup()
    r.create(1, dup, (1.0, 1.1), outcome=FAILED)
    r.call(2, "counts", {}, "counts", {}, (2.0, 2.1),
           result={TaskStatus.PENDING: 3, TaskStatus.RUNNING: 1}, summary=4)
    result = check(r.calls())
    assert [v.kind for v in result.violations] == ["counts-range", "counts-range"], \
        result.report()
    assert "at most 0 task(s) could have been running" in result.violations[1].explanation

    twin = Recorder()
    twin.setup()
    twin.save(1, saved(1, "w1-s1", status=TaskStatus.SUCCEEDED), 0, (0.3, 0.4))
    twin.prune(2, 0, 1, (0.5, 0.6))
    twin.create(1, dup, (1.0, 1.1), outcome=FAILED)
    twin.call(2, "counts", {}, "counts", {}, (2.0, 2.1),
              result={TaskStatus.PENDING: 3, TaskStatus.RUNNING: 1}, summary=4)
    assert check(twin.calls()).ok, check(twin.calls()).report()


def test_a_prune_that_returned_dropped_every_task_terminal_throughout_it() -> None:
    """``prune(keep_terminal=0)`` drops every terminal task: one terminal at every instant
    of the prune is gone by its end, and a count after it that still holds the task fails.
    The twin: a touch of that task overlapping the prune may hold its row locked from a
    prune that skips locked rows, and the same count passes."""
    doomed = task("mix-done-w1-1", name="w1-done", status=TaskStatus.SUCCEEDED)
    kept = {TaskStatus.PENDING: 4, TaskStatus.SUCCEEDED: 1}
    r = Recorder()
    r.setup()
    r.create(1, doomed, (0.1, 0.2))
    r.prune(2, 0, 1, (1.0, 1.1))
    r.call(3, "counts", {}, "counts", {}, (2.0, 2.1), result=kept, summary=5)
    result = check(r.calls())
    assert "counts-range" in {v.kind for v in result.violations}, result.report()
    assert any("at most 0 task(s) could have been succeeded" in v.explanation
               for v in result.violations), result.report()

    twin = Recorder()
    twin.setup()
    twin.create(1, doomed, (0.1, 0.2))
    twin.renew(1, "mix-done-w1-1", 1, (0.9, 1.05))
    twin.prune(2, 0, 1, (1.0, 1.1))
    twin.call(3, "counts", {}, "counts", {}, (2.0, 2.1), result=kept, summary=5)
    assert "counts-range" not in {v.kind for v in check(twin.calls()).violations}, \
        check(twin.calls()).report()


def test_counts_during_a_create_may_count_the_new_task_or_not() -> None:
    r = Recorder()
    r.setup()
    r.create(1, task("late", name="late"), (1.0, 3.0))
    for pending in (4, 5):
        r.call(2, "counts", {}, "counts", {}, (2.0, 2.5),
               result={TaskStatus.PENDING: pending}, summary=pending)
    assert check(r.calls()).ok


def test_local_checks_claim_over_its_limit_and_query_out_of_order() -> None:
    r = Recorder()
    r.setup()
    a, b = command("a", "mix-t0", 0.0), command("b", "mix-t1", 1.0)
    r.submit(0, a, (0.1, 0.2))
    r.submit(0, b, (0.1, 0.2))
    r.claim(1, 0, 1, [leased(a, 0), leased(b, 0)], (1.0, 2.0))
    late = task("late", name="late", created_at=at(9))
    r.create(1, late, (2.1, 2.2))
    r.query(2, [late, *V0.values()], (3.0, 4.0))
    result = check(r.calls())
    messages = [v.explanation for v in result.violations if v.kind == "local"]
    assert any("limit=1) returned 2" in m for m in messages)
    assert any("out of created_at order" in m for m in messages)


# -- the model's nondeterminism ------------------------------------------------------------

def test_a_conflict_is_valid_only_where_the_version_differed() -> None:
    r = Recorder()
    r.setup()
    r.save(1, saved(1, "w1-s1"), 0, (1.0, 2.0), outcome="conflict")
    assert check(r.calls()).verdict is Verdict.VIOLATION  # nothing else wrote: it was at 0
    r2 = Recorder()
    r2.setup()
    r2.save(1, saved(1, "w1-s1"), 0, (1.0, 3.0))
    r2.save(2, saved(2, "w2-s2"), 0, (2.0, 4.0), outcome="conflict")  # lost the race
    assert check(r2.calls()).ok


def test_two_saves_from_one_version_cannot_both_succeed() -> None:
    r = Recorder()
    r.setup()
    r.save(1, saved(1, "w1-s1"), 0, (1.0, 3.0))
    r.save(2, saved(2, "w2-s2"), 0, (1.5, 3.5))
    result = check(r.calls())
    assert result.verdict is Verdict.VIOLATION
    assert len(result.violations[0].calls) == 2


def test_a_prune_may_drop_a_terminal_task_and_may_keep_its_commands() -> None:
    r = Recorder()
    r.setup()
    done = task("done", status=TaskStatus.SUCCEEDED)
    r.create(1, done, (0.1, 0.2))
    c = command("cd", "done", 0.0)
    r.submit(1, c, (0.3, 0.4))
    r.prune(0, 0, 1, (1.0, 2.0))
    r.get(2, "done", None, (3.0, 4.0))
    r.claim(2, 0, 1, [leased(c, 0)], (5.0, 6.0))  # PRUNE-COMMANDS is a SHOULD
    assert check(r.calls()).ok
    r.get(3, "done", done, (7.0, 8.0))  # but a dropped task never comes back
    assert check(r.calls()).verdict is Verdict.VIOLATION


def test_a_prune_that_returned_zero_dropped_nothing() -> None:
    r = Recorder()
    r.setup()
    done = task("done", status=TaskStatus.SUCCEEDED)
    r.create(1, done, (0.1, 0.2))
    r.prune(0, 5, 0, (1.0, 2.0))
    r.get(2, "done", None, (3.0, 4.0))
    assert check(r.calls()).verdict is Verdict.VIOLATION


def test_a_released_command_is_claimable_at_once_and_a_completed_one_never() -> None:
    r = Recorder()
    r.setup()
    c = command("c", "mix-t0", 0.0)
    r.submit(0, c, (0.1, 0.2))
    r.claim(1, 0, 1, [leased(c, 0)], (1.0, 2.0))
    r.release(1, "c", 0, (3.0, 4.0))
    r.claim(2, 0, 1, [leased(c, 0)], (5.0, 6.0))
    r.complete(2, "c", 0, (7.0, 8.0))
    assert check(r.calls()).ok
    r.claim(3, 9, 1, [leased(c, 9)], (9.0, 10.0))
    result = check(r.calls())
    assert result.verdict is Verdict.VIOLATION
    assert "finished at t+0s" in result.violations[0].explanation


def test_an_unrecorded_call_makes_the_history_unreadable() -> None:
    op = Op(0, 1, "save", 0, None, {"task": "x"}, 1.0, 2.0, ok=True)
    with pytest.raises(UnrecordedCalls, match="without record=True"):
        calls_from_logs(Logs(ops={0: [op]}, notes={0: []}))
    assert calls_from_logs(Logs(ops={0: [op]}, notes={0: []}), strict=False) == []


# -- (c) the budget ------------------------------------------------------------------------

def test_a_search_over_its_budget_is_not_verified_never_linearizable() -> None:
    r = Recorder()
    r.setup()
    for i in range(30):
        r.save(i % 4, saved(i + 1, f"s{i}"), i, (1.0 + i, 2.0 + i))
    result = check(r.calls(), budget=Budget(max_states=10))
    assert result.verdict is Verdict.INCONCLUSIVE and not result.ok
    assert "budget ran out" in (result.reason or "")
    summary = result.summary()
    assert summary.startswith("linearizability: NOT VERIFIED") and "10 states" in summary
    assert check(r.calls()).ok  # with the default budget it is decided


def test_a_violation_found_before_the_budget_ran_out_is_still_reported() -> None:
    r = Recorder()
    r.setup()
    r.get(1, "ghost", task("ghost"), (1.0, 2.0))  # a tiny partition, checked first
    for i in range(30):
        r.save(i % 4, saved(i + 1, f"s{i}"), i, (3.0 + i, 4.0 + i))
    result = check(r.calls(), budget=Budget(max_states=8))
    assert result.verdict is Verdict.VIOLATION
    assert result.reason is not None  # and the rest was not verified


# -- (d) minimisation ----------------------------------------------------------------------

def test_the_minimal_sub_history_is_small_and_still_fails() -> None:
    rng = random.Random(7)
    r = Recorder()
    r.setup()
    t, version, current = 1.0, 0, V0["mix-t0"]
    for i in range(120):
        w = i % 4
        snap = saved(version + 1, f"w{w}-s{i}")
        r.save(w, snap, version, (t, t + 0.4))
        version, current = version + 1, snap
        reader = (w + 1) % 4
        r.get(reader, "mix-t0", current, (t + 0.2 + rng.random() * 0.3, t + 0.9))
        t += 1.0
    stale = r.get(3, "mix-t0", saved(50, "w1-s49"), (t + 1.0, t + 1.5))
    calls = r.calls()
    result = check(calls)
    (v,) = result.violations
    assert v.minimal and len(v.calls) == 2 and not v.background, v
    assert stale.seq in {c.seq for c in v.calls if c.process == "w3"}
    # The core is a proof: with it as recorded and every other call weakened, it fails.
    (part,) = [p for p in partition_history(calls) if p.name == "task 'mix-t0'"]
    core = [i for i, p in enumerate(part.projections) if p.call in v.calls]
    assert len(core) == 2
    outcome, _ = trial(part, core, Meter(10**6, math.inf))
    assert outcome is not None and not outcome.ok
    assert "»" in v.timeline and "get('mix-t0')" in v.timeline


# -- (e) soundness: correct executions are always linearizable -----------------------------

TIDS = ("a", "b")
CIDS = ("c1", "c2", "c3")


def _snap(tid: str, version: int, status: TaskStatus, name: str) -> TaskSnapshot:
    return TaskSnapshot(task_id=tid, name=name, status=status, status_version=version,
                        created_at=at(len(tid)), updated_at=at(version))


@st.composite
def _op(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    tid = draw(st.sampled_from(TIDS))
    cid = draw(st.sampled_from(CIDS))
    status = draw(st.sampled_from([TaskStatus.PENDING, TaskStatus.RUNNING,
                                   TaskStatus.SUCCEEDED]))
    version = draw(st.integers(0, 3))
    now = at(draw(st.integers(0, 4)))
    kind = draw(st.sampled_from(["create", "save", "get", "touch", "append", "history",
                                 "query", "counts", "submit_command", "claim_commands",
                                 "complete_command", "release_command", "prune"]))
    name = f"n{draw(st.integers(0, 9))}"
    args: dict[str, Any] = {
        "create": {"snapshot": _snap(tid, 0, status, name)},
        "save": {"snapshot": _snap(tid, version + draw(st.integers(1, 2)), status, name),
                 "expect_version": version},
        "get": {"task_id": tid},
        "touch": {"task_id": tid, "progress": Progress(done=version),
                  "heartbeat_at": None, "lease_owner": name, "lease_until": now},
        "append": {"transition": Transition(tid, version, None, status, at(version),
                                            reason=name)},
        "history": {"task_id": tid, "since_version": draw(st.integers(0, 1))},
        "query": {"query": draw(st.sampled_from([None, TaskQuery(limit=1),
                                                 TaskQuery(statuses={TaskStatus.RUNNING}),
                                                 TaskQuery(newest_first=True, limit=1)]))},
        "counts": {},
        "submit_command": {"command": Command(cid, tid, CommandKind.STOP, name,
                                              at(CIDS.index(cid) // 2))},
        "claim_commands": {"now": now, "lease_seconds": 2.0, "limit": draw(st.integers(0, 2))},
        "complete_command": {"command_id": cid, "now": now, "outcome": name},
        "release_command": {"command_id": cid, "now": now},
        "prune": {"keep_terminal": draw(st.integers(0, 1))},
    }[kind]
    return kind, args


@st.composite
def _execution(draw: st.DrawFn) -> list[Call]:
    """Processes run their programs on one correct store; each call takes effect at one
    instant between its invoke and its return (chosen by the schedule); some raise at
    the end whether or not they took effect; some never return."""
    store = InMemoryTaskStore()
    n = draw(st.integers(2, 4))
    programs = [draw(st.lists(_op(), min_size=1, max_size=7)) for _ in range(n)]
    schedule = draw(st.lists(st.integers(0, n - 1), min_size=5, max_size=120))
    flaky = draw(st.sets(st.integers(0, 40), max_size=4))
    position = [0] * n
    phase = ["idle"] * n
    current: list[dict[str, Any]] = [{} for _ in range(n)]
    calls: list[Call] = []
    clock = 0.0
    counter = 0
    for p in schedule:
        clock += 1.0
        if phase[p] == "idle":
            if position[p] >= len(programs[p]):
                continue
            method, args = programs[p][position[p]]
            current[p] = {"method": method, "args": args, "t_invoke": clock, "id": counter}
            counter += 1
            phase[p] = "invoked"
        elif phase[p] == "invoked":
            c = current[p]
            skip = c["id"] in flaky and c["id"] % 2 == 0  # fails before taking effect
            if not skip:
                try:
                    c["result"] = getattr(store, c["method"])(**c["args"])
                    c["outcome"] = Outcome.OK
                except ConcurrencyConflict:
                    c["outcome"] = Outcome.CONFLICT
                except StoreError:
                    c["outcome"] = Outcome.FAILED
            if c["id"] in flaky:
                c["outcome"] = Outcome.FAILED  # raises afterwards, effect or not
            phase[p] = "applied"
        else:
            c = current[p]
            outcome = c.get("outcome", Outcome.FAILED)
            result = c.get("result")
            calls.append(Call(
                id=len(calls), process=f"w{p}", method=c["method"], args=c["args"],
                outcome=outcome, t_invoke=c["t_invoke"], t_return=clock,
                result=list(result) if isinstance(result, list | tuple) else
                dict(result) if isinstance(result, dict) else result
                if outcome is Outcome.OK else None))
            position[p] += 1
            phase[p] = "idle"
    for p in range(n):  # killed mid-call: may or may not have taken effect
        if phase[p] != "idle":
            c = current[p]
            calls.append(Call(id=len(calls), process=f"w{p}", method=c["method"],
                              args=c["args"], outcome=Outcome.PENDING,
                              t_invoke=c["t_invoke"]))
    return calls


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_execution())
def test_every_execution_of_a_correct_store_is_linearizable(calls: list[Call]) -> None:
    result = check(calls)
    assert result.verdict is Verdict.LINEARIZABLE, result.report()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_execution())
def test_a_store_that_never_skips_passes_the_strict_skip_policy(calls: list[Call]) -> None:
    result = check(calls, skip="concurrent")
    assert result.verdict is Verdict.LINEARIZABLE, result.report()


def test_a_store_with_one_stale_read_is_caught_in_random_executions() -> None:
    """The same executions against a store whose get returns the previous snapshot once."""
    caught = 0
    for seed in range(40):
        rng = random.Random(seed)
        store = InMemoryTaskStore()
        calls: list[Call] = []
        snap = _snap("a", 0, TaskStatus.PENDING, "n")
        store.create(snap)
        calls.append(Call(0, "w0", "create", {"snapshot": snap}, Outcome.OK, 0.0, 0.5))
        previous = snap
        for i in range(1, 30):
            new = _snap("a", i, TaskStatus.RUNNING, f"n{i}")
            store.save(new, expect_version=i - 1)
            calls.append(Call(len(calls), "w1", "save", {"snapshot": new,
                                                         "expect_version": i - 1},
                              Outcome.OK, float(i), i + 0.4))
            got = store.get("a")
            if rng.random() < 0.1:
                got = previous  # the bug
            calls.append(Call(len(calls), "w2", "get", {"task_id": "a"}, Outcome.OK,
                              i + 0.5, i + 0.9, result=got))
            previous = new
        caught += not check(calls).ok
    assert caught >= 30


def test_times_are_real_time_order_not_log_order() -> None:
    """A call logged first but invoked later is ordered by its stamps."""
    r = Recorder()
    r.setup()
    r.get(2, "mix-t0", saved(1, "w1-s1"), (5.0, 6.0))  # logged first
    r.save(1, saved(1, "w1-s1"), 0, (1.0, 2.0))
    assert check(r.calls()).ok
    assert [c.method for c in r.calls()][-2:] == ["save", "get"]


def test_a_check_reports_what_it_did() -> None:
    r = Recorder()
    r.setup()
    r.save(1, saved(1, "w1-s1"), 0, (1.0, 2.0))
    r.submit(0, command("c", "mix-t0", 0.0), (1.0, 2.0))
    result = check(r.calls())
    assert result.calls == 6 and result.partitions == 5 and result.states > 0
    assert result.seconds >= 0 and result.budget == Budget()
    assert result.largest == ("task 'mix-t0'", 2)
    summary = result.summary()
    assert "LINEARIZABLE: 6 calls, 5 partitions" in summary and "budget" in summary
