"""Which clause a violation in a run with server crashes is charged to.

``fault_workload.durability_or_safety``: durability's when the history up to the first
crash is linearizable and the whole one is not (the store was right until its server
went down, and came back without what it had acknowledged); safety's when the store was
already wrong before any crash. Hand-written histories, logged as the workload logs them.
"""

from __future__ import annotations

from lincheck_helpers import Recorder

from chongming_conformance.faults.applied import Applied
from chongming_conformance.faults.plan import Fault
from chongming_conformance.stress.records import task
from chongming_conformance.stress.scenarios.fault_workload import (
    DURABILITY,
    SAFETY,
    durability_or_safety,
)

CRASH = Applied(Fault(1, "deployment:crash_server", 0.0, 1.0, True, 0), start=10.0, end=12.0,
                detail="crash_server (the deployment's action), then its end")


def _blame(r: Recorder) -> str:
    return durability_or_safety(r.logs(), [CRASH])(None)  # type: ignore[arg-type]


def test_a_write_acknowledged_before_the_crash_and_missing_after_it_is_durability() -> None:
    r = Recorder()
    r.setup()
    r.save(1, task("mix-t0", version=1, name="w1-s1"), 0, (3.0, 4.0))
    r.get(2, "mix-t0", task("mix-t0", version=1, name="w1-s1"), (5.0, 5.1))
    r.get(2, "mix-t0", task("mix-t0", name="w0-create"), (13.0, 13.1))  # the save is gone
    assert _blame(r) == DURABILITY


def test_a_read_that_spans_the_crash_counts_as_after_it() -> None:
    r = Recorder()
    r.setup()
    r.save(1, task("mix-t0", version=1, name="w1-s1"), 0, (3.0, 4.0))
    r.get(2, "mix-t0", task("mix-t0", name="w0-create"), (9.5, 12.5))  # answered after it
    assert _blame(r) == DURABILITY


def test_a_store_already_wrong_before_the_crash_is_safety() -> None:
    r = Recorder()
    r.setup()
    r.save(1, task("mix-t0", version=1, name="w1-s1"), 0, (3.0, 4.0))
    r.get(2, "mix-t0", task("mix-t0", name="w0-create"), (5.0, 5.1))  # stale, server up
    r.get(2, "mix-t0", task("mix-t0", name="w0-create"), (13.0, 13.1))
    assert _blame(r) == SAFETY
