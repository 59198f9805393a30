"""The harness itself: bounded (a hanging store fails, naming the stuck worker), clear
about unusable openers, complete in clause coverage, and free of false anomalies at the
lease boundary (checked on hand-made logs)."""

from __future__ import annotations

import functools
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from stress_helpers import run_shared
from stress_stores import (
    HangingSave,
    failing_opener,
    opener_failing_in_workers,
    opener_with_connection,
    shared,
)

from chongming_conformance.checking.controller.contract import ControllerContract
from chongming_conformance.protocol.clauses import CLAUSES, Scope, clauses_of
from chongming_conformance.stress import (
    PROFILES,
    SCENARIOS,
    StressContract,
    StressProfile,
    get_profile,
    run_scenario,
)
from chongming_conformance.stress.harness import Harness
from chongming_conformance.stress.log import Logs, Op, OpLog, read_logs
from chongming_conformance.stress.records import at
from chongming_conformance.stress.scenarios import claim_race

TIGHT = StressProfile("tight", processes=2, rounds=2, deadline=6.0, crash_cycles=1)


def test_a_hanging_store_fails_the_scenario_and_names_the_stuck_worker() -> None:
    result = run_shared(shared(HangingSave), "save_race", TIGHT)
    assert not result.ok
    stuck = [e for e in result.errors if "stuck in save(" in e]
    assert stuck, result.report()
    assert "'save_race'" in stuck[0] and "worker " in stuck[0] and "deadline" in stuck[0]


def test_an_opener_that_cannot_connect_is_an_error_not_a_hang() -> None:
    result = run_scenario("save_race", functools.partial(failing_opener, "no such server"),
                          TIGHT, keep_logs=False)
    assert not result.ok
    assert any("failed in the parent" in e and "no such server" in e for e in result.errors)


def test_workers_that_cannot_open_the_store_are_reported_as_crashed(tmp_path: Path) -> None:
    opener = functools.partial(opener_failing_in_workers, os.getpid(), str(tmp_path / "t.db"))
    result = run_scenario("save_race", opener, TIGHT, keep_logs=False)
    crashed = [e for e in result.errors if "crashed" in e]
    assert crashed and "workers cannot reach the backend" in crashed[0], result.report()


def test_an_opener_that_cannot_be_pickled_is_refused_with_the_reason() -> None:
    conn = sqlite3.connect(":memory:")
    try:
        result = run_scenario("save_race", functools.partial(opener_with_connection, conn),
                              TIGHT, keep_logs=False)
    finally:
        conn.close()
    assert result.errors and "cannot be sent to a spawned process" in result.errors[0]
    assert result.ops == 0


def test_every_cross_process_clause_has_a_scenario_and_a_contract_test() -> None:
    # XP-CTRL-* are cross-process too, but their scenarios drive Controllers, so they live
    # with the controller checks (checking/controller/crossprocess.py), checked below.
    by_controller = {cid for n in dir(ControllerContract) if n.startswith("test_")
                     for cid in clauses_of(getattr(ControllerContract, n))}
    cross = {c.id for c in CLAUSES.values() if c.scope is Scope.CROSS_PROCESS}
    assert {c for c in cross if c.startswith("XP-CTRL-")} <= by_controller
    cross = {c for c in cross if not c.startswith("XP-CTRL-")}
    by_scenarios = {cid for s in SCENARIOS.values() for cid in s.clauses}
    tests = [getattr(StressContract, n) for n in dir(StressContract) if n.startswith("test_")]
    by_tests = {cid for t in tests for cid in clauses_of(t)}
    assert by_scenarios == cross
    assert by_tests == cross
    assert len(tests) == len(SCENARIOS)


