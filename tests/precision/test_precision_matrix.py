"""Precision: each broken store, run through the plugin as a third party would, FAILs
exactly the clauses its one broken promise violates (at most 3), and nothing else.

One subprocess pytest run per store (``matrix.run_case``), at the quick profile, so the
matrix parallelises under pytest-xdist (``-n 2``). Wall times are recorded in
docs/benchmarks.md, never asserted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from matrix import Case, cases, run_case

from chongming_conformance.protocol.clauses import CLAUSES, Level
from chongming_conformance.report import FAIL, NOT_VERIFIED, PASS

ALL = cases()
#: The default run (and CI) takes every SAMPLE_EVERY-th store, in the matrix's fixed order,
#: so every kind of broken store (contract, property, stress) is represented and the run
#: stays within CI's budget; ``-m full_evidence`` runs the rest (docs/benchmarks.md has the
#: full matrix; its wall time: about 45 min serial on a loaded 2-core box, 7 min under -n 2
#: on a quiet one).
SAMPLE_EVERY = 8


def _marked(index: int, case: Case) -> object:
    if index % SAMPLE_EVERY == 0:
        return pytest.param(case, id=case.id)
    return pytest.param(case, id=case.id, marks=pytest.mark.full_evidence)


#: Clauses a broken store may or may not fail from run to run (see the test). Empty since
#: the mixed workload is judged by the linearizability checker: it fails every race store
#: it is not a knock-on for in every measured run, so XP-MIXED-WORKLOAD is recorded in
#: their FAIL sets and counts towards MAX_FAILING like any clause.
MAY_ALSO_FAIL: frozenset[str] = frozenset()
#: A broken promise may really break a second or third clause; never more.
MAX_FAILING = 3


@pytest.mark.parametrize("case", [_marked(i, c) for i, c in enumerate(ALL)])
def test_broken_store_fails_exactly_its_clauses(case: Case, tmp_path: Path) -> None:
    got = run_case(case, tmp_path)
    if case.refused:
        # Not shaped like a TaskStore: refused before any test, naming the difference.
        assert got.exit_code == pytest.ExitCode.USAGE_ERROR, got.output
        assert "not a TaskStore" in got.output, got.output
        return
    assert got.exit_code == pytest.ExitCode.TESTS_FAILED, got.output[-3000:]
    if case.shared is None:
        assert got.failing - MAY_ALSO_FAIL == case.fails - MAY_ALSO_FAIL, (
            f"FAIL set {sorted(got.failing)}, expected {sorted(case.fails)}:\n"
            f"{got.output[-3000:]}"
        )
    else:
        # A race store's scenarios race real processes: which of the clauses it was seen to
        # break also catch it in one run is chance. Its own clause must FAIL (asserted
        # below), and nothing outside what the recorded runs saw.
        assert got.failing - MAY_ALSO_FAIL <= case.fails, (
            f"FAIL set {sorted(got.failing)}, recorded {sorted(case.fails)}:\n"
            f"{got.output[-3000:]}"
        )
    assert got.failing, "a broken store must FAIL at least one clause"
    if case.own is not None:
        assert case.own in got.failing, f"its own clause {case.own} is not FAIL: {got.clauses}"
    assert len(got.failing - MAY_ALSO_FAIL) <= MAX_FAILING, sorted(got.failing)
    for cid, (outcome, note) in got.clauses.items():
        if cid in case.fails | MAY_ALSO_FAIL:
            continue
        assert outcome != FAIL, cid
        if outcome == NOT_VERIFIED:
            assert note, f"{cid} is NOT VERIFIED without a note saying why"
    if any(CLAUSES[c].level is Level.MUST for c in case.fails):
        assert got.verdict.startswith("does not conform"), got.verdict


def test_a_correct_store_still_passes_every_contract_clause(tmp_path: Path) -> None:
    """Control: the unbroken base of the contract stores, same profile, no FAIL at all."""
    got = run_case(Case("reference_stores.memory:InMemoryTaskStore", frozenset()), tmp_path)
    assert got.exit_code == pytest.ExitCode.OK, got.output[-3000:]
    assert got.failing == frozenset()
    assert {o for o, _ in got.clauses.values()} <= {PASS, NOT_VERIFIED}

