"""Confirming a guessed culprit on a fresh store before blaming it.

Some blames are read off the *shape* of a wrong answer: only datetimes differ,
so the store must mangle time (TIME-UTC-ROUNDTRIP); other data fields differ,
so it must mangle that field (SNAPSHOT-FULL-ROUNDTRIP); the order follows the
wall clock, so it must compare text (TIME-INSTANT-ORDER). The shape can lie: a
``release_command`` that re-queues a command with a new ``created_at`` makes the
next claim differ "only in a datetime", yet times round-trip perfectly. Blaming
the guess would FAIL a clause the store keeps, and mark nothing wrong where the
real bug is.

So a guess is only a *suspect*. The check bases install a confirmer
(:func:`confirming`) that opens a fresh store through their seam; a culprit
function asks :func:`confirmed` to run a targeted probe there -- write the very
record that came back wrong, read it back, and see whether the same kind of
difference appears. The probe decides:

* confirmed (True): the guessed clause is blamed;
* refuted (False): the round trip (or the order) is fine on its own, so the call
  under test is what changed the record: the operation's own clause is blamed,
  as it would have been without the guess;
* could not run (None: no confirmer, or the probe itself raised): the failure is
  left unattributed (:data:`chongming_conformance.oracle.blame.UNCONFIRMED`), so the
  clauses the check declares are NOT VERIFIED and the report quotes the
  difference.

Never FAIL by guesswork, never PASS beside the failure.

A probe carries no structure of its own that a store could trip on: every command goes to
a task of its own (a store keeping one command per task, replacing or refusing a second,
would otherwise "confirm" an ordering bug it does not have), every task and command has a
fresh id of the controller's own shape (32 hex characters, which LENGTH-IDS requires a
store to take), and the only datetimes are the ones under suspicion or modest ones before
2038 (a store refusing later ones would otherwise leave every probe unable to run).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta, timezone

from ..protocol import TaskStore
from ..protocol.errors import StoreError
from ..protocol.model import Command, CommandKind, TaskQuery, TaskSnapshot, TaskStatus, Transition

__all__ = [
    "UNCONFIRMED",
    "Probe",
    "claim_leases_beyond_limit",
    "claim_order_follows_wall_clock",
    "command_times_change",
    "confirmed",
    "confirming",
    "decide",
    "lease_cut_short",
    "lease_drawn_out",
    "lease_from_wall_clock",
    "limit_before_filter",
    "query_admits",
    "query_order_follows_wall_clock",
    "release_reopens_finished",
    "set_filter_ignored",
    "snapshot_fields_change",
    "snapshot_times_change",
    "ties_dropped",
    "touch_moves_version",
    "transition_times_change",
    "write_refused",
]

#: What a culprit is when its re-check could not run: the failure is then blamed on no
#: clause, and no outer rule blames it either (``blame.blame`` writes it as such).
UNCONFIRMED = "none (a guessed culprit could not be re-checked on a fresh store)"

#: A targeted re-check: given a fresh, empty store, True if the suspected bug shows.
Probe = Callable[[TaskStore], bool]

_CONFIRMER: ContextVar[Callable[[Probe], bool] | None] = ContextVar(
    "chongming_confirmer", default=None
)
_ids = itertools.count(1)


@contextlib.contextmanager
def confirming(open_store: Callable[[], contextlib.AbstractContextManager[TaskStore]]
               ) -> Iterator[None]:
    """Within the block, :func:`confirmed` runs probes on stores ``open_store`` opens."""

    def confirm(probe: Probe) -> bool:
        with open_store() as store:
            return probe(store)

    token = _CONFIRMER.set(confirm)
    try:
        yield
    finally:
        _CONFIRMER.reset(token)


def confirmed(probe: Probe) -> bool | None:
    """Whether ``probe`` reproduces the suspected bug on a fresh store: True (confirmed),
    False (refuted), or None when it could not be run (no confirmer installed, or the probe
    raised: a store that cannot even run the probe has shown nothing either way)."""
    confirm = _CONFIRMER.get()
    if confirm is None:
        return None
    _CONFIRMER.set(None)  # a probe's own failures never probe again
    try:
        return bool(confirm(probe))
    except Exception:
        return None
    finally:
        _CONFIRMER.set(confirm)


def decide(probe: Probe, suspect: str, otherwise: str) -> str:
    """``suspect`` if the probe confirms it, ``otherwise`` if it refutes it, and
    ``blame.UNCONFIRMED`` if it could not run."""
    verdict = confirmed(probe)
    if verdict is None:
        return UNCONFIRMED
    return suspect if verdict else otherwise


def _fresh_id() -> str:
    """A task or command id never used before in this process, shaped like the ids the
    controller makes (``uuid4().hex``: 32 lowercase hex characters), so no store that
    takes the controller's ids can refuse it."""
    return f"{next(_ids):032x}"