def test_profiles_by_name_and_validation() -> None:
    assert get_profile(None) is PROFILES["ci"]
    assert get_profile("quick").processes >= 2
    with pytest.raises(ValueError, match="quick"):
        get_profile("nope")
    with pytest.raises(ValueError, match="2 processes"):
        StressProfile(processes=1)
    with pytest.raises(ValueError, match="unknown stress scenario"):
        run_scenario("nope", functools.partial(failing_opener, "x"))


# -- the claim checker on hand-made logs ------------------------------------------------------

PARAMS: dict[str, Any] = {"rounds": 5, "step": 1.0, "lease": 2.0, "drain_at": 8.0}


def _claim(worker: int, seq: int, rnd: int, cid: str) -> Op:
    now = at(rnd * 1.0)
    until = at(rnd * 1.0 + 2.0)
    return Op(worker, seq, "claim", rnd, now.isoformat(), {}, 0.0, 1.0, True,
              [{"id": cid, "task": "t", "lease_until": until.isoformat(), "finished": None}])


def _end(worker: int, seq: int, rnd: int, cid: str, what: str = "complete") -> Op:
    return Op(worker, seq, what, rnd, at(rnd * 1.0).isoformat(), {"id": cid}, 0.0, 1.0, True)


def _check(tmp_path: Path, ops: dict[int, list[Op]]) -> set[str]:
    h = Harness("claim_race", functools.partial(failing_opener, "x"), PROFILES["quick"], tmp_path)
    claim_race.judge(h, Logs(ops=ops), ["c"], PARAMS, [])
    return {a.kind for a in h.anomalies}


def test_checker_accepts_a_claim_exactly_at_lease_until(tmp_path: Path) -> None:
    # worker 0 holds c over [0, 2) and abandons it; worker 1 claims it at now == 2.
    ops = {0: [_claim(0, 1, 0, "c")], 1: [_claim(1, 1, 2, "c"), _end(1, 2, 2, "c")]}
    assert _check(tmp_path, ops) == set()


def test_checker_flags_a_claim_inside_a_live_lease(tmp_path: Path) -> None:
    ops = {0: [_claim(0, 1, 0, "c")], 1: [_claim(1, 1, 1, "c"), _end(1, 2, 1, "c")]}
    assert _check(tmp_path, ops) == {"double-hold"}


def test_checker_accepts_a_claim_in_the_round_after_a_release(tmp_path: Path) -> None:
    ops = {0: [_claim(0, 1, 0, "c"), _end(0, 2, 0, "c", "release")],
           1: [_claim(1, 1, 1, "c"), _end(1, 2, 1, "c")]}
    assert _check(tmp_path, ops) == set()


def test_checker_flags_two_claims_in_one_round_and_a_double_complete(tmp_path: Path) -> None:
    ops = {0: [_claim(0, 1, 0, "c"), _end(0, 2, 0, "c")],
           1: [_claim(1, 1, 0, "c"), _end(1, 2, 0, "c")]}
    assert _check(tmp_path, ops) == {"double-hold", "completed-twice"}


def test_checker_flags_a_command_nobody_completed(tmp_path: Path) -> None:
    ops = {0: [_claim(0, 1, 0, "c"), _end(0, 2, 0, "c", "release")]}
    assert _check(tmp_path, ops) == {"lost"}


def test_log_lines_pair_up_and_a_torn_last_line_leaves_the_call_pending(tmp_path: Path) -> None:
    path = tmp_path / "w0.jsonl"
    log = OpLog(path, 0, "saver")
    done = log.invoke("save", {"task": "t"}, round_=0, now=None)
    log.result(done, ok=True, value=None)
    log.invoke("claim", {"limit": 1}, round_=1, now=at(1.0).isoformat())
    log.close()
    with path.open("a", encoding="utf-8") as f:
        f.write('{"ev": "ret", "w": 0, "seq": 2, "ok": tr')  # cut off by SIGKILL
    logs = read_logs({0: path})
    first, second = logs.ops[0]
    assert first.ok and not first.pending
    assert second.pending and logs.last_pending(0) is second
    assert logs.count() == 1
