"""The after-scenario integrity check reports its own finding, never the scenario's.

The check runs after every worker exited: a fresh connection reads the store back, and
counts() must agree, status by status, with the tasks query() returns. Before, a
disagreement was an anomaly charged to whichever scenario had just run, so one drifting
counter failed every XP clause whose scenario ran. Now it is a COUNTS-PER-STATUS finding
(its anomaly names the clause), the test is blamed on that clause alone, and its text
says the after-scenario integrity check found it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from drift_stores import WriteBehindCounts
from stress_helpers import contract_failures, run_shared
from stress_stores import shared, single

from chongming_conformance.blame import parse_blames
from chongming_conformance.stress import runner
from chongming_conformance.stress.contract import StressContract
from chongming_conformance.stress.report_document import stress_document
from chongming_conformance.stress.runner import ScenarioResult
from chongming_conformance.stress.stress_profiles import get_profile

SCENARIO = "create_race"  # creates in worker processes; never reads counts() itself
OWN = "XP-CREATE-EXCLUSIVE"


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


def test_the_report_does_not_fail_the_scenarios_clause(drifted: ScenarioResult) -> None:
    doc = stress_document([drifted], spec="drift_stores:WriteBehindCounts",
                          profile=get_profile("quick"), started=time.time())
    outcomes = {c["id"]: c["outcome"] for c in doc["clauses"]}
    assert outcomes[OWN] == "NOT VERIFIED", outcomes[OWN]
    note = next(c["note"] for c in doc["clauses"] if c["id"] == OWN)
    assert runner.COUNTS_CLAUSE in note, note  # the XP clause says what its run found
    assert not [cid for cid, outcome in outcomes.items() if outcome == "FAIL"]


def test_an_unreadable_store_is_a_shared_visibility_finding() -> None:
    result = run_shared(shared(WriteBehindCounts), SCENARIO, "quick",
                        integrity=lambda opener: ["PRAGMA integrity_check: page 3 broken"])
    store_own = [a for a in result.anomalies if a.kind == "integrity"]
    assert store_own and {a.clause for a in store_own} == {runner.UNREADABLE_CLAUSE}
    assert "after-scenario integrity check (the store's own)" in result.report(chars=20000)