def _command(at: datetime) -> Command:
    """A fresh, unleased command for a fresh task of its own: no probe relies on two
    commands sharing a task (a store may keep one command per task)."""
    return Command(_fresh_id(), _fresh_id(), CommandKind.STOP, "kit", at)


def _times(record: object) -> dict[str, object]:
    return {f.name: getattr(record, f.name) for f in fields(record)  # type: ignore[arg-type]
            if isinstance(getattr(record, f.name), datetime)}


def _others(record: object, skip: Sequence[str]) -> dict[str, object]:
    return {f.name: getattr(record, f.name) for f in fields(record)  # type: ignore[arg-type]
            if f.name not in skip and not isinstance(getattr(record, f.name), datetime)}


def _created(store: TaskStore, snapshot: TaskSnapshot) -> TaskSnapshot | None:
    probe = replace(snapshot, task_id=_fresh_id())
    store.create(probe)
    got = store.get(probe.task_id)
    return None if got is None else replace(got, task_id=snapshot.task_id)


def snapshot_times_change(snapshot: TaskSnapshot) -> Probe:
    """create + get of ``snapshot``: does a datetime come back as another instant?"""

    def probe(store: TaskStore) -> bool:
        got = _created(store, snapshot)
        return got is not None and _times(got) != _times(snapshot)

    return probe


def snapshot_fields_change(snapshot: TaskSnapshot) -> Probe:
    """create + get of ``snapshot``: does a field other than times and the version change?"""

    def probe(store: TaskStore) -> bool:
        got = _created(store, snapshot)
        skip = ("task_id",)
        return got is not None and _others(got, skip) != _others(snapshot, skip)

    return probe


def transition_times_change(transition: Transition) -> Probe:
    """append + history of ``transition`` (for a task created first): is ``at`` moved?"""

    def probe(store: TaskStore) -> bool:
        task_id = _fresh_id()
        at = transition.at
        store.create(TaskSnapshot(task_id, "probe", TaskStatus.PENDING, 0, at, at))
        store.append(replace(transition, task_id=task_id))
        rows = [r for r in store.history(task_id) if r.version == transition.version]
        return len(rows) == 1 and rows[0].at != transition.at

    return probe


def command_times_change(command: Command) -> Probe:
    """submit + claim of ``command``: does ``created_at`` (or the lease) come back moved?"""

    def probe(store: TaskStore) -> bool:
        # The record under suspicion, for a task of its own, claimed at its own creation
        # time: no date the store was not already given.
        sent = replace(command, command_id=_fresh_id(), task_id=_fresh_id(),
                       lease_until=None, finished_at=None)
        store.submit_command(sent)
        got = [c for c in store.claim_commands(now=sent.created_at, lease_seconds=1.0,
                                               limit=10)
               if c.command_id == sent.command_id]
        return len(got) == 1 and got[0].created_at != sent.created_at

    return probe


