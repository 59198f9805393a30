"""How a failure's ``chongming-blame`` note narrows the clauses it fails."""

from __future__ import annotations

from chongming_conformance.protocol.capabilities import Capabilities
from chongming_conformance.report import (
    FAIL,
    NOT_VERIFIED,
    PASS,
    TestResult,
    blamed_among,
    evaluate,
    parse_blames,
)

MACHINE = "suite/test_stateful.py::TestStoreStateMachine::test_state_machine"
CONTRACT_GET = "suite/test_contract.py::TestStoreContract::test_create_then_get__x"
CONTRACT_LEASE = "suite/test_contract.py::TestStoreContract::test_save_keeps_lease__x"


def outcomes(machine: TestResult, extra: dict[str, list[TestResult]]) -> dict[str, str]:
    clause_tests = {cid: [machine] for cid in ("CREATE-THEN-GET", "SAVE-KEEPS-LEASE", "SAVE-CAS")}
    for cid, tests in extra.items():
        clause_tests[cid] = clause_tests[cid] + tests
    results = evaluate(clause_tests, Capabilities(), shared_available=True)
    return {r.clause.id: r.outcome for r in results if r.clause.id in clause_tests}


def test_blamed_failure_fails_only_the_blamed_clause() -> None:
    machine = TestResult(MACHINE, "failed", message="boom", blames=("SAVE-KEEPS-LEASE",))
    got = outcomes(
        machine,
        {
            "CREATE-THEN-GET": [TestResult(CONTRACT_GET, "passed")],
            "SAVE-KEEPS-LEASE": [TestResult(CONTRACT_LEASE, "passed")],
        },
    )
    # CREATE-THEN-GET's contract test passed, but the machine that also checks it failed
    # first: NOT VERIFIED, never PASS beside a failing test.
    assert got == {
        "CREATE-THEN-GET": NOT_VERIFIED, "SAVE-KEEPS-LEASE": FAIL, "SAVE-CAS": NOT_VERIFIED
    }


def test_unattributed_failure_of_a_many_clause_check_fails_no_clause() -> None:
    machine = TestResult(MACHINE, "failed", message="boom")
    got = outcomes(machine, {"CREATE-THEN-GET": [TestResult(CONTRACT_GET, "passed")]})
    assert got == {
        "CREATE-THEN-GET": NOT_VERIFIED, "SAVE-KEEPS-LEASE": NOT_VERIFIED,
        "SAVE-CAS": NOT_VERIFIED,
    }
    assert PASS not in got.values()


def test_blame_note_is_read_from_pytest_failure_text() -> None:
    text = "E       AssertionError: get() after save()\nE       chongming-blame: SAVE-KEEPS-LEASE\n"
    assert blamed_among(text, ("SAVE-CAS", "SAVE-KEEPS-LEASE")) == ("SAVE-KEEPS-LEASE",)
    # A note naming nothing the test declares is ignored: blame everything (conservative).
    assert blamed_among(text, ("SAVE-CAS",)) == ()
    assert blamed_among("E   AssertionError: x", ("SAVE-CAS",)) == ()


def test_every_blame_note_is_parsed_in_first_seen_order_without_repeats() -> None:
    text = (
        "E       chongming-blame: SAVE-KEEPS-LEASE, SAVE-CAS\n"
        "During handling of the above exception, another exception occurred:\n"
        "chongming-blame: SAVE-CAS\n"
        "chongming-blame: none (a guessed culprit was not confirmed on a fresh store)\n"
    )
    assert parse_blames(text) == ("SAVE-KEEPS-LEASE", "SAVE-CAS")
    assert parse_blames("AssertionError: chongming-blame: SAVE-CAS") == ()  # not a note line


def test_every_leaf_of_an_exception_group_is_attributed() -> None:
    """Hypothesis reports two distinct failures as one ExceptionGroup: both blames count."""
    from chongming_conformance.oracle.blame import blame, failure_blames

    lease, release, bare = AssertionError("lease"), AssertionError("release"), KeyError("x")
    blame(lease, ("SAVE-KEEPS-LEASE",))
    blame(release, ("RELEASE-NOT-COMPLETE",))
    group = ExceptionGroup("two bugs", [lease, ExceptionGroup("nested", [release, bare])])
    assert failure_blames(group) == (("SAVE-KEEPS-LEASE", "RELEASE-NOT-COMPLETE"), 1)
    assert failure_blames(bare) == ((), 1)


def test_a_blame_on_the_cause_counts_for_the_exception_raised_from_it() -> None:
    from chongming_conformance.oracle.blame import blame, failure_blames

    cause = AssertionError("inner")
    blame(cause, ("CLOSE-IDEMPOTENT",))
    try:
        try:
            raise cause
        except AssertionError as exc:
            raise RuntimeError("timeout guard") from exc
    except RuntimeError as outer:
        assert failure_blames(outer) == (("CLOSE-IDEMPOTENT",), 0)
