"""The checker on real recorded runs of the mixed workload: SQLite's history is
linearizable; a store that serves reads from a private cache is caught, with the logs'
worker labels and sequence numbers in the timeline."""

from __future__ import annotations

import contextlib
import shutil

import pytest
from stress_stores import CachingReads, shared

from chongming_conformance.seam.factory import enter_opener
from chongming_conformance.stress import StressProfile, run_scenario
from chongming_conformance.stress.__main__ import main as stress_main
from chongming_conformance.stress.lincheck import Verdict, check, read_history

SMALL = StressProfile("small", processes=3, rounds=10, deadline=60.0, crash_cycles=1)


def _history_of(factory: object) -> str:
    with contextlib.ExitStack() as stack:
        opener = enter_opener(factory, stack)
        result = run_scenario("mixed_workload", opener, SMALL, keep_logs=True)
    assert result.log_dir is not None
    return result.log_dir


def test_a_sqlite_run_kept_from_the_command_line_is_linearizable(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert stress_main(["reference_stores.sqlite:make_shared_store", "--scenario",
                        "mixed_workload", "--profile", "quick", "--keep-logs"]) == 0
    out = capsys.readouterr().out
    (line,) = [x for x in out.splitlines() if "worker logs kept in" in x]
    logdir = line.rsplit(" ", 1)[1]
    try:
        calls = read_history(logdir)
        assert len(calls) > 200 and {c.method for c in calls} >= {
            "create", "save", "get", "touch", "append", "history", "query", "counts",
            "submit_command", "claim_commands", "prune"}
        for skip in ("any", "concurrent"):
            result = check(calls, skip=skip)
            assert result.verdict is Verdict.LINEARIZABLE, result.report()
        assert stress_main(["lincheck", logdir]) == 0
        assert "LINEARIZABLE" in capsys.readouterr().out
    finally:
        shutil.rmtree(logdir, ignore_errors=True)


def test_a_caching_store_is_not_linearizable() -> None:
    logdir = _history_of(shared(CachingReads))
    try:
        result = check(read_history(logdir))
        assert result.verdict is Verdict.VIOLATION, result.report()
        v = result.violations[0]
        assert v.kind == "not-linearizable" and v.where.startswith("task ")
        assert "get(" in v.timeline and "»" in v.timeline
        assert stress_main(["lincheck", logdir]) == 1
    finally:
        shutil.rmtree(logdir, ignore_errors=True)
