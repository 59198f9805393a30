"""The fault clauses and the gate: judged only when their faults were requested.

A run without ``--chongming-faults`` injects nothing, so it proves nothing about the
XP-FAULT-* clauses: they are NOT VERIFIED, left out of the gate and the verdict (the
summary says so), never PASS. ``pause`` judges XP-FAULT-SAFETY only; ``network`` also
recovery and no-hang; ``deployment`` all four (durability needs a crash action the store's
module offers: without one it is NOT VERIFIED and gated).
"""

from __future__ import annotations

from test_outcomes import every_gated_clause_passing, outcome, records, suite_test

from chongming_conformance.protocol.capabilities import Capabilities, parse_capabilities
from chongming_conformance.protocol.clauses import (
    FAULT_MODES_NEEDED,
    unjudged_fault_clauses,
    unrequested_fault_clauses,
)
from chongming_conformance.report import FAIL, NOT_VERIFIED, PASS, UNSUPPORTED, assess
from chongming_conformance.report.document import clause_entry
from chongming_conformance.report.terminal import left_out_line

FAULTS = sorted(FAULT_MODES_NEEDED)


def test_fault_modes_leave_out_what_they_do_not_inject() -> None:
    assert sorted(unrequested_fault_clauses("none")) == FAULTS
    assert sorted(unrequested_fault_clauses("pause")) == ["XP-FAULT-DURABILITY",
                                                          "XP-FAULT-NO-HANG",
                                                          "XP-FAULT-RECOVERY"]
    assert sorted(unrequested_fault_clauses("network")) == ["XP-FAULT-DURABILITY"]
    assert unrequested_fault_clauses("deployment") == {}


def test_without_faults_the_clauses_are_not_verified_and_the_must_gate_still_passes() -> None:
    got = assess(records(*every_gated_clause_passing()), Capabilities(),
                 shared_available=True, gate="must")
    for cid in FAULTS:
        [r] = [r for r in got.results if r.clause.id == cid]
        assert r.outcome == NOT_VERIFIED and not r.gated
        assert "--chongming-faults" in (r.note or "")
    assert got.gate_passed is True, got.verdict
    assert got.verdict.startswith("conforms")


def test_with_deployment_faults_every_fault_clause_is_gated() -> None:
    got = assess(records(*every_gated_clause_passing()), Capabilities(),
                 shared_available=True, gate="must", faults="deployment")
    assert all(outcome(got, cid) == PASS for cid in FAULTS)
    failing = [(suite_test("t_fault", "failed"), ("XP-FAULT-RECOVERY",)) if cids ==
               ("XP-FAULT-RECOVERY",) else (t, cids) for t, cids in every_gated_clause_passing()]
    got = assess(records(*failing), Capabilities(), shared_available=True, gate="must",
                 faults="network")
    assert outcome(got, "XP-FAULT-RECOVERY") == FAIL and got.gate_passed is False


def test_deployment_faults_without_a_crash_action_leave_durability_not_verified_and_gated(
) -> None:
    """Asked for and not run: the gate fails on it, never PASS for a crash that did not
    happen; with a crash action offered it is judged like the others."""
    unjudged = unjudged_fault_clauses("deployment", crash_offered=False)
    assert sorted(unjudged) == ["XP-FAULT-DURABILITY"]
    got = assess(records(*every_gated_clause_passing()), Capabilities(),
                 shared_available=True, gate="must", faults="deployment", unjudged=unjudged)
    [r] = [r for r in got.results if r.clause.id == "XP-FAULT-DURABILITY"]
    assert r.outcome == NOT_VERIFIED and r.gated and "no crash action" in (r.note or "")
    assert got.gate_passed is False
    assert unjudged_fault_clauses("deployment", crash_offered=True) == {}
    assert unjudged_fault_clauses("network", crash_offered=False) == {}


def test_pauses_only_never_pass_the_network_clauses() -> None:
    got = assess(records(*every_gated_clause_passing()), Capabilities(),
                 shared_available=True, gate="must", faults="pause")
    assert outcome(got, "XP-FAULT-SAFETY") == PASS
    assert outcome(got, "XP-FAULT-RECOVERY") == NOT_VERIFIED
    assert outcome(got, "XP-FAULT-NO-HANG") == NOT_VERIFIED


def test_a_failure_of_a_left_out_clause_is_still_a_fail() -> None:
    """Evidence is evidence: a pause run whose tail failed on recovery shows FAIL there,
    though the gate does not look at it."""
    failing = [(suite_test("t_fault", "failed"), ("XP-FAULT-RECOVERY",)) if cids ==
               ("XP-FAULT-RECOVERY",) else (t, cids) for t, cids in every_gated_clause_passing()]
    got = assess(records(*failing), Capabilities(), shared_available=True, gate="must",
                 faults="pause")
    [r] = [r for r in got.results if r.clause.id == "XP-FAULT-RECOVERY"]
    assert r.outcome == FAIL and not r.gated and got.gate_passed is True


def test_a_store_without_a_network_gets_the_network_clauses_unsupported() -> None:
    caps = parse_capabilities({"unsupported": {"network": "a file on local disk"}}, "test")
    got = assess(records(*every_gated_clause_passing()), caps, shared_available=True,
                 gate="must", faults="network")
    assert outcome(got, "XP-FAULT-SAFETY") == PASS
    assert outcome(got, "XP-FAULT-RECOVERY") == UNSUPPORTED
    assert outcome(got, "XP-FAULT-NO-HANG") == UNSUPPORTED
    assert got.gate_passed is True


def test_the_summary_says_what_is_left_out() -> None:
    got = assess(records(*every_gated_clause_passing()), Capabilities(),
                 shared_available=True, gate="must")
    line = left_out_line({"clauses": [clause_entry(r) for r in got.results]})
    assert line is not None
    assert "review clause(s)" in line and "4 fault clause(s)" in line
    assert all(cid in line for cid in FAULTS)
