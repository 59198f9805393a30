"""Clause outcomes, partial runs, the gate and the verdict, decided from hand-built records.

No pytest run is involved: these build the plain records the plugin's harvest
would produce and check what :func:`chongming_conformance.report.assess` decides.
"""

from __future__ import annotations

from chongming_conformance.protocol.capabilities import Capabilities, parse_capabilities
from chongming_conformance.protocol.clauses import CLAUSES, Level, Scope, unrequested_fault_clauses
from chongming_conformance.report import (
    DEVIATION,
    FAIL,
    NOT_VERIFIED,
    PARTIAL_BANNER,
    PASS,
    UNSUPPORTED,
    Assessment,
    SuiteRecords,
    TestResult,
    assess,
)

SUITE = "chongming_conformance/suite/test_contract.py::TestStoreContract::"
MACHINE = "chongming_conformance/suite/test_stateful.py::TestStoreStateMachine::runTest"


def records(*tests: tuple[TestResult, tuple[str, ...]], **extra: object) -> SuiteRecords:
    """Records of ``tests`` (each with the clauses it declares), in the order given."""
    return SuiteRecords(
        tests={t.nodeid: t for t, _ in tests},
        declared={t.nodeid: cids for t, cids in tests},
        **extra,  # type: ignore[arg-type]
    )


def suite_test(name: str, outcome: str, **fields: object) -> TestResult:
    return TestResult(SUITE + name, outcome, **fields)  # type: ignore[arg-type]


def outcome(assessment: Assessment, cid: str) -> str:
    [result] = [r for r in assessment.results if r.clause.id == cid]
    return result.outcome


def every_gated_clause_passing() -> list[tuple[TestResult, tuple[str, ...]]]:
    return [
        (suite_test(f"test_{cid.lower()}", "passed"), (cid,))
        for cid, c in CLAUSES.items()
        if c.scope is not Scope.REVIEW
    ]


# -- the five outcomes -----------------------------------------------------------------------


def test_passed_checks_make_pass_and_one_failure_makes_fail() -> None:
    got = assess(
        records(
            (suite_test("test_cas_a", "passed"), ("SAVE-CAS",)),
            (suite_test("test_cas_b", "passed"), ("SAVE-CAS",)),
            (suite_test("test_get_a", "passed"), ("CREATE-THEN-GET",)),
            (suite_test("test_get_b", "failed", message="boom"), ("CREATE-THEN-GET",)),
        ),
        Capabilities(),
        shared_available=True,
    )
    assert outcome(got, "SAVE-CAS") == PASS
    assert outcome(got, "CREATE-THEN-GET") == FAIL
    [failed] = [r for r in got.results if r.clause.id == "CREATE-THEN-GET"]
    assert failed.note == "failed: test_get_b"


def test_a_check_that_did_not_complete_leaves_the_clause_not_verified() -> None:
    got = assess(
        records(
            (suite_test("test_limit_a", "passed"), ("QUERY-LIMIT",)),
            (suite_test("test_limit_b", "skipped"), ("QUERY-LIMIT",)),
        ),
        Capabilities(),
        shared_available=True,
    )
    assert outcome(got, "QUERY-LIMIT") == NOT_VERIFIED
    assert outcome(got, "HISTORY-SINCE") == NOT_VERIFIED  # no test declares it at all
    assert outcome(got, "QUERY-PUSHDOWN") == NOT_VERIFIED  # review clause: never PASS


def test_a_skipped_check_leaves_its_clause_not_verified_with_the_reason_and_the_gate_fails(
) -> None:
    """A stress scenario whose verdict could not be reached (the checker's budget ran out)
    raises a skip: the clause is NOT VERIFIED and its note quotes why -- neither PASS nor
    FAIL -- and a complete run whose MUST clause is NOT VERIFIED fails the gate."""
    reason = ("Skipped: stress scenario 'mixed_workload' (XP-MIXED-WORKLOAD), profile 'ci': "
              "NOT VERIFIED\n  worker logs kept in /tmp/logs (...)\n  NOT VERIFIED: (seed 0) "
              "the linearizability checker ran out of its budget: ... budget 10 states / 60 s")
    recs = [(suite_test(f"test_{cid.lower()}", "skipped", message=reason), (cid,))
            if cid == "XP-MIXED-WORKLOAD" else (t, (cid,))
            for t, (cid,) in every_gated_clause_passing()]
    got = assess(records(*recs), Capabilities(), shared_available=True, gate="must")
    [mixed] = [r for r in got.results if r.clause.id == "XP-MIXED-WORKLOAD"]
    assert mixed.outcome == NOT_VERIFIED
    assert mixed.note is not None
    assert "skipped (Skipped: stress scenario" in mixed.note
    assert "ran out of its budget" in mixed.note and "/tmp/logs" in mixed.note
    assert got.verdict.startswith("not proven") and got.gate_passed is False
    assert [r.clause.id for r in got.gate_failed] == ["XP-MIXED-WORKLOAD"]


