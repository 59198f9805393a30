"""Deadline reports name the blocked store call; lock failures get their own kind."""

from __future__ import annotations

from stress_helpers import run_shared
from stress_stores import UncommittedTouch, shared

from chongming_conformance.stress import StressProfile
from chongming_conformance.stress.contention import LOCK_CONTENTION, contention_kind
from chongming_conformance.stress.diagnosis import deadline_report
from chongming_conformance.stress.log import Logs, Op


def test_a_touch_holding_the_lock_is_named_at_the_deadline() -> None:
    """The issue's case: the toucher keeps its write lock and waits at the barrier; the
    saver's save blocks on it past most of the deadline. The report names the save."""
    tight = StressProfile("tight", processes=2, rounds=3, deadline=8.0, crash_cycles=1)
    result = run_shared(shared(UncommittedTouch), "touch_save", tight)
    assert not result.ok
    reports = [e for e in result.errors if "store calls blocked for most of it" in e]
    assert reports, result.report()
    assert "save()" in reports[0] and "worker 0 (saver)" in reports[0], reports[0]
    assert "meanwhile worker 1 (toucher)" in reports[0], reports[0]


def test_the_report_is_built_from_logs_even_when_the_holder_exited() -> None:
    blocked = Op(1, 3, "save", 2, None, {"task": "t"}, t_invoke=100.0, t_return=190.0,
                 ok=True)
    holder = Op(0, 7, "touch", 2, None, {"task": "t"}, t_invoke=99.0, t_return=99.1, ok=True)
    logs = Logs(ops={0: [holder], 1: [blocked]},
                notes={0: [{"what": "barrier", "round": 2, "t": 99.2}], 1: []})
    text = deadline_report("s", 120.0, logs, {0: "toucher", 1: "saver"}, now=200.0)
    assert text is not None
    assert "worker 1 (saver): save()" in text and "blocked 90.0 s" in text
    assert "worker 0 (toucher) was waiting at the barrier of round 2" in text
    assert deadline_report("s", 120.0, Logs(ops={1: [holder]}), {1: "x"}, now=200.0) is None


def test_lock_failures_are_their_own_kind() -> None:
    busy = {"type": "chongming_conformance.protocol.errors.StoreError",
            "message": "save() failed on 'x.db': database is locked"}
    serial = {"type": "StoreError", "message": "save()",
              "cause": "SerializationFailure: could not serialize access"}
    other = {"type": "ValueError", "message": "bad"}
    assert contention_kind(busy, "unexpected-error") == LOCK_CONTENTION
    assert contention_kind(serial, "unexpected-error") == LOCK_CONTENTION
    assert contention_kind(other, "unexpected-error") == "unexpected-error"
