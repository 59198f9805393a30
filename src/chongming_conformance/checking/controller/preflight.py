"""When a controller check fails: was it the controller workload, or a basic call under it?

A controller drives every store call at once. A store whose ``create`` drops the
version fails CTRL-PLUGS-IN, CTRL-OUTAGE-RECOVERY and CTRL-RESTART-RECOVERY too --
but those are knock-ons of CREATE-THEN-GET, and a report that paints them red sends
the author hunting in the wrong place. So when a controller check fails,
:func:`explain` replays, on a fresh store, the few single calls a controller relies on
(each checked the way the contract checks it and blamed on its own clause). If one of
them breaks, the check's failure is blamed on that clause (a knock-on: the check's own
clause is then NOT VERIFIED with a note naming it); if all hold, the failure stands as
the controller clause's own.

Only a broken *foundation* explains a controller failure away: a store that cannot
hold or find what it is given (:data:`FOUNDATION`; a save that loses fields is one, and so
is a query filter or a count the controller's dashboard reads pass straight through). The
traps the controller clauses exist to show in a deployment's terms -- a save that writes
the lease, a version skip refused, a touch that bumps the version, a release that
completes, a claim that ignores
a lease, a replayed append that duplicates -- stay the controller clause's FAIL (next to
the single-call clause's own), because "your stop request never reaches its holder" is
what that bug does, not a side effect of it.

It runs only after a failure, so a passing run pays nothing, and on a store of its
own, so its probe rows never show up in what a check asserts.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from ...oracle.assertions import expect_raises
from ...oracle.blame import blame, blamed, notes_blame, same_snapshot
from ...oracle.confirm import confirming
from ...protocol import TaskStore
from ...protocol.errors import ConcurrencyConflict
from ...protocol.model import (
    Command,
    CommandKind,
    Progress,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from ..observe import all_tasks, read_task

__all__ = ["FOUNDATION", "explain", "preflight"]

#: Clauses whose break makes every controller check fail for a reason of its own.
FOUNDATION: frozenset[str] = frozenset({
    "CREATE-THEN-GET",
    "GET-MISSING-NONE",
    "SAVE-CAS",
    "SNAPSHOT-FULL-ROUNDTRIP",
    "TIME-UTC-ROUNDTRIP",
    "TRANSITION-ROUNDTRIP",
    "HISTORY-ORDERED",
    "QUERY-ALL",
    "QUERY-STATUSES",
    # the reads a dashboard makes (list_tasks, tasks_in_buckets, bucket_counts, stats):
    # a store that cannot find what it holds shows every controller read wrong
    "QUERY-TAG-EXACT",
    "QUERY-PIPELINE",
    "QUERY-BUCKETS",
    "COUNTS-PER-STATUS",
    "SUBMIT-THEN-CLAIM",
    "TOUCH-ONLY-NAMED-FIELDS",
    "TOUCH-LEASE",
})

_T0 = datetime(2030, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)


def _at(seconds: float) -> datetime:
    return _T0 + timedelta(seconds=seconds)


def _probe() -> TaskSnapshot:
    """A running task with every field a controller writes."""
    return TaskSnapshot(
        task_id="preflight-1",
        name="preflight",
        status=TaskStatus.RUNNING,
        status_version=1,
        created_at=_at(0),
        updated_at=_at(1),
        started_at=_at(1),
        progress=Progress(done=1, total=2, message="half"),
        heartbeat_at=_at(1),
        bucket=0,
        tags=frozenset({"preflight"}),
    )


def preflight(store: TaskStore) -> None:
    """The single calls a controller relies on, each blamed on its own clause on failure."""
    probe = _probe()
    blamed(("CREATE-THEN-GET",), lambda: store.create(probe))
    same_snapshot(probe, read_task(store, probe.task_id, exists=True), "get() after create()",
                  clause="CREATE-THEN-GET")
    # touch: fields set, version unmoved (a controller's heartbeat and lease path)
    blamed(("TOUCH-ONLY-NAMED-FIELDS",), lambda: store.touch(
        probe.task_id, progress=Progress(done=2, total=2, message="done"),
        heartbeat_at=_at(2), lease_owner="preflight", lease_until=_at(30),
    ))
    touched = replace(probe, progress=Progress(done=2, total=2, message="done"),
                      heartbeat_at=_at(2), lease_owner="preflight", lease_until=_at(30))
    same_snapshot(touched, read_task(store, probe.task_id, exists=True), "get() after touch()",
                  lease_clause="TOUCH-LEASE", version_clause="TOUCH-NO-VERSION",
                  clause="TOUCH-ONLY-NAMED-FIELDS")
    # save: a version jump (an outage replays buffered transitions), the lease kept
    done = replace(probe, status=TaskStatus.SUCCEEDED, status_version=4, finished_at=_at(3),
                   updated_at=_at(3), lease_owner=None, lease_until=None)
    blamed(("SAVE-VERSION-SKIP",), lambda: store.save(done, expect_version=1))
    same_snapshot(replace(done, lease_owner="preflight", lease_until=_at(30)),
                  read_task(store, probe.task_id, exists=True), "get() after save()",
                  lease_clause="SAVE-KEEPS-LEASE", clause="SAVE-CAS")
    blamed(("SAVE-CONFLICT-RAISES",), lambda: expect_raises(
        ConcurrencyConflict, lambda: store.save(replace(done, status_version=5),
                                                expect_version=1),
        "save() with a stale expect_version",
    ))
    # history: appended transitions read back in order, a replay is a no-op
    rows = [Transition(probe.task_id, v, f, t, _at(v), "preflight") for v, f, t in (
        (1, TaskStatus.PENDING, TaskStatus.RUNNING), (4, TaskStatus.RUNNING, TaskStatus.SUCCEEDED),
    )]
    for row in (*rows, rows[0]):
        blamed(("APPEND-IDEMPOTENT",), lambda row=row: store.append(row))  # type: ignore[misc]
    got = blamed(("HISTORY-ORDERED",), lambda: list(store.history(probe.task_id)))
    _check(got == rows, ("TRANSITION-ROUNDTRIP",), f"history() is {got!r}, appended {rows!r}")
    # reads a controller's dashboard and reconcile make
    _check([t.task_id for t in all_tasks(store)] == [probe.task_id], ("QUERY-ALL",),
           "query() does not list the one stored task")
    by_status = blamed(("QUERY-STATUSES",), lambda: list(
        store.query(TaskQuery(statuses=frozenset({TaskStatus.SUCCEEDED})))
    ))
    _check([t.task_id for t in by_status] == [probe.task_id], ("QUERY-STATUSES",),
           "query(statuses={SUCCEEDED}) misses the succeeded task")
    _dashboard_reads(store, probe)
    # the command queue: submit, claim, release, claim again, complete
    stop = Command("preflight-c", probe.task_id, CommandKind.STOP, "preflight", _at(0))
    blamed(("SUBMIT-THEN-CLAIM",), lambda: store.submit_command(stop))
    first = _claim(store, _at(5), "SUBMIT-THEN-CLAIM")
    _check([c.command_id for c in first] == [stop.command_id], ("SUBMIT-THEN-CLAIM",),
           f"claim after submit returned {[c.command_id for c in first]!r}")
    _check(_claim(store, _at(6), "CLAIM-LEASE-EXCLUSIVE") == [], ("CLAIM-LEASE-EXCLUSIVE",),
           "a command under an unexpired lease was claimed again")
    blamed(("RELEASE-NOT-COMPLETE",), lambda: store.release_command(stop.command_id, now=_at(7)))
    again = _claim(store, _at(8), "RELEASE-NOT-COMPLETE")
    _check([c.command_id for c in again] == [stop.command_id], ("RELEASE-NOT-COMPLETE",),
           "a released command was not claimable again")
    blamed(("COMPLETE-NEVER-RECLAIMED",),
           lambda: store.complete_command(stop.command_id, now=_at(9), outcome="stopped"))
    _check(_claim(store, _at(100), "COMPLETE-NEVER-RECLAIMED") == [],
           ("COMPLETE-NEVER-RECLAIMED",), "a completed command was claimed again")


def _dashboard_reads(store: TaskStore, probe: TaskSnapshot) -> None:
    """The reads behind ``list_tasks``, ``tasks_in_buckets``, ``bucket_counts`` and
    ``stats``, each a plain store call checked on its own clause: with a second task
    (another status, bucket, run id and tag) beside ``probe`` (SUCCEEDED by now, after a
    RUNNING create), so a filter the store ignores returns both and counts kept from
    creates alone still show RUNNING."""
    other = replace(probe, task_id="preflight-2", status=TaskStatus.PENDING, status_version=1,
                    created_at=_at(1), updated_at=_at(1), started_at=None, progress=None,
                    heartbeat_at=None, bucket=1, tags=frozenset({"preflight-other"}),
                    pipeline_run_id="preflight-run")
    blamed(("CREATE-THEN-GET",), lambda: store.create(other))
    for clause, query, want in (
        ("QUERY-TAG-EXACT", TaskQuery(tag="preflight"), probe.task_id),
        ("QUERY-PIPELINE", TaskQuery(pipeline_run_id="preflight-run"), other.task_id),
        ("QUERY-BUCKETS", TaskQuery(buckets=frozenset({1})), other.task_id),
    ):
        got = blamed((clause,), lambda query=query: [  # type: ignore[misc]
            t.task_id for t in store.query(query)])
        _check(got == [want], (clause,), f"{query!r} returned {got!r}, expected [{want!r}]")
    counts = blamed(("COUNTS-PER-STATUS",), lambda: dict(store.counts()))
    nonzero = {status: n for status, n in counts.items() if n}
    _check(nonzero == {TaskStatus.SUCCEEDED: 1, TaskStatus.PENDING: 1}, ("COUNTS-PER-STATUS",),
           f"counts() with one succeeded (created running) and one pending task: {counts!r}")


def _claim(store: TaskStore, now: datetime, clause: str) -> list[Command]:
    return blamed((clause,), lambda: list(store.claim_commands(now=now, lease_seconds=30.0)))


def _check(ok: bool, clauses: tuple[str, ...], message: str) -> None:
    if not ok:
        exc = AssertionError(message)
        blame(exc, clauses)
        raise exc


def explain(failure: BaseException, open_fresh: Callable[[], TaskStore]) -> None:
    """Blame ``failure`` on the :data:`FOUNDATION` clause a fresh store's :func:`preflight`
    breaks, if any.

    ``failure`` keeps its own blame if it has one. The preflight's own error is added
    as a note, so the report says what the knock-on came from.
    """
    if notes_blame(failure):
        return
    try:
        # A culprit the replay guesses (only datetimes differ...) is re-checked on yet
        # another fresh store before it counts (confirm.py).
        with confirming(lambda: contextlib.closing(open_fresh())):
            preflight(open_fresh())
    except Exception as found:  # any failure of the replay is the finding
        clauses = notes_blame(found)
        if clauses and set(clauses) <= FOUNDATION:
            failure.add_note(
                f"knock-on: on a fresh store, a basic call a controller relies on fails "
                f"({', '.join(clauses)}): {type(found).__name__}: {found}"
            )
            blame(failure, clauses)
