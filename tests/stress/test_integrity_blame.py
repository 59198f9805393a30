"""The after-scenario integrity check reports its own finding, never the scenario's.

The check runs after every worker exited: a fresh connection reads the store back, and
counts() must agree, status by status, with the tasks query() returns. Before, a
disagreement was an anomaly charged to whichever scenario had just run, so one drifting
counter failed every XP clause whose scenario ran. Now it is a COUNTS-PER-STATUS finding
(its anomaly names the clause), the test is blamed on that clause alone, and its text
says the after-scenario integrity check found it. Every scenario's test *may blame* the
check's clauses (clauses.may_blame), so the report FAILs COUNTS-PER-STATUS and nothing
else, and leaves the scenario's clause NOT VERIFIED (a knock-on).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from drift_stores import WriteBehindCounts
from stress_helpers import contract_failures, run_shared
from stress_stores import shared, single

from chongming_conformance.oracle.blame import parse_blames
from chongming_conformance.protocol.clauses import clauses_of, may_blame_of
from chongming_conformance.stress import runner
from chongming_conformance.stress.contract import StressContract
from chongming_conformance.stress.report_document import stress_document
from chongming_conformance.stress.runner import ScenarioResult
from chongming_conformance.stress.stress_profiles import get_profile

SCENARIO = "create_race"  # creates in worker processes; never reads counts() itself
OWN = "XP-CREATE-EXCLUSIVE"
SCENARIO_TEST = "test_xp_create_exclusive__one_create_wins"
PRECISION = Path(__file__).resolve().parent.parent / "precision"


@pytest.fixture(scope="module")
def drifted() -> ScenarioResult:
    return run_shared(shared(WriteBehindCounts), SCENARIO, "quick")


def test_the_drift_is_invisible_to_one_connection() -> None:
    failures = contract_failures(single(WriteBehindCounts))
    assert not [n for n in failures if "count" in n], failures


def test_the_drift_is_found_and_blamed_on_counts_per_status_only(
    drifted: ScenarioResult,
) -> None:
    assert not drifted.errors, drifted.report()
    assert drifted.anomalies, drifted.report()
    assert {a.clause for a in drifted.anomalies} == {runner.COUNTS_CLAUSE}, drifted.report()
    assert drifted.blamed() == [runner.COUNTS_CLAUSE]
    text = drifted.report()
    assert "after-scenario integrity check" in text
    assert "counts() disagrees" in text and "query()" in text


class _Drifting(StressContract):
    stress_profile = "quick"

    def make_shared_store(self) -> Iterator[Any]:
        yield from shared(WriteBehindCounts)()


def test_the_stress_test_failure_is_blamed_on_that_clause_alone() -> None:
    case = _Drifting()
    case.setup_method()
    try:
        with pytest.raises(AssertionError) as caught:
            case.assert_stress(SCENARIO)
    finally:
        case.teardown_method()
    assert parse_blames("\n".join(getattr(caught.value, "__notes__", ()))) == (
        runner.COUNTS_CLAUSE,)
    assert "after-scenario integrity check" in str(caught.value)


def test_the_report_fails_counts_per_status_and_only_it(drifted: ScenarioResult) -> None:
    """The finding FAILs its own clause (the scenario's test may blame it:
    clauses.may_blame), and the scenario's clause is NOT VERIFIED, a knock-on."""
    doc = stress_document([drifted], spec="drift_stores:WriteBehindCounts",
                          profile=get_profile("quick"), started=time.time())
    outcomes = {c["id"]: c["outcome"] for c in doc["clauses"]}
    assert outcomes[runner.COUNTS_CLAUSE] == "FAIL", outcomes[runner.COUNTS_CLAUSE]
    assert [cid for cid, outcome in outcomes.items() if outcome == "FAIL"] == [
        runner.COUNTS_CLAUSE]
    assert outcomes[OWN] == "NOT VERIFIED", outcomes[OWN]
    note = next(c["note"] for c in doc["clauses"] if c["id"] == OWN)
    assert f"failed on {runner.COUNTS_CLAUSE} (a knock-on)" in note, note


def test_every_scenario_test_may_blame_the_integrity_clauses() -> None:
    for name in dir(StressContract):
        if name.startswith("test_"):
            test = getattr(StressContract, name)
            own = set(clauses_of(test))
            assert set(may_blame_of(test)) == set(runner.INTEGRITY_CLAUSES) - own, name


def test_a_passing_scenario_is_no_evidence_for_counts_per_status() -> None:
    """A may-blame clause counts only on a failure blamed on it: a scenario that passed
    leaves COUNTS-PER-STATUS as the rest of the run decides it (here: no test of it ran)."""
    passed = ScenarioResult(SCENARIO, (OWN,), "quick")
    doc = stress_document([passed], spec="drift_stores:WriteBehindCounts",
                          profile=get_profile("quick"), started=time.time())
    outcomes = {c["id"]: c["outcome"] for c in doc["clauses"]}
    assert outcomes[OWN] == "PASS"
    assert outcomes[runner.COUNTS_CLAUSE] == "NOT VERIFIED"


def test_through_the_plugin_counts_per_status_fails_and_nothing_else(tmp_path: Path) -> None:
    """The whole path a backend author takes: the plugin on the drifting store with a
    shared store, narrowed to the scenario and the contract's counts checks (which pass:
    the drift is invisible to one connection). COUNTS-PER-STATUS FAILs on the scenario's
    finding, no other clause FAILs, and the scenario's clause is NOT VERIFIED."""
    sys.path.insert(0, str(PRECISION))
    try:
        from matrix import Case, run_case
    finally:
        sys.path.remove(str(PRECISION))
    case = Case("drift_stores:make_store", frozenset({runner.COUNTS_CLAUSE}),
                shared="drift_stores:make_shared_store",
                args=("-k", "xp_create_exclusive or counts_per_status"))
    outcome = run_case(case, tmp_path)
    assert outcome.clauses, outcome.output[-3000:]
    assert outcome.failing == {runner.COUNTS_CLAUSE}, (outcome.failing, outcome.output[-3000:])
    own, note = outcome.clauses[OWN]
    assert own == "NOT VERIFIED" and note and "a knock-on" in note, (own, note)
    counts_note = outcome.clauses[runner.COUNTS_CLAUSE][1] or ""
    assert SCENARIO_TEST in counts_note, counts_note


def test_an_unreadable_store_is_a_shared_visibility_finding() -> None:
    result = run_shared(shared(WriteBehindCounts), SCENARIO, "quick",
                        integrity=lambda opener: ["PRAGMA integrity_check: page 3 broken"])
    store_own = [a for a in result.anomalies if a.kind == "integrity"]
    assert store_own and {a.clause for a in store_own} == {runner.UNREADABLE_CLAUSE}
    assert "after-scenario integrity check (the store's own)" in result.report(chars=20000)