def write_refused(*records: object) -> Probe:
    """Each of ``records`` written as it is, on a fresh store: is one refused
    (``StoreError``)? A refusal blamed on an unusual value (a datetime past 2038, a long
    id) must show on its own: a store that refused a create because an id it mangled
    already named another task (``'t1'`` stored as ``'t1 '``) takes the same snapshot on an
    empty store, and the refusal is then the write's own failure."""

    def probe(store: TaskStore) -> bool:
        try:
            for record in records:
                if isinstance(record, TaskSnapshot):
                    store.create(record)
                elif isinstance(record, Transition):
                    # Its task first, at an ordinary instant: only the transition's own
                    # values are under suspicion.
                    store.create(TaskSnapshot(record.task_id, "probe", TaskStatus.PENDING, 0,
                                              _ORDINARY, _ORDINARY))
                    store.append(record)
                elif isinstance(record, Command):
                    store.submit_command(replace(record, lease_until=None, finished_at=None))
        except StoreError:
            return True
        return False

    return probe


#: A modest instant for the records a probe writes around the one under suspicion.
_ORDINARY = datetime(2020, 1, 1, tzinfo=UTC)


def _wall(value: datetime) -> datetime:
    return value.replace(tzinfo=None)


def query_order_follows_wall_clock(created: Sequence[datetime]) -> Probe:
    """Tasks created at ``created`` (as given, offsets and all): does ``query()`` order
    them by wall-clock text where that differs from the instant?"""

    def probe(store: TaskStore) -> bool:
        # Written newest wall clock first, so neither insertion order nor instant order
        # can pass for the wall-clock order. Read back by id: a store that mangles the
        # times themselves returns other values, and the order of the ids is the question.
        sent: dict[str, datetime] = {}
        for at in sorted(created, key=_wall, reverse=True):
            task_id = _fresh_id()
            sent[task_id] = at
            store.create(TaskSnapshot(task_id, "probe", TaskStatus.PENDING, 0, at, at))
        got = [sent[t.task_id] for t in store.query() if t.task_id in sent]
        by_instant = sorted(got, key=lambda t: t.astimezone(UTC))
        by_wall = sorted(got, key=_wall)
        return got != by_instant and got == by_wall

    return probe


def claim_order_follows_wall_clock(created: Sequence[datetime], count: int = 1) -> Probe:
    """Commands created at ``created``: does a claim of ``count`` take the ``count``
    wall-clock oldest where those are not the ``count`` instant-oldest?

    ``count`` is the size of the claim that came back wrong: a store ordering by wall clock
    may take the same first command as by instant and differ only in a later pick, which a
    claim of one never shows."""

    def probe(store: TaskStore) -> bool:
        # One command per task, each task fresh: a store keeping one command per task
        # (replacing or refusing a second) would otherwise be left with only the last one
        # written -- the wall-clock oldest -- and "confirm" an order it never applied.
        sent: dict[str, datetime] = {}
        for at in sorted(created, key=_wall, reverse=True):  # see the query's
            sent_command = _command(at)
            sent[sent_command.command_id] = at
            store.submit_command(sent_command)
        now = max(created, key=lambda t: t.astimezone(UTC))  # no date it was not given
        got = list(store.claim_commands(now=now, lease_seconds=1.0, limit=count))
        ids = [c.command_id for c in got]
        if (len(ids) != min(count, len(sent)) or len(set(ids)) != len(ids)
                or not set(ids) <= set(sent)):
            return False  # another bug (the limit, a lost command): not this one
        taken = [sent[i] for i in ids]  # what was submitted, whatever came back
        left = [at for i, at in sent.items() if i not in set(ids)]
        return (not _first_by(taken, left, lambda t: t.astimezone(UTC))
                and _first_by(taken, left, _wall))

    return probe


def _first_by(taken: Sequence[datetime], left: Sequence[datetime],
              key: Callable[[datetime], datetime]) -> bool:
    """Is every time taken at or before every time left, by ``key`` (ties either way)?"""
    return not taken or not left or max(map(key, taken)) <= min(map(key, left))