def test_cross_process_clauses_never_pass_without_a_shared_store() -> None:
    passed = records((suite_test("test_xp", "passed"), ("XP-SAVE-ATOMIC",)))
    assert outcome(assess(passed, Capabilities(), shared_available=False),
                   "XP-SAVE-ATOMIC") == NOT_VERIFIED
    assert outcome(assess(passed, Capabilities(), shared_available=True),
                   "XP-SAVE-ATOMIC") == PASS


def test_declared_unsupported_capability_makes_its_clauses_unsupported() -> None:
    caps = parse_capabilities({"unsupported": {"cross_process": "one process"}}, "m.CAPS")
    got = assess(records(), caps, shared_available=False)
    xp = [r for r in got.results if r.clause.scope is Scope.CROSS_PROCESS]
    assert xp and {r.outcome for r in xp} == {UNSUPPORTED}
    assert {r.note for r in xp} == {"cross_process unsupported: one process"}


def test_declared_deviation_is_deviation_when_failing_and_fail_when_stale() -> None:
    caps = Capabilities(deviations={"QUERY-TAG-EXACT": "legacy", "QUERY-NAME-EXACT": "legacy"})
    got = assess(
        records(
            (suite_test("test_tag", "xfailed"), ("QUERY-TAG-EXACT",)),
            (suite_test("test_name", "xpassed"), ("QUERY-NAME-EXACT",)),
        ),
        caps,
        shared_available=True,
    )
    assert outcome(got, "QUERY-TAG-EXACT") == DEVIATION
    assert outcome(got, "QUERY-NAME-EXACT") == FAIL


# -- blame ------------------------------------------------------------------------------------


def test_blamed_failure_is_evidence_only_against_the_blamed_clause() -> None:
    machine = TestResult(MACHINE, "failed", message="x", blames=("SAVE-KEEPS-LEASE",))
    declared = ("CREATE-THEN-GET", "SAVE-KEEPS-LEASE", "SAVE-CAS")
    got = assess(
        records((machine, declared), (suite_test("test_get", "passed"), ("CREATE-THEN-GET",))),
        Capabilities(),
        shared_available=True,
    )
    assert outcome(got, "SAVE-KEEPS-LEASE") == FAIL
    # Another check of it passed, but one that declares it failed: never PASS beside that.
    assert outcome(got, "CREATE-THEN-GET") == NOT_VERIFIED
    assert outcome(got, "SAVE-CAS") == NOT_VERIFIED  # its only check failed elsewhere
    [cas] = [r for r in got.results if r.clause.id == "SAVE-CAS"]
    assert cas.note == "not proven: runTest failed on SAVE-KEEPS-LEASE (a knock-on)"


def test_a_blame_on_a_clause_the_test_does_not_declare_is_no_evidence() -> None:
    """The audit's case: a state-machine failure guessed to be TIME-UTC-ROUNDTRIP, a clause the
    machine does not declare. Nothing FAILs on a guess, nothing PASSes beside the failure."""
    machine = TestResult(MACHINE, "failed", message="x", blames=("TIME-UTC-ROUNDTRIP",))
    declared = ("RELEASE-NOT-COMPLETE", "CLAIM-ORDER")
    got = assess(
        records(
            (machine, declared),
            (suite_test("test_release", "passed"), ("RELEASE-NOT-COMPLETE",)),
            (suite_test("test_time", "passed"), ("TIME-UTC-ROUNDTRIP",)),
        ),
        Capabilities(),
        shared_available=True,
        gate="must",
    )
    assert outcome(got, "TIME-UTC-ROUNDTRIP") == PASS  # its own check passed; no guess counts
    [release] = [r for r in got.results if r.clause.id == "RELEASE-NOT-COMPLETE"]
    assert release.outcome == NOT_VERIFIED
    assert release.note == ("not proven: runTest failed, blamed on TIME-UTC-ROUNDTRIP, which it "
                            "does not check (not taken as evidence against any clause)")
    assert got.gate_passed is False
    assert got.verdict.startswith("does not conform: 1 suite test(s) failed")


