"""Per-clause outcomes, the gate and the verdict, decided from plain records.

Outcomes, decided per clause from the tests that declare it with ``checks``:

* PASS -- at least one test checking it ran and every one passed.
* FAIL -- a test checking it failed (or errored in setup/teardown), or a
  declared deviation's tests all passed (the declaration is stale).
* NOT VERIFIED -- no test checking it ran to completion (none exists,
  deselected, skipped, stopped early); every ``review`` clause (with a note);
  every ``cross_process`` clause when no shared store was available.
* UNSUPPORTED -- the store declared the capability the clause needs absent.
* DEVIATION -- the store declared a deviation and its tests failed as expected.

A run is *partial* (its verdict is no conformance claim and no gate passes)
when the suite was narrowed, deselected, stopped early or not collected at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..capabilities import Capabilities
from ..clauses import CLAUSES, Clause, Level, Scope
from .records import (
    DEVIATION,
    FAIL,
    NOT_VERIFIED,
    OUTCOMES,
    PARTIAL_BANNER,
    PASS,
    UNSUPPORTED,
    ClauseResult,
    SuiteRecords,
    TestResult,
)

__all__ = [
    "Assessment",
    "assess",
    "evaluate",
    "gate_failures",
    "partial_reasons",
    "summary_counts",
    "verdict",
]


def _names(tests: Iterable[TestResult]) -> str:
    return ", ".join(t.nodeid.rsplit("::", 1)[-1] for t in tests)


def _evaluate_one(
    clause: Clause,
    tests: list[TestResult],
    capabilities: Capabilities,
    unsupported: Mapping[str, str],
    shared_available: bool,
) -> ClauseResult:
    cid = clause.id
    if clause.scope is Scope.REVIEW:
        return ClauseResult(
            clause,
            NOT_VERIFIED,
            "review clause: not observable through the protocol; check it by review "
            "(excluded from the gate)",
            tests,
        )
    if cid in unsupported:
        return ClauseResult(clause, UNSUPPORTED, unsupported[cid], tests)
    if clause.scope is Scope.CROSS_PROCESS and not shared_available:
        return ClauseResult(
            clause,
            NOT_VERIFIED,
            "needs a shared store (--chongming-shared-store or make_shared_store in the "
            "store's module); none was available",
            tests,
        )
    # A failure blamed on other clauses (a state-machine run stopped by a SAVE-KEEPS-LEASE
    # bug, say) is no evidence for or against this one: leave it out.
    elsewhere = [t for t in tests if t.outcome == "failed" and t.blames and cid not in t.blames]
    tests_here = [t for t in tests if t not in elsewhere]
    failed = [t for t in tests_here if t.outcome == "failed"]
    if cid in capabilities.deviations:
        reason = capabilities.deviations[cid]
        xfailed = [t for t in tests if t.outcome == "xfailed"]
        stale = [t for t in tests if t.outcome == "xpassed"]
        if failed:
            return ClauseResult(clause, FAIL, f"failed: {_names(failed)}", tests)
        if xfailed:
            return ClauseResult(clause, DEVIATION, f"declared deviation: {reason}", tests)
        if stale:
            return ClauseResult(
                clause,
                FAIL,
                f"declared as a deviation ({reason}) but its tests passed (XPASS strict): "
                "the store now meets the clause, remove the deviation",
                tests,
            )
        return ClauseResult(clause, NOT_VERIFIED, "no test checking it ran", tests)
    if failed:
        return ClauseResult(clause, FAIL, f"failed: {_names(failed)}", tests)
    # A strict xpass of a test deviating from *another* clause still passed all its checks.
    passed = [t for t in tests_here if t.outcome in ("passed", "xpassed")]
    incomplete = [t for t in tests_here if t.outcome not in ("passed", "xpassed")]
    if not tests:
        return ClauseResult(clause, NOT_VERIFIED, "no test in this run checks it", tests)
    if not tests_here:
        return ClauseResult(
            clause,
            NOT_VERIFIED,
            f"its only checks failed on other clauses: {_names(elsewhere)}",
            tests,
        )
    if incomplete:
        why = "; ".join(f"{t.nodeid.rsplit('::', 1)[-1]} {t.outcome}" for t in incomplete)
        return ClauseResult(clause, NOT_VERIFIED, f"not every test checking it ran: {why}", tests)
    assert passed
    return ClauseResult(clause, PASS, None, tests)


def evaluate(
    clause_tests: Mapping[str, Sequence[TestResult]],
    capabilities: Capabilities,
    *,
    shared_available: bool,
) -> list[ClauseResult]:
    """One result per catalogue clause, in catalogue order."""
    unsupported = capabilities.unsupported_clauses()
    return [
        _evaluate_one(
            clause,
            list(clause_tests.get(cid, ())),
            capabilities,
            unsupported,
            shared_available,
        )
        for cid, clause in CLAUSES.items()
    ]


def gate_failures(results: Iterable[ClauseResult], level: str) -> list[ClauseResult]:
    """Gated clauses at ``level`` ('must' or 'should') or above that are FAIL or NOT VERIFIED."""
    levels = {Level.MUST} if level == "must" else {Level.MUST, Level.SHOULD}
    return [
        r
        for r in results
        if r.gated and r.clause.level in levels and r.outcome in (FAIL, NOT_VERIFIED)
    ]


def summary_counts(results: Iterable[ClauseResult]) -> dict[str, dict[str, int]]:
    """Clauses per level and outcome (every level and outcome present, zeros included)."""
    out = {lvl.value: dict.fromkeys(OUTCOMES, 0) for lvl in Level}
    for r in results:
        out[r.clause.level.value][r.outcome] += 1
    return out


def partial_reasons(records: SuiteRecords) -> list[str]:
    """Why this run proves less than the whole suite would ('[]': it is complete)."""
    reasons = list(records.narrowed)
    if records.deselected:
        reasons.append(
            f"{records.deselected} suite test(s) deselected by {records.deselected_by}"
        )
    not_run = [n for n in records.declared if records.result(n).outcome == "not run"]
    if not_run:
        reasons.append(
            f"{len(not_run)} suite test(s) did not run (stopped early: -x/--maxfail or an "
            "interruption)"
        )
    if not records.declared and not records.collection_errors:
        reasons.append("no suite test was collected")
    return reasons


def verdict(results: Sequence[ClauseResult], reasons: Sequence[str]) -> str:
    """The one-line answer: does the store conform, judged on gated MUST clauses."""
    if reasons:
        return PARTIAL_BANNER
    must = [r for r in results if r.gated and r.clause.level is Level.MUST]
    failed = [r for r in must if r.outcome == FAIL]
    unverified = [r for r in must if r.outcome == NOT_VERIFIED]
    deviating = [r for r in results if r.outcome == DEVIATION]
    if failed:
        return f"does not conform: {len(failed)} MUST clause(s) FAIL"
    if unverified:
        return f"not proven: {len(unverified)} MUST clause(s) NOT VERIFIED, none FAIL"
    if deviating:
        return f"conforms except {len(deviating)} declared deviation(s)"
    return "conforms: every gated MUST clause PASS or UNSUPPORTED by declaration"


@dataclass(frozen=True)
class Assessment:
    """Everything a report says about a run, decided; the document only lays it out."""

    results: list[ClauseResult]
    unmapped: list[TestResult]
    partial_reasons: list[str]
    gate: str | None
    gate_failed: list[ClauseResult]
    verdict: str

    @property
    def partial(self) -> bool:
        return bool(self.partial_reasons)

    @property
    def gate_passed(self) -> bool | None:
        """None without a gate; a partial run never passes one."""
        if self.gate is None:
            return None
        return not self.gate_failed and not self.partial

    @property
    def summary(self) -> dict[str, dict[str, int]]:
        return summary_counts(self.results)


def assess(
    records: SuiteRecords,
    capabilities: Capabilities,
    *,
    shared_available: bool,
    gate: str | None = None,
) -> Assessment:
    """Clause outcomes, partial reasons, gate and verdict for one run of the suite."""
    by_clause: dict[str, list[TestResult]] = {}
    unmapped: list[TestResult] = []
    for nodeid, cids in records.declared.items():
        test = records.result(nodeid)
        if not cids:
            unmapped.append(test)
        for cid in cids:
            by_clause.setdefault(cid, []).append(test)
    results = evaluate(by_clause, capabilities, shared_available=shared_available)
    reasons = partial_reasons(records)
    return Assessment(
        results=results,
        unmapped=unmapped,
        partial_reasons=reasons,
        gate=gate,
        gate_failed=gate_failures(results, gate) if gate else [],
        verdict=verdict(results, reasons),
    )