def set_filter_ignored(field: str) -> Probe:
    """Two tasks, one in a set filter's value and one not: does ``query(field={value})``
    (``statuses`` or ``buckets``, a non-empty set) return the one that does not match?

    An empty set that matches everything is what a store ignoring the filter altogether
    does too; this tells that store (the filter's own clause) from one that mistakes only
    the empty set for "no filter" (QUERY-EMPTY-SET-MATCHES-NOTHING)."""

    def probe(store: TaskStore) -> bool:
        at = datetime(2031, 1, 1, tzinfo=UTC)
        inside, outside = _fresh_id(), _fresh_id()
        if field == "statuses":
            values = {inside: TaskStatus.RUNNING, outside: TaskStatus.PENDING}
            query = TaskQuery(statuses=frozenset({TaskStatus.RUNNING}))
            for task_id, status in values.items():
                store.create(TaskSnapshot(task_id, "probe", status, 0, at, at))
        elif field == "buckets":
            query = TaskQuery(buckets=frozenset({7}))
            for task_id, bucket in ((inside, 7), (outside, 8)):
                store.create(TaskSnapshot(task_id, "probe", TaskStatus.PENDING, 0, at, at,
                                          bucket=bucket))
        else:
            raise ValueError(f"not a set filter: {field!r}")
        got = [t.task_id for t in store.query(query)]
        return outside in got

    return probe


def query_admits(task: TaskSnapshot, query: TaskQuery) -> Probe:
    """``task`` alone in a fresh store (under a fresh id): does ``query`` (without its
    limit) return it? Asked of a task a query should have left out: with the one filter it
    fails alone (that filter is broken) and with the whole query (the filters are not
    ANDed when only the whole query lets it through)."""

    def probe(store: TaskStore) -> bool:
        sent = replace(task, task_id=_fresh_id())
        store.create(sent)
        got = store.query(replace(query, limit=None))
        return sent.task_id in [t.task_id for t in got]

    return probe


def touch_moves_version() -> Probe:
    """A task at version 1 touched (heartbeat and progress): is its ``status_version``
    other than 1 afterwards? A controller whose status save then conflicts with its own
    heartbeat shows this, not a second writer."""

    def probe(store: TaskStore) -> bool:
        at = datetime(2031, 1, 1, tzinfo=UTC)
        task_id = _fresh_id()
        store.create(TaskSnapshot(task_id, "probe", TaskStatus.RUNNING, 1, at, at))
        store.touch(task_id, heartbeat_at=at + timedelta(seconds=1))
        got = store.get(task_id)
        return got is not None and got.status_version != 1

    return probe


def claim_leases_beyond_limit() -> Probe:
    """Two free commands and a claim of one: is the other one leased too (not claimable by
    the next claim at the same ``now``)?

    A claim that leases more than it returns hides commands from every later claim, so
    they look *missing* -- as if submit, release or expiry had lost them. This tells the
    hidden lease apart (CLAIM-LIMIT) from those."""

    def probe(store: TaskStore) -> bool:
        at = datetime(2001, 1, 1, tzinfo=UTC)
        first, second = _command(at), _command(at + timedelta(seconds=1))
        store.submit_command(first)
        store.submit_command(second)
        now = datetime(2031, 1, 1, tzinfo=UTC)
        taken = [c.command_id for c in store.claim_commands(now=now, lease_seconds=60.0,
                                                             limit=1)]
        if taken != [first.command_id]:
            return False  # another bug (order, limit ignored outright): not this one
        rest = [c.command_id for c in store.claim_commands(now=now, lease_seconds=60.0,
                                                            limit=10)]
        return second.command_id not in rest

    return probe


def release_reopens_finished() -> Probe:
    """A completed command that claims no longer hand out: does ``release_command`` make it
    claimable again?

    A finished command that comes back right after a release was either reopened by the
    release (RELEASE-FINISHED-NOOP) or never finished by the complete before it
    (COMPLETE-NEVER-RECLAIMED): the last call is no proof. A complete that leaves the
    command claimable is the other bug, not this one."""

    def probe(store: TaskStore) -> bool:
        at = datetime(2031, 1, 1, tzinfo=UTC)

        def taken(when: float) -> bool:
            got = store.claim_commands(now=at + timedelta(seconds=when), lease_seconds=1.0,
                                       limit=10)
            return sent.command_id in [c.command_id for c in got]

        sent = _command(at)
        store.submit_command(sent)
        store.complete_command(sent.command_id, now=at, outcome="probe")
        if taken(0):
            return False
        store.release_command(sent.command_id, now=at + timedelta(seconds=1))
        return taken(2)

    return probe