STRESS = "chongming_conformance/suite/test_stress.py::TestStoreStress::"
INTEGRITY = ("COUNTS-PER-STATUS", "XP-SHARED-VISIBILITY")


def test_a_blame_on_a_clause_the_test_may_blame_fails_it_and_only_it() -> None:
    """A stress scenario's after-scenario integrity check found counts() drifting: the
    finding FAILs COUNTS-PER-STATUS (its contract check passed: the drift is invisible to
    one connection), the scenario's clause is a knock-on, nothing else FAILs."""
    scenario = TestResult(STRESS + "test_xp_create_exclusive__one_create_wins", "failed",
                          message="x", blames=("COUNTS-PER-STATUS",))
    got = assess(
        records(
            (scenario, ("XP-CREATE-EXCLUSIVE",)),
            (suite_test("test_counts", "passed"), ("COUNTS-PER-STATUS",)),
            (suite_test("test_visible", "passed"), ("XP-SHARED-VISIBILITY",)),
            may_blame={scenario.nodeid: INTEGRITY},
        ),
        Capabilities(),
        shared_available=True,
    )
    assert [r.clause.id for r in got.results if r.outcome == FAIL] == ["COUNTS-PER-STATUS"]
    [counts] = [r for r in got.results if r.clause.id == "COUNTS-PER-STATUS"]
    assert counts.note == "failed: test_xp_create_exclusive__one_create_wins"
    assert scenario in counts.tests
    [own] = [r for r in got.results if r.clause.id == "XP-CREATE-EXCLUSIVE"]
    assert own.outcome == NOT_VERIFIED
    assert own.note == ("not proven: test_xp_create_exclusive__one_create_wins failed on "
                        "COUNTS-PER-STATUS (a knock-on)")
    assert outcome(got, "XP-SHARED-VISIBILITY") == PASS  # may blame it, but did not


def test_a_clause_a_test_may_blame_gets_no_evidence_from_its_pass_skip_or_other_failure(
) -> None:
    passed = TestResult(STRESS + "test_xp_a", "passed")
    skipped = TestResult(STRESS + "test_xp_b", "skipped", message="faults not requested")
    other = TestResult(STRESS + "test_xp_c", "failed", message="x",
                       blames=("XP-CLAIM-EXCLUSIVE",))
    got = assess(
        records(
            (passed, ("XP-CREATE-EXCLUSIVE",)),
            (skipped, ("XP-FAULT-SAFETY",)),
            (other, ("XP-CLAIM-EXCLUSIVE",)),
            may_blame={t.nodeid: INTEGRITY for t in (passed, skipped, other)},
        ),
        Capabilities(),
        shared_available=True,
    )
    assert outcome(got, "COUNTS-PER-STATUS") == NOT_VERIFIED  # no check of it ran
    [counts] = [r for r in got.results if r.clause.id == "COUNTS-PER-STATUS"]
    assert counts.note == "no test in this run checks it" and not counts.tests
    assert outcome(got, "XP-CLAIM-EXCLUSIVE") == FAIL


def test_unblamed_failure_of_a_many_clause_check_fails_none_but_the_store_does_not_conform(
) -> None:
    machine = TestResult(MACHINE, "failed", message="x")
    got = assess(records((machine, ("CREATE-THEN-GET", "SAVE-CAS"))), Capabilities(),
                 shared_available=True)
    assert outcome(got, "CREATE-THEN-GET") == NOT_VERIFIED
    assert outcome(got, "SAVE-CAS") == NOT_VERIFIED
    [cas] = [r for r in got.results if r.clause.id == "SAVE-CAS"]
    assert cas.note == "not proven: runTest failed without naming a clause"
    assert got.verdict.startswith("does not conform: 1 suite test(s) failed")


def test_unblamed_failure_of_a_one_clause_check_fails_that_clause() -> None:
    got = assess(records((suite_test("test_cas", "failed"), ("SAVE-CAS",))), Capabilities(),
                 shared_available=True)
    assert outcome(got, "SAVE-CAS") == FAIL
    assert got.verdict == "does not conform: 1 MUST clause(s) FAIL"


def test_a_one_clause_check_blamed_on_another_clause_is_a_knock_on() -> None:
    lease = TestResult(SUITE + "test_lease", "failed", message="x", blames=("TOUCH-NO-VERSION",))
    got = assess(records((lease, ("SAVE-KEEPS-LEASE",))), Capabilities(), shared_available=True)
    assert outcome(got, "SAVE-KEEPS-LEASE") == NOT_VERIFIED
    assert outcome(got, "TOUCH-NO-VERSION") == NOT_VERIFIED  # no test of its own here


