"""The re-check probes of ``confirm.py`` carry no incidental structure.

An outside audit found a probe that submitted every command for one task "confirming" a
wall-clock ordering bug on a store that keeps one command per task: the store replaced
each command with the next, so only the last one written -- the wall-clock oldest, by the
probe's own write order -- was left to claim, and TIME-INSTANT-ORDER was blamed on a
store that compares instants perfectly. A probe must show the suspected bug and nothing
else a store could trip on: one command per fresh task, fresh ids of the controller's own
shape, no dates the store was not already given beyond modest ones.

Each store below is the in-memory reference store with one such design choice; every
probe must be *refuted* on it (it runs, and does not show the bug), and a real wall-clock
ordering bug on top of the same design must still be *confirmed*.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from test_confirm import MIXED_ZONES

from chongming_conformance.oracle import confirm
from chongming_conformance.protocol import TaskStore
from chongming_conformance.protocol.errors import StoreError
from chongming_conformance.protocol.model import (
    Command,
    CommandKind,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from reference_stores.memory import InMemoryTaskStore

#: The last instant a signed 32-bit Unix time holds (MySQL/MariaDB ``TIMESTAMP``).
Y2038 = datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC)


class OneCommandPerTaskReplacing(InMemoryTaskStore):
    """Keeps one open command per task: a later submit for the task replaces the earlier.

    A bug (the earlier command is lost, SUBMIT-THEN-CLAIM's business), but not an ordering
    bug: it must never be blamed on TIME-INSTANT-ORDER."""

    def submit_command(self, command: Command) -> None:
        for other in list(self._commands.values()):
            if other.task_id == command.task_id and other.finished_at is None:
                del self._commands[other.command_id]
        super().submit_command(command)


class OneCommandPerTaskRefusing(InMemoryTaskStore):
    """Keeps one open command per task: a second submit for the task is refused with
    StoreError (a unique index on the task's open command)."""

    def submit_command(self, command: Command) -> None:
        if any(other.task_id == command.task_id and other.finished_at is None
               for other in self._commands.values()):
            raise StoreError(f"task {command.task_id!r} already has an open command")
        super().submit_command(command)


class OneCommandPerTaskByWallClock(OneCommandPerTaskRefusing):
    """The refusing design with a real bug: claims take the oldest by wall-clock text."""

    def claim_commands(self, *, now: datetime, lease_seconds: float,
                       limit: int = 50) -> Sequence[Command]:
        free = sorted((c for c in self._commands.values() if c.finished_at is None
                       and (c.lease_until is None or c.lease_until <= now)),
                      key=lambda c: c.created_at.isoformat())[:limit]
        until = now + timedelta(seconds=lease_seconds)
        for c in free:
            self._commands[c.command_id] = replace(c, lease_until=until)
        return [self._commands[c.command_id] for c in free]


class RefusesPast2038(InMemoryTaskStore):
    """Datetimes in a signed 32-bit ``TIMESTAMP`` column: nothing after 2038-01-19."""

    @staticmethod
    def _check(*values: datetime | None) -> None:
        for value in values:
            if value is not None and value > Y2038:
                raise StoreError(f"Incorrect datetime value: '{value.isoformat()}'")

    def create(self, snapshot: TaskSnapshot) -> None:
        self._check(snapshot.created_at, snapshot.updated_at, snapshot.lease_until)
        super().create(snapshot)

    def append(self, transition: Transition) -> None:
        self._check(transition.at)
        super().append(transition)

    def submit_command(self, command: Command) -> None:
        self._check(command.created_at)
        super().submit_command(command)

    def claim_commands(self, *, now: datetime, lease_seconds: float,
                       limit: int = 50) -> Sequence[Command]:
        self._check(now + timedelta(seconds=lease_seconds))
        return super().claim_commands(now=now, lease_seconds=lease_seconds, limit=limit)


class IdsOf32Characters(InMemoryTaskStore):
    """``CHAR(32)`` keys: takes the controller's ids (``uuid4().hex``), refuses longer."""

    @staticmethod
    def _check(*ids: str) -> None:
        for value in ids:
            if len(value) > 32:
                raise StoreError(f"Data too long for column: {value!r}")

    def create(self, snapshot: TaskSnapshot) -> None:
        self._check(snapshot.task_id)
        super().create(snapshot)

    def submit_command(self, command: Command) -> None:
        self._check(command.command_id, command.task_id)
        super().submit_command(command)


MODEST = datetime(2031, 1, 1, 12, tzinfo=UTC)
SNAPSHOT = TaskSnapshot("t-1", "probe", TaskStatus.PENDING, 0, MODEST, MODEST)

#: Every probe, with inputs a correct store keeps (all before 2038).
PROBES: list[tuple[str, Callable[[], confirm.Probe]]] = [
    ("snapshot_times_change", lambda: confirm.snapshot_times_change(SNAPSHOT)),
    ("snapshot_fields_change", lambda: confirm.snapshot_fields_change(SNAPSHOT)),
    ("transition_times_change", lambda: confirm.transition_times_change(
        Transition("t-1", 1, TaskStatus.PENDING, TaskStatus.RUNNING, MODEST))),
    ("command_times_change", lambda: confirm.command_times_change(
        Command("c-1", "t-1", CommandKind.RETRY, "someone", MODEST))),
    ("query_order_follows_wall_clock",
     lambda: confirm.query_order_follows_wall_clock(MIXED_ZONES)),
    ("claim_order_follows_wall_clock",
     lambda: confirm.claim_order_follows_wall_clock(MIXED_ZONES)),
    ("claim_leases_beyond_limit", confirm.claim_leases_beyond_limit),
    ("release_reopens_finished", confirm.release_reopens_finished),
    ("lease_cut_short", confirm.lease_cut_short),
    ("lease_drawn_out", confirm.lease_drawn_out),
    ("limit_before_filter", confirm.limit_before_filter),
    ("ties_dropped", confirm.ties_dropped),
    ("lease_from_wall_clock", confirm.lease_from_wall_clock),
]

DESIGNS: list[type[TaskStore]] = [OneCommandPerTaskReplacing, OneCommandPerTaskRefusing,
                                  RefusesPast2038, IdsOf32Characters]


def test_the_probe_inputs_are_before_2038() -> None:
    assert all(at < Y2038 for at in MIXED_ZONES)


@pytest.mark.parametrize("design", DESIGNS, ids=lambda d: d.__name__)
@pytest.mark.parametrize(("name", "probe"), PROBES, ids=[p[0] for p in PROBES])
def test_every_probe_runs_and_is_refuted_on_a_store_with_this_design(
    name: str, probe: Callable[[], confirm.Probe], design: type[TaskStore]
) -> None:
    # Called bare, not through confirmed(): a probe that raises fails here loudly instead
    # of reading as "could not run".
    assert probe()(design()) is False, f"{name} on {design.__name__}"


@contextlib.contextmanager
def _fresh(make: Callable[[], TaskStore]) -> Iterator[TaskStore]:
    store = make()
    try:
        yield store
    finally:
        store.close()


def _claim_order_blame(make: Callable[[], TaskStore]) -> str:
    """What CLAIM-ORDER's check blames a misordered claim on, re-checked on ``make``."""
    with confirm.confirming(lambda: _fresh(make)):
        return confirm.decide(confirm.claim_order_follows_wall_clock(MIXED_ZONES),
                              "TIME-INSTANT-ORDER", "CLAIM-ORDER")


def test_a_store_keeping_one_command_per_task_is_not_blamed_for_wall_clock_order() -> None:
    # The audit's case: before the fix the probe's commands all went to one task, the
    # replacing store kept only the wall-clock oldest, and the probe "confirmed".
    assert _claim_order_blame(OneCommandPerTaskReplacing) == "CLAIM-ORDER"
    assert _claim_order_blame(OneCommandPerTaskRefusing) == "CLAIM-ORDER"


def test_a_real_wall_clock_order_is_still_confirmed_on_that_design() -> None:
    assert _claim_order_blame(OneCommandPerTaskByWallClock) == "TIME-INSTANT-ORDER"
    probe = confirm.claim_order_follows_wall_clock(MIXED_ZONES)
    assert probe(OneCommandPerTaskByWallClock()) is True


def test_probe_ids_have_the_controllers_shape() -> None:
    seen = {confirm._fresh_id() for _ in range(3)}
    assert len(seen) == 3
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in seen)
