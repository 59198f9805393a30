"""The verdict's invariants over generated records, not only hand-picked cases.

For any run (tests declaring any clauses, any outcomes, blames on declared and undeclared
clauses, set-up failures, deviations, unsupported capabilities, gates, partial runs):

* a clause is PASS only if every test that declares it passed;
* a failing test leaves each clause it declares FAIL or NOT VERIFIED (or excused:
  UNSUPPORTED, DEVIATION), never PASS;
* FAIL only with evidence: a failing test blamed on the clause (or checking it alone), or a
  stale deviation;
* the summary counts every clause once; the gate, the verdict and the exit status agree.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chongming_conformance.protocol.capabilities import Capabilities
from chongming_conformance.protocol.clauses import CLAUSES, Level, Scope
from chongming_conformance.report import (
    DEVIATION,
    FAIL,
    NOT_VERIFIED,
    PARTIAL_BANNER,
    PASS,
    UNSUPPORTED,
    SuiteRecords,
    TestResult,
    assess,
    exit_status,
)
from chongming_conformance.report.records import SETUP_PREFIX

# A small slice of the catalogue keeps collisions (several tests per clause) frequent.
_POOL = (
    "CREATE-THEN-GET", "SAVE-CAS", "SAVE-KEEPS-LEASE", "SAVE-CONFLICT-DETAILS",
    "PROTOCOL-KEYWORD-ONLY", "QUERY-TAG-EXACT", "XP-SAVE-ATOMIC", "XP-SHARED-VISIBILITY",
    "QUERY-PUSHDOWN", "TIME-UTC-ROUNDTRIP",
)
_CLAUSE = st.sampled_from(_POOL)


@st.composite
def runs(draw: st.DrawFn) -> tuple[SuiteRecords, Capabilities, bool, str | None]:
    n = draw(st.integers(0, 8))
    tests: dict[str, TestResult] = {}
    declared: dict[str, tuple[str, ...]] = {}
    for i in range(n):
        nodeid = f"suite/test_x.py::T::test_{i}"
        cids = tuple(draw(st.lists(_CLAUSE, max_size=4, unique=True)))
        outcome = draw(st.sampled_from(
            ("passed", "passed", "failed", "failed", "skipped", "xfailed", "xpassed", "not run")))
        message = None
        blames: tuple[str, ...] = ()
        if outcome == "failed":
            message = (SETUP_PREFIX if draw(st.booleans()) else "") + "boom"
            blames = tuple(draw(st.lists(_CLAUSE, max_size=2, unique=True)))
        tests[nodeid] = TestResult(nodeid, outcome, message=message, blames=blames)
        declared[nodeid] = cids
    caps_dev = draw(st.lists(st.sampled_from(
        [c for c in _POOL if CLAUSES[c].scope is Scope.CONTRACT]), max_size=2, unique=True))
    unsupported = {"cross_process": "one process"} if draw(st.booleans()) else {}
    caps = Capabilities(
        unsupported=unsupported,
        deviations={c: "declared" for c in caps_dev
                    if not (unsupported and CLAUSES[c].scope is Scope.CROSS_PROCESS)},
    )
    narrowed = ("narrowed on purpose",) if draw(st.integers(0, 5)) == 0 else ()
    records = SuiteRecords(tests=tests, declared=declared, narrowed=narrowed)
    return records, caps, draw(st.booleans()), draw(st.sampled_from((None, "must", "should")))


@settings(max_examples=400, deadline=None)
@given(runs())
def test_the_outcome_invariants_hold_for_any_run(
    run: tuple[SuiteRecords, Capabilities, bool, str | None],
) -> None:
    records, caps, shared, gate = run
    got = assess(records, caps, shared_available=shared, gate=gate)
    by_id = {r.clause.id: r for r in got.results}
    assert list(by_id) == list(CLAUSES)

    for nodeid, cids in records.declared.items():
        test = records.result(nodeid)
        for cid in cids:
            outcome = by_id[cid].outcome
            if test.outcome != "passed" and test.outcome != "xpassed":
                assert outcome != PASS, (cid, test)
            if test.outcome == "failed":
                assert outcome in (FAIL, NOT_VERIFIED, UNSUPPORTED), (cid, outcome, test)

    for cid, result in by_id.items():
        if result.outcome == PASS:
            assert result.tests and all(t.outcome in ("passed", "xpassed") for t in result.tests)
        if result.outcome == FAIL and CLAUSES[cid].scope is not Scope.REVIEW:
            evidence = [
                t for t in result.tests if t.outcome == "failed" and (
                    cid in t.blames
                    or (not t.blames and not t.failed_in_setup
                        and records.declared[t.nodeid] == (cid,)))
            ]
            stale = cid in caps.deviations and any(t.outcome == "xpassed" for t in result.tests)
            assert evidence or stale, (cid, result)
        if result.outcome == DEVIATION:
            assert cid in caps.deviations
        if result.outcome == NOT_VERIFIED:
            assert result.note, cid

    counts = got.summary
    assert sum(sum(v.values()) for v in counts.values()) == len(CLAUSES)

    gated_must = [r for r in got.results if r.gated and r.clause.level is Level.MUST]
    must_ok = all(r.outcome in (PASS, UNSUPPORTED, DEVIATION) for r in gated_must)
    failed_bearing = any(
        records.result(n).outcome == "failed"
        and (not cids or any(CLAUSES[c].level is Level.MUST and CLAUSES[c].scope
                             is not Scope.REVIEW for c in cids))
        for n, cids in records.declared.items()
    )
    conforms = must_ok and not got.partial and not failed_bearing
    assert got.verdict.startswith("conforms") == conforms, got.verdict
    must_fail = any(r.outcome == FAIL for r in gated_must)
    if got.partial and must_fail:  # a FAIL is said first, the partiality after it
        assert got.verdict.startswith("does not conform: "), got.verdict
        assert got.verdict.endswith(" MUST clause(s) FAIL (partial run — not a conformance "
                                    "claim)"), got.verdict
    elif got.partial:
        assert got.verdict == PARTIAL_BANNER
    if gate is None:
        assert got.gate_passed is None
        assert exit_status(got.gate_passed, 1) == 1 and exit_status(got.gate_passed, 0) == 0
    else:
        should_ok = all(r.outcome in (PASS, UNSUPPORTED, DEVIATION) for r in got.results
                        if r.gated and r.clause.level is Level.SHOULD)
        assert got.gate_passed == (conforms and (gate == "must" or should_ok))
        for pytest_status in (0, 1):  # a SHOULD failure makes pytest say 1; the gate decides
            assert exit_status(got.gate_passed, pytest_status) == (0 if got.gate_passed else 1)
        for broken in (2, 3, 4, 5):
            assert exit_status(got.gate_passed, broken) == broken
