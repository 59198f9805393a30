"""Per-clause outcomes, the gate and the verdict, decided from plain records.

Outcomes, decided per clause from the tests that declare it with ``checks``:

* PASS -- at least one test checking it ran and every one passed.
* FAIL -- a test checking it failed *on it*: the failure's blame note names
  it, or (no note) the test checks this clause alone; or a declared deviation's
  tests all passed (the declaration is stale). Never by association.
* NOT VERIFIED -- no test checking it ran to completion (none exists,
  deselected, skipped, stopped early); a test checking it failed on another
  clause first (a knock-on) or failed in set-up, opening the store, before it
  checked anything; a cross-process clause whose scenario failed while a
  single-process clause it relies on (``clauses.PREREQUISITES``) FAILs; or,
  checking many clauses, failed without naming one (the note names the test and
  the clause that did fail); every ``review``
  clause (with a note);
  every ``cross_process`` clause when no shared store was available.
* UNSUPPORTED -- the store declared the capability the clause needs absent.
* DEVIATION -- the store declared a deviation and its tests failed as expected.

Any failing suite test makes the verdict "does not conform", even one no clause
could be blamed for.

A run is *partial* (its verdict is no conformance claim and no gate passes)
when the suite was narrowed, deselected, stopped early or not collected at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..capabilities import Capabilities
from ..clauses import CLAUSES, PREREQUISITES, Clause, Level, Scope
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


def _against(test: TestResult, cid: str, declared: Mapping[str, set[str]]) -> bool:
    """Is ``test``'s failure evidence that clause ``cid`` is broken?"""
    if test.blames:
        return cid in test.blames
    if test.failed_in_setup:
        return False  # the store could not be opened: nothing about any clause was tried
    return declared.get(test.nodeid, {cid}) == {cid}


def _not_proven(elsewhere: Sequence[TestResult]) -> str:
    """Why a clause whose checks failed for other reasons stays unproven (names them)."""
    parts = []
    for t in elsewhere:
        name = t.nodeid.rsplit("::", 1)[-1]
        if t.blames:
            parts.append(f"{name} failed on {', '.join(t.blames)} first (a knock-on)")
        elif t.failed_in_setup:
            parts.append(f"{name} failed in set-up, before it checked anything (opening "
                         "the store raised)")
        else:
            parts.append(f"{name} failed without naming a clause")
    return "not proven: " + "; ".join(parts)


def _evaluate_one(
    clause: Clause,
    tests: list[TestResult],
    capabilities: Capabilities,
    unsupported: Mapping[str, str],
    shared_available: bool,
    declared: Mapping[str, set[str]],
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
    # The rule: a failure is evidence against a clause only if it is blamed on it, or
    # the test checks that clause alone. A failure blamed on other clauses (a knock-on:
    # the lease test's setup tripping over a touch bug) or blamed on nothing while the
    # test checks many clauses proves nothing about this one: NOT VERIFIED, with a note.
    elsewhere = [t for t in tests if t.outcome == "failed" and not _against(t, cid, declared)]
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
        # Its only checks failed for another reason before proving it.
        return ClauseResult(clause, NOT_VERIFIED, _not_proven(elsewhere), tests)
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
    # Every test is listed under each clause it declares: invert that once.
    declared: dict[str, set[str]] = {}
    for cid, tests in clause_tests.items():
        for test in tests:
            declared.setdefault(test.nodeid, set()).add(cid)
    results = [
        _evaluate_one(
            clause,
            list(clause_tests.get(cid, ())),
            capabilities,
            unsupported,
            shared_available,
            declared,
        )
        for cid, clause in CLAUSES.items()
    ]
    return _knock_ons_across_processes(results)


def _knock_ons_across_processes(results: list[ClauseResult]) -> list[ClauseResult]:
    """A cross-process FAIL whose single-process prerequisite FAILs too is that clause's
    knock-on (clauses.PREREQUISITES): NOT VERIFIED, with a note naming it."""
    failing = {r.clause.id for r in results if r.outcome == FAIL}
    out = []
    for r in results:
        broken = sorted(PREREQUISITES.get(r.clause.id, frozenset()) & failing)
        if r.outcome == FAIL and broken:
            r = ClauseResult(
                r.clause,
                NOT_VERIFIED,
                f"not proven: {_names(r.failing_tests)} failed, but {', '.join(broken)} "
                "already FAIL, and the scenario relies on them (a knock-on); fix that first",
                r.tests,
            )
        out.append(r)
    return out


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


def verdict(
    results: Sequence[ClauseResult], reasons: Sequence[str], failed_tests: int = 0
) -> str:
    """The one-line answer: does the store conform, judged on gated MUST clauses.

    ``failed_tests`` suite tests failed without any FAIL clause to show for it: even
    when no clause could be blamed, a failing test means the store does not conform.
    """
    if reasons:
        return PARTIAL_BANNER
    must = [r for r in results if r.gated and r.clause.level is Level.MUST]
    failed = [r for r in must if r.outcome == FAIL]
    unverified = [r for r in must if r.outcome == NOT_VERIFIED]
    deviating = [r for r in results if r.outcome == DEVIATION]
    if failed:
        return f"does not conform: {len(failed)} MUST clause(s) FAIL"
    if failed_tests:
        return (
            f"does not conform: {failed_tests} suite test(s) failed without a FAIL clause "
            "(see the NOT VERIFIED notes)"
        )
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


def _unaccounted_failures(
    records: SuiteRecords, results: Sequence[ClauseResult]
) -> list[TestResult]:
    """Failed suite tests that no FAIL clause reports (knock-ons, unattributed failures)."""
    shown = {t.nodeid for r in results if r.outcome == FAIL for t in r.failing_tests}
    return [t for t in records.tests.values() if t.outcome == "failed" and t.nodeid not in shown]


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
        verdict=verdict(results, reasons, len(_unaccounted_failures(records, results))),
    )
