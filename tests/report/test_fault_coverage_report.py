"""Coverage is evidence: a fault run counts what its faults exercised, shows the matrix in
every report format, and a fault clause whose cells the run left short is NOT VERIFIED --
never PASS -- with a note naming the cells and by how much.

From plain records (``stress.fault_coverage``, ``report.outcomes``, ``report.coverage``):
the fault run itself has its own tests (tests/stress/test_fault_run.py).
"""

from __future__ import annotations

from typing import Any

from test_outcomes import every_gated_clause_passing, outcome, records, suite_test

from chongming_conformance.faults.applied import Applied, Landing
from chongming_conformance.faults.plan import READS, WRITES, Cell, Fault
from chongming_conformance.protocol.capabilities import Capabilities
from chongming_conformance.report import NOT_VERIFIED, PASS, assess
from chongming_conformance.report.coverage import (
    render_coverage_html,
    render_coverage_markdown,
    render_coverage_text,
)
from chongming_conformance.stress.fault_coverage import (
    EFFECT_ASSUMED,
    NO_HANG,
    REQUIRED,
    SAFETY,
    matrix,
    unproven,
)
from chongming_conformance.stress.log import Logs, Op

CELLS = {SAFETY: (Cell(("lost-reply",), ("save",), 2, "a save that committed"),
                  Cell(("lost-request",), ("claim_commands",), 1, "a claim never sent")),
         NO_HANG: (Cell(("blackhole",), ("get", "query"), 1, "only a client timeout"),)}


def _op(worker: int, seq: int, method: str, *, ok: bool, conflict: bool = False) -> Op:
    error = None if ok else {"type": "ConcurrencyConflict" if conflict else "StoreError",
                             "conflict": conflict}
    return Op(worker, seq, method, 0, None, {}, 1.0, 2.0, ok=ok, error=error)


def _applied(number: int, kind: str, method: str, worker: int, seq: int, *,
             aimed: bool = True) -> Applied:
    fault = Fault(number, kind, 0.0, 0.0, False, 0, target=method if aimed else "")
    return Applied(fault, 1.0, 1.1, "", (Landing(worker, seq, method, aimed=aimed),))


def _run() -> dict[str, Any]:
    """Two lost replies on saves (one raised, one answered a conflict), one unaimed lost
    reply (shown, not counted), a blackhole on a get; no lost request on a claim."""
    logs = Logs(ops={0: [_op(0, 1, "save", ok=False), _op(0, 2, "save", ok=False,
                                                          conflict=True)],
                     1: [_op(1, 1, "save", ok=True), _op(1, 2, "get", ok=False)]})
    applied = [_applied(1, "lost-reply", "save", 0, 1), _applied(2, "lost-reply", "save", 0, 2),
               _applied(3, "lost-reply", "save", 1, 1, aimed=False),
               _applied(4, "blackhole", "get", 1, 2)]
    return matrix(applied, logs, CELLS, mode="network", seed=7, round_trips={"save": 3})


def test_the_matrix_counts_landings_and_how_the_calls_ended() -> None:
    cov = _run()
    save = cov["rows"]["lost-reply"]["save"]
    assert save == {"landed": 3, "counted": 2, "returned": 1, "conflict": 1, "raised": 1,
                    "pending": 0}
    assert cov["rows"]["blackhole"]["get"]["raised"] == 1
    cells = [(c["clause"], c["label"], c["landed"], c["minimum"], c["met"])
             for c in cov["required"]]
    [reply, request] = CELLS[SAFETY]
    [hole] = CELLS[NO_HANG]
    assert cells == [(SAFETY, reply.label, 2, 2, True), (SAFETY, request.label, 0, 1, False),
                     (NO_HANG, hole.label, 1, 1, True)]
    assert (cov["seed"], cov["mode"], cov["round_trips"]) == (7, "network", {"save": 3})


def test_a_short_cell_names_the_clause_the_cell_and_the_seed() -> None:
    why = unproven(_run())
    assert set(why) == {SAFETY}  # NO-HANG's cell was met
    assert "lost-request" in why[SAFETY] and "0 of 1" in why[SAFETY]
    assert "seed 7" in why[SAFETY]


def test_a_clause_left_short_is_not_verified_never_pass() -> None:
    why = unproven(_run())
    tests = [(suite_test("test_xp_fault_safety", "passed", unproven=why, coverage=_run()),
              (SAFETY,)) if cids == (SAFETY,) else (t, cids)
             for t, cids in every_gated_clause_passing()]
    got = assess(records(*tests), Capabilities(), shared_available=True, gate="must",
                 faults="network")
    [r] = [r for r in got.results if r.clause.id == SAFETY]
    assert r.outcome == NOT_VERIFIED and r.gated
    assert "lost-request" in (r.note or "") and "passed, but" in (r.note or "")
    assert outcome(got, NO_HANG) == PASS
    assert got.gate_passed is False  # a gated MUST clause not proven: not a conformance claim


def _doc(cov: dict[str, Any]) -> dict[str, Any]:
    test = {"nodeid": "suite/test_stress.py::TestStoreStress::test_xp_fault_safety",
            "coverage": cov}
    return {"clauses": [{"id": SAFETY, "tests": [test]}, {"id": NO_HANG, "tests": [test]}]}


def test_every_format_shows_the_matrix_and_the_short_cells() -> None:
    cov = _run()
    text = "\n".join(render_coverage_text(cov))
    assert "lost-reply" in text and "3:2/1" in text  # landed:not done/returned
    assert "short:" in text and f"{CELLS[SAFETY][1].label} x1, landed 0" in text
    markdown = render_coverage_markdown(_doc(cov))
    assert markdown.count("## Fault coverage") == 1  # one test, named by two clauses
    assert "| lost-reply |" in markdown and "**no**" in markdown
    page = render_coverage_html(_doc(cov))
    assert 'class="coverage-matrix"' in page and "<strong>no</strong>" in page


def test_the_required_cells_give_a_reason_and_reach_every_write() -> None:
    """Every cell states why its minimum; every write kind meets a lost reply after its
    commit several times, every kind of call a lost request, and so do the kinds of call
    whose effect a store most often assumes (an insert of an id that exists, ...)."""
    network = REQUIRED["network"]
    cells = [c for cs in network.values() for c in cs]
    assert all(c.reason for c in cells)
    lost_reply = {m for c in network[SAFETY] if c.kinds == ("lost-reply",) for m in c.methods
                  if c.minimum >= 2} - {"claim_commands:all"}
    lost_request = {m for c in network[SAFETY] if c.kinds == ("lost-request",)
                    for m in c.methods}
    assert lost_reply == set(WRITES)
    assert lost_request == set(WRITES) | set(READS) | set(EFFECT_ASSUMED)
    assert ("claim_commands:all",) in [c.methods for c in network[SAFETY]
                                       if c.kinds == ("lost-reply",)]