# -- partial runs ------------------------------------------------------------------------------


def test_complete_run_is_not_partial() -> None:
    got = assess(records(*every_gated_clause_passing()), Capabilities(), shared_available=True)
    assert got.partial_reasons == [] and not got.partial


def test_every_way_a_run_is_partial_is_named() -> None:
    got = assess(
        records(
            (suite_test("test_a", "passed"), ("SAVE-CAS",)),
            (suite_test("test_b", "not run"), ("SAVE-CAS",)),
            narrowed=("suite narrowed to explicit paths or node ids: x.py",),
            deselected=3,
            deselected_by="-k",
        ),
        Capabilities(),
        shared_available=True,
    )
    assert got.partial_reasons == [
        "suite narrowed to explicit paths or node ids: x.py",
        "3 suite test(s) deselected by -k",
        "1 suite test(s) did not run (stopped early: -x/--maxfail or an interruption)",
    ]
    assert outcome(got, "SAVE-CAS") == NOT_VERIFIED


def test_a_declared_test_without_a_record_counts_as_not_run() -> None:
    recs = SuiteRecords(tests={}, declared={SUITE + "test_a": ("SAVE-CAS",)})
    got = assess(recs, Capabilities(), shared_available=True)
    assert got.partial_reasons == [
        "1 suite test(s) did not run (stopped early: -x/--maxfail or an interruption)"
    ]


def test_nothing_collected_is_partial_unless_collection_errors_explain_it() -> None:
    empty = assess(records(), Capabilities(), shared_available=True)
    assert empty.partial_reasons == ["no suite test was collected"]
    broken = assess(records(collection_errors=("test_x.py: ImportError",)), Capabilities(),
                    shared_available=True)
    assert broken.partial_reasons == []
    assert broken.verdict.startswith("not proven:")  # but nothing is PASS either


# -- gate and verdict ---------------------------------------------------------------------------


def test_verdicts() -> None:
    passing = every_gated_clause_passing()
    conforms = assess(records(*passing), Capabilities(), shared_available=True)
    assert conforms.verdict == (
        "conforms: every gated MUST clause PASS or UNSUPPORTED by declaration"
    )
    must = next(cid for cid, c in CLAUSES.items() if c.level is Level.MUST
                and c.scope is Scope.CONTRACT)
    broken = [(suite_test("t_" + cids[0], "failed"), cids) if cids == (must,) else (t, cids)
              for t, cids in passing]
    assert assess(records(*broken), Capabilities(), shared_available=True).verdict == (
        "does not conform: 1 MUST clause(s) FAIL"
    )
    unshared = assess(records(*passing), Capabilities(), shared_available=False)
    # (The fault clauses are left out of the gate when no faults were requested.)
    n_xp = sum(1 for cid, c in CLAUSES.items()
               if c.scope is Scope.CROSS_PROCESS and c.level is Level.MUST
               and cid not in unrequested_fault_clauses("none"))
    assert unshared.verdict == f"not proven: {n_xp} MUST clause(s) NOT VERIFIED, none FAIL"
    deviating = [(suite_test("t_dev", "xfailed"), cids) if cids == (must,) else (t, cids)
                 for t, cids in passing]
    caps = Capabilities(deviations={must: "legacy"})
    assert assess(records(*deviating), caps, shared_available=True).verdict == (
        "conforms except 1 declared deviation(s)"
    )
    partial = assess(records(*passing, deselected=1), Capabilities(), shared_available=True)
    assert partial.verdict == PARTIAL_BANNER
    # A MUST FAIL is evidence however partial the run: "does not conform" comes first.
    failing = [(suite_test("t_fail", "failed"), cids) if cids == (must,) else (t, cids)
               for t, cids in passing]
    partial_fail = assess(records(*failing, deselected=1), Capabilities(),
                          shared_available=True, gate="must")
    assert partial_fail.verdict == (
        "does not conform: 1 MUST clause(s) FAIL (partial run — not a conformance claim)")
    assert partial_fail.partial and partial_fail.gate_passed is False