def _lease_probe(after: float) -> Probe:
    """A 1.5 s lease claimed at ``at``: held at +0.5 s (a lease that does not hold at all is
    another bug, not this one), expired at +30 s (likewise one that never ends), and then
    the question: claimable ``after`` seconds in?"""

    def probe(store: TaskStore) -> bool:
        at = datetime(2031, 1, 1, tzinfo=UTC)

        def taken(when: float) -> bool:
            got = store.claim_commands(now=at + timedelta(seconds=when), lease_seconds=1.5,
                                       limit=10)
            return sent.command_id in [c.command_id for c in got]

        sent = _command(at)
        store.submit_command(sent)
        if not taken(0) or taken(0.5):
            return False
        verdict = taken(after) if after < 1.5 else not taken(after)
        # Whether it ends at all: claimed again much later (held, if it was just claimed).
        return verdict and (taken(after + 30) or taken(after + 60))

    return probe


def lease_cut_short() -> Probe:
    """A 1.5 s lease: is the command claimable again 1.2 s in (a whole-second lease)?"""
    return _lease_probe(1.2)


def lease_drawn_out() -> Probe:
    """A 1.5 s lease: is the command still held 1.75 s in (a lease rounded up)?"""
    return _lease_probe(1.75)


def limit_before_filter() -> Probe:
    """Two tasks, the older one not matching: does ``query(name=..., limit=1)`` come back
    empty (the limit taken before the filter)?"""

    def probe(store: TaskStore) -> bool:
        at = datetime(2031, 1, 1, tzinfo=UTC)
        first, second = _fresh_id(), _fresh_id()
        store.create(TaskSnapshot(first, "chongming-probe-x", TaskStatus.PENDING, 0, at, at))
        later = at + timedelta(seconds=1)
        store.create(TaskSnapshot(second, "chongming-probe-y", TaskStatus.PENDING, 0,
                                  later, later))
        got = store.query(TaskQuery(name="chongming-probe-y", limit=1))
        return [t.task_id for t in got] != [second]

    return probe


def ties_dropped() -> Probe:
    """One task, then three created at one later instant, under one fresh name: does the
    store lose any of the tied ones, with or without a limit that cuts through them?

    A filter bug can also leave out a task that happens to tie with another; this tells
    the two apart (a store that keeps ties here is blamed on the filter instead)."""

    def probe(store: TaskStore) -> bool:
        name = f"chongming-probe-tie-{_fresh_id()}"
        at = datetime(2031, 1, 1, tzinfo=UTC)
        tied = at + timedelta(seconds=1)
        first = _fresh_id()
        store.create(TaskSnapshot(first, name, TaskStatus.PENDING, 0, at, at))
        ids = {_fresh_id() for _ in range(3)}
        for task_id in sorted(ids):
            store.create(TaskSnapshot(task_id, name, TaskStatus.PENDING, 0, tied, tied))
        everything = [t.task_id for t in store.query(TaskQuery(name=name))]
        limited = [t.task_id for t in store.query(TaskQuery(name=name, limit=3))]
        return (sorted(everything) != sorted({first} | ids)
                or len(limited) != 3 or limited[0] != first or not set(limited[1:]) < ids)

    return probe


def lease_from_wall_clock() -> Probe:
    """A claim at a ``now`` given in +05:45: is ``lease_until`` counted from the wall-clock
    reading (as if it were UTC) instead of the instant?"""

    def probe(store: TaskStore) -> bool:
        zone = timezone(timedelta(hours=5, minutes=45))
        now = datetime(2031, 1, 1, 12, tzinfo=UTC).astimezone(zone)
        sent = _command(now - timedelta(hours=1))
        store.submit_command(sent)
        got = [c for c in store.claim_commands(now=now, lease_seconds=1.5, limit=10)
               if c.command_id == sent.command_id]
        wall = now.replace(tzinfo=UTC) + timedelta(seconds=1.5)
        return len(got) == 1 and got[0].lease_until == wall

    return probe
