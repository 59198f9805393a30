"""Per-clause outcomes, the gate and the verdict, decided from plain records.

The one invariant: **a clause is PASS only if every test that declares it
passed.** A failing test makes each clause it declares FAIL (when the failure
is evidence against that clause) or NOT VERIFIED (with a note naming the test
and what did fail) -- never PASS. :func:`evaluate` keeps it by construction and
``tests/report/test_outcome_properties.py`` checks it over generated records.

Outcomes, decided per clause from the tests that declare it with ``checks``:

* PASS -- at least one test checking it ran, and every one passed.
* FAIL -- a test checking it failed *on it*: the failure's blame note names
  it, or (no note) the test checks this clause alone; or a declared deviation's
  tests all passed (the declaration is stale). Never by association.
* NOT VERIFIED -- no test checking it ran to completion (none exists,
  deselected, skipped, stopped early); a test checking it failed on another
  clause (a knock-on), failed in set-up before it checked anything, or failed
  without naming a clause (the note names the test and what failed); a
  cross-process clause whose scenario failed while a single-process clause it
  relies on (``clauses.PREREQUISITES``) FAILs; every ``review`` clause (with a
  note); every ``cross_process`` clause when no shared store was available.
* UNSUPPORTED -- the store declared the capability the clause needs absent.
* DEVIATION -- the store declared a deviation and its tests failed as expected.

*Decision -- a failure blamed on a clause the failing test does not declare*: the
blame is not evidence against that clause (the test never set out to check it,
and such a blame is a guess the test could not confirm); the clauses the test
does declare are NOT VERIFIED, and the note names the undeclared blame. The kit's
checks declare every clause they can blame (``stateful.STATE_MACHINE_CLAUSES`` is
derived from its rules), so this only happens to a check someone wrote wrong.

*Decision -- clauses a test may blame* (``clauses.may_blame``; ``SuiteRecords.may_blame``):
the one exception, for a test that finds failures of clauses it does not set out to
check -- every stress scenario's test runs the after-scenario integrity check, whose
findings are COUNTS-PER-STATUS's or XP-SHARED-VISIBILITY's (``stress.runner``). A
failure blamed on such a clause FAILs it (the check did observe the breach); the
clauses the test declares are NOT VERIFIED, a knock-on named in their note. Nothing
else the test does counts for or against such a clause: a pass is no evidence for it
(the test is not one of its checks, so a skipped or failing scenario never leaves it
NOT VERIFIED), and a failure blamed elsewhere is no evidence against it.

The verdict, the gate and the exit status come from one function,
:func:`conclude`, so they cannot disagree: with ``--chongming-gate=must`` the run
passes iff it is complete and every gated MUST clause is PASS, UNSUPPORTED or
DEVIATION (and no suite test failed without declaring a clause); SHOULD and
review clauses do not matter to it. ``should`` also requires every gated SHOULD
clause to pass. Without a gate, the exit status is pytest's own
(:func:`exit_status`).

A run is *partial* (its verdict is no conformance claim and no gate passes)
when the suite was narrowed, deselected, stopped early or not collected at all.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..protocol.capabilities import Capabilities
from ..protocol.clauses import (
    CLAUSES,
    PREREQUISITES,
    Clause,
    Level,
    Scope,
    unrequested_fault_clauses,
)
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
    "Conclusion",
    "assess",
    "conclude",
    "evaluate",
    "exit_status",
    "gate_failures",
    "partial_reasons",
    "summary_counts",
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


#: Characters of a skip reason a note quotes (its first lines, whole).
SKIP_REASON_CHARS = 1200


def _said(test: TestResult) -> str:
    """A skipped test's reason, for the note of the clause it leaves NOT VERIFIED (a stress
    scenario whose verdict could not be reached says why there): its first whole lines."""
    if test.outcome != "skipped" or not test.message:
        return ""
    kept: list[str] = []
    for line in test.message.strip().splitlines():
        if sum(len(x) + 1 for x in kept) + len(line) > SKIP_REASON_CHARS:
            break
        kept.append(line.strip())
    return f" ({' / '.join(kept)})" if kept else ""


def _not_proven(elsewhere: Sequence[TestResult], declared: Mapping[str, set[str]],
                may: Mapping[str, Sequence[str]]) -> str:
    """Why a clause whose checks failed for other reasons stays unproven (names them)."""
    parts = []
    for t in elsewhere:
        name = t.nodeid.rsplit("::", 1)[-1]
        own = set(declared.get(t.nodeid, set())) | set(may.get(t.nodeid, ()))
        named = [c for c in t.blames if c in own]
        foreign = [c for c in t.blames if c not in own]
        if named:
            parts.append(f"{name} failed on {', '.join(named)} (a knock-on)")
        elif foreign:
            parts.append(f"{name} failed, blamed on {', '.join(foreign)}, which it does not "
                         "check (not taken as evidence against any clause)")
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
    may: Mapping[str, Sequence[str]],
    finders: Sequence[TestResult] = (),
) -> ClauseResult:
    cid = clause.id
    # A test that may blame this clause without checking it (``finders``) counts only when
    # it failed blamed on it: then it is one of the clause's tests, and a failing one.
    tests = tests + [t for t in finders if t.outcome == "failed" and cid in t.blames
                     and t not in tests]
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
    # A failure is evidence against a clause only if it is blamed on it, or the test checks
    # that clause alone. Any other failure of a test declaring it (a knock-on, a set-up
    # failure, a failure blamed on nothing or on a clause the test does not check) proves
    # nothing about it either way: NOT VERIFIED, with a note -- never PASS beside it.
    failed = [t for t in tests if t.outcome == "failed" and _against(t, cid, declared)]
    elsewhere = [t for t in tests if t.outcome == "failed" and t not in failed]
    if cid in capabilities.deviations:
        reason = capabilities.deviations[cid]
        xfailed = [t for t in tests if t.outcome == "xfailed"]
        stale = [t for t in tests if t.outcome == "xpassed"]
        if failed:
            return ClauseResult(clause, FAIL, f"failed: {_names(failed)}", tests)
        if elsewhere:
            return ClauseResult(clause, NOT_VERIFIED, _not_proven(elsewhere, declared, may), tests)
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
    if not tests:
        return ClauseResult(clause, NOT_VERIFIED, "no test in this run checks it", tests)
    if elsewhere:
        return ClauseResult(clause, NOT_VERIFIED, _not_proven(elsewhere, declared, may), tests)
    # A strict xpass of a test deviating from *another* clause still passed all its checks.
    incomplete = [t for t in tests if t.outcome not in ("passed", "xpassed")]
    if incomplete:
        why = "; ".join(f"{t.nodeid.rsplit('::', 1)[-1]} {t.outcome}" + _said(t)
                        for t in incomplete)
        return ClauseResult(clause, NOT_VERIFIED, f"not every test checking it ran: {why}", tests)
    # A test that passed without exercising what the clause is about (a fault run short of
    # the coverage the clause needs) proves nothing about it.
    short = [t for t in tests if t.unproven and cid in t.unproven]
    if short:
        why = "; ".join(f"{t.nodeid.rsplit('::', 1)[-1]} passed, but {t.unproven[cid]}"
                        for t in short if t.unproven)
        return ClauseResult(clause, NOT_VERIFIED, f"not proven: {why}", tests)
    return ClauseResult(clause, PASS, None, tests)


def _left_out(result: ClauseResult, reason: str) -> ClauseResult:
    """A clause this run does not gate (a fault clause whose faults were not requested): a
    FAIL stays FAIL (evidence is evidence), anything else is NOT VERIFIED -- never PASS for
    what the run did not inject."""
    if result.outcome in (FAIL, UNSUPPORTED):
        return ClauseResult(result.clause, result.outcome, result.note, result.tests,
                            excluded=reason)
    return ClauseResult(result.clause, NOT_VERIFIED, reason, result.tests, excluded=reason)


def evaluate(
    clause_tests: Mapping[str, Sequence[TestResult]],
    capabilities: Capabilities,
    *,
    shared_available: bool,
    faults: str = "none",
    unjudged: Mapping[str, str] | None = None,
    may_blame: Mapping[str, Sequence[TestResult]] | None = None,
) -> list[ClauseResult]:
    """One result per catalogue clause, in catalogue order. ``may_blame``: clause -> the
    tests that may blame it without declaring it (see the module's decision); such a test
    counts for the clause only when it failed blamed on it. ``faults``: the run's
    ``--chongming-faults`` mode; the fault clauses it does not judge are left out of the
    gate (``clauses.unrequested_fault_clauses``). ``unjudged``: clause -> why this run could
    not judge it (``clauses.unjudged_fault_clauses``): NOT VERIFIED unless it FAILs, and
    still gated."""
    unsupported = capabilities.unsupported_clauses()
    # Every test is listed under each clause it declares: invert that once.
    declared: dict[str, set[str]] = {}
    for cid, tests in clause_tests.items():
        for test in tests:
            declared.setdefault(test.nodeid, set()).add(cid)
    finders = dict(may_blame or {})
    may: dict[str, list[str]] = {}
    for cid, tests in finders.items():
        for test in tests:
            may.setdefault(test.nodeid, []).append(cid)
    results = [
        _evaluate_one(
            clause,
            list(clause_tests.get(cid, ())),
            capabilities,
            unsupported,
            shared_available,
            declared,
            may,
            finders.get(cid, ()),
        )
        for cid, clause in CLAUSES.items()
    ]
    left_out = unrequested_fault_clauses(faults)
    results = [_left_out(r, left_out[r.clause.id]) if r.clause.id in left_out else r
               for r in results]
    missing = dict(unjudged or {})
    results = [ClauseResult(r.clause, NOT_VERIFIED, missing[r.clause.id], r.tests)
               if r.clause.id in missing and r.outcome not in (FAIL, UNSUPPORTED) else r
               for r in results]
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
                excluded=r.excluded,
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


@dataclass(frozen=True)
class Conclusion:
    """The verdict line and the gate of one run, decided together (see :func:`conclude`)."""

    verdict: str
    #: None without a gate.
    gate_passed: bool | None


def _failing(results: Iterable[ClauseResult], level: Level) -> tuple[list[ClauseResult], ...]:
    gated = [r for r in results if r.gated and r.clause.level is level]
    return ([r for r in gated if r.outcome == FAIL],
            [r for r in gated if r.outcome == NOT_VERIFIED])


def conclude(
    results: Sequence[ClauseResult],
    reasons: Sequence[str],
    gate: str | None,
    failed_tests: int = 0,
) -> Conclusion:
    """The verdict and the gate from the clause outcomes: the one place both are decided.

    ``failed_tests`` counts the failed suite tests that bear on MUST-level conformance
    (they declare a gated MUST clause, or no clause at all). With no MUST clause FAIL,
    such a failure still means the store misbehaved where no clause could be blamed:
    its clauses are NOT VERIFIED, and the verdict says the store does not conform. A
    partial run says :data:`PARTIAL_BANNER`, unless a MUST clause FAILs: "does not conform"
    comes first, the run's partiality after it.
    """
    must_failed, must_unverified = _failing(results, Level.MUST)
    should_failed, should_unverified = _failing(results, Level.SHOULD)
    deviating = [r for r in results if r.outcome == DEVIATION]
    if must_failed:
        # A FAIL is evidence however little ran: said first, a partial run or not.
        text = f"does not conform: {len(must_failed)} MUST clause(s) FAIL"
        if reasons:
            text += " (partial run — not a conformance claim)"
    elif reasons:
        text = PARTIAL_BANNER
    elif failed_tests:
        text = (f"does not conform: {failed_tests} suite test(s) failed without a FAIL clause "
                "(see the NOT VERIFIED notes)")
    elif must_unverified:
        text = f"not proven: {len(must_unverified)} MUST clause(s) NOT VERIFIED, none FAIL"
    else:
        text = ("conforms except " + f"{len(deviating)} declared deviation(s)" if deviating
                else "conforms: every gated MUST clause PASS or UNSUPPORTED by declaration")
        if should_failed or should_unverified:
            text += (f"; SHOULD: {len(should_failed)} FAIL, {len(should_unverified)} NOT "
                     "VERIFIED")
    conforms = text.startswith("conforms")
    if gate is None:
        return Conclusion(text, None)
    should_ok = not should_failed and not should_unverified
    return Conclusion(text, conforms and (gate == "must" or should_ok))


def exit_status(gate_passed: bool | None, pytest_status: int) -> int:
    """The run's exit status: the gate's when a gate was given, else pytest's own.

    pytest's statuses that say the run itself went wrong (interrupted 2, internal error 3,
    usage error 4, no tests 5) are kept whatever the gate says.
    """
    if gate_passed is None or pytest_status not in (0, 1):
        return pytest_status
    return 0 if gate_passed else 1


@dataclass(frozen=True)
class Assessment:
    """Everything a report says about a run, decided; the document only lays it out."""

    results: list[ClauseResult]
    unmapped: list[TestResult]
    partial_reasons: list[str]
    gate: str | None
    gate_failed: list[ClauseResult]
    conclusion: Conclusion

    @property
    def partial(self) -> bool:
        return bool(self.partial_reasons)

    @property
    def verdict(self) -> str:
        return self.conclusion.verdict

    @property
    def gate_passed(self) -> bool | None:
        """None without a gate; a partial run never passes one."""
        return self.conclusion.gate_passed

    @property
    def summary(self) -> dict[str, dict[str, int]]:
        return summary_counts(self.results)


def assess(
    records: SuiteRecords,
    capabilities: Capabilities,
    *,
    shared_available: bool,
    gate: str | None = None,
    faults: str = "none",
    unjudged: Mapping[str, str] | None = None,
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
    finders: dict[str, list[TestResult]] = {}
    for nodeid, cids in records.may_blame.items():
        if nodeid in records.declared:
            for cid in cids:
                if cid not in records.declared[nodeid]:
                    finders.setdefault(cid, []).append(records.result(nodeid))
    results = evaluate(by_clause, capabilities, shared_available=shared_available,
                       faults=faults, unjudged=unjudged, may_blame=finders)
    reasons = partial_reasons(records)
    must = {r.clause.id for r in results if r.gated and r.clause.level is Level.MUST}
    failed_tests = sum(
        1 for nodeid, cids in records.declared.items()
        if records.result(nodeid).outcome == "failed" and (not cids or must & set(cids))
    )
    return Assessment(
        results=results,
        unmapped=unmapped,
        partial_reasons=reasons,
        gate=gate,
        gate_failed=gate_failures(results, gate) if gate else [],
        conclusion=conclude(results, reasons, gate, failed_tests),
    )