def test_gate_levels_and_partial_runs() -> None:
    passing = every_gated_clause_passing()
    should = next(cid for cid, c in CLAUSES.items() if c.level is Level.SHOULD
                  and c.scope is Scope.CONTRACT)
    failing_should = [(suite_test("t_s", "failed"), cids) if cids == (should,) else (t, cids)
                      for t, cids in passing]
    def gated(recs: SuiteRecords, gate: str | None) -> Assessment:
        return assess(recs, Capabilities(), shared_available=True, gate=gate)

    assert gated(records(*passing), None).gate_passed is None
    must_gate = gated(records(*failing_should), "must")
    assert must_gate.gate_passed is True and must_gate.gate_failed == []
    should_gate = gated(records(*failing_should), "should")
    assert should_gate.gate_passed is False
    assert [r.clause.id for r in should_gate.gate_failed] == [should]
    partial = gated(records(*passing, deselected=1), "must")
    assert partial.gate_failed == [] and partial.gate_passed is False


def test_review_clauses_are_never_gated() -> None:
    got = assess(records(), Capabilities(), gate="should", shared_available=True)
    review = {cid for cid, c in CLAUSES.items() if c.scope is Scope.REVIEW}
    assert review and not review & {r.clause.id for r in got.gate_failed}
    assert all(outcome(got, cid) == NOT_VERIFIED for cid in review)


def test_summary_counts_every_clause_once() -> None:
    got = assess(records(*every_gated_clause_passing()), Capabilities(), shared_available=True)
    counted = sum(n for per_level in got.summary.values() for n in per_level.values())
    assert counted == len(CLAUSES)
    assert got.summary["MUST"][FAIL] == 0


# -- cross-process knock-ons -------------------------------------------------------------------

STRESS = "chongming_conformance/suite/test_stress.py::TestStress::"


def test_a_cross_process_failure_is_a_knock_on_of_its_failing_one_process_prerequisite() -> None:
    serial = suite_test("test_claim_lease_exclusive", "failed")
    race = TestResult(STRESS + "test_claim_race", "failed", message="double hold")
    got = assess(records((serial, ("CLAIM-LEASE-EXCLUSIVE",)), (race, ("XP-CLAIM-EXCLUSIVE",))),
                 Capabilities(), shared_available=True)
    assert outcome(got, "CLAIM-LEASE-EXCLUSIVE") == FAIL
    [xp] = [r for r in got.results if r.clause.id == "XP-CLAIM-EXCLUSIVE"]
    assert xp.outcome == NOT_VERIFIED
    assert xp.note is not None
    assert "CLAIM-LEASE-EXCLUSIVE" in xp.note and "test_claim_race" in xp.note
    assert got.verdict.startswith("does not conform")


def test_a_cross_process_failure_with_its_prerequisites_passing_is_its_own_fail() -> None:
    serial = suite_test("test_claim_lease_exclusive", "passed")
    race = TestResult(STRESS + "test_claim_race", "failed", message="double hold")
    got = assess(records((serial, ("CLAIM-LEASE-EXCLUSIVE",)), (race, ("XP-CLAIM-EXCLUSIVE",))),
                 Capabilities(), shared_available=True)
    assert outcome(got, "XP-CLAIM-EXCLUSIVE") == FAIL


def test_prerequisites_are_acyclic_rest_on_shared_visibility_and_are_transitive() -> None:
    from chongming_conformance.protocol.clauses import PREREQUISITES

    for cid, needs in PREREQUISITES.items():
        assert CLAUSES[cid].scope is Scope.CROSS_PROCESS
        assert cid not in needs  # no clause is its own knock-on (no cycles)
        assert all(n in CLAUSES for n in needs), cid
        if cid != "XP-SHARED-VISIBILITY":
            assert "XP-SHARED-VISIBILITY" in needs, cid  # every scenario reads across processes
        else:
            assert all(CLAUSES[n].scope is Scope.CONTRACT for n in needs)
    # transitive: the mixed workload relies on what shared visibility relies on
    assert PREREQUISITES["XP-SHARED-VISIBILITY"] <= PREREQUISITES["XP-MIXED-WORKLOAD"]


def test_a_failure_opening_the_store_proves_nothing_about_the_test_clause() -> None:
    broken_open = TestResult(SUITE + "test_cas", "failed",
                             message="[setup] RuntimeError: too many connections")
    got = assess(records((broken_open, ("SAVE-CAS",))), Capabilities(), shared_available=True)
    [cas] = [r for r in got.results if r.clause.id == "SAVE-CAS"]
    assert cas.outcome == NOT_VERIFIED
    assert cas.note is not None and "set-up" in cas.note
    assert got.verdict.startswith("does not conform")  # a failing test is never green
