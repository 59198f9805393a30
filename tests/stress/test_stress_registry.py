"""The scenario registry: one module per scenario, each XP clause declared once, and the
``StressContract`` tests generated from it with the node names and clauses the plugin
and its users rely on. No process is spawned here."""

from __future__ import annotations

import pkgutil
import re
from pathlib import Path

import pytest

import chongming_conformance.stress as stress
from chongming_conformance.protocol.clauses import CLAUSES, Scope, clauses_of
from chongming_conformance.stress import SCENARIOS, Scenario, StressContract, scenarios
from chongming_conformance.stress.scenarios import register
from chongming_conformance.stress.scenarios.save_race import run as save_race_run

#: The generated test names are node ids in users' runs and reports: they must not move.
EXPECTED_TESTS: dict[str, str | tuple[str, ...]] = {
    "test_xp_create_exclusive__one_create_wins": "XP-CREATE-EXCLUSIVE",
    "test_xp_save_keeps_lease__renewed_lease_survives_saves": "XP-SAVE-KEEPS-LEASE",
    "test_xp_touch_visible__next_reader_sees_it": "XP-TOUCH-VISIBLE",
    "test_xp_prune_save_race__revived_task_survives": "XP-PRUNE-SAVE-RACE",
    "test_xp_mixed_workload__random_mix_keeps_every_invariant": "XP-MIXED-WORKLOAD",
    "test_xp_save_atomic__save_race": "XP-SAVE-ATOMIC",
    "test_xp_claim_exclusive__claim_race": "XP-CLAIM-EXCLUSIVE",
    "test_xp_claim_crash_recovery__killed_holder": "XP-CLAIM-CRASH-RECOVERY",
    "test_xp_touch_save__touch_while_saving": "XP-TOUCH-SAVE",
    "test_xp_append_replay__concurrent_replay": "XP-APPEND-REPLAY",
    "test_xp_release_no_starvation__owner_gets_its_command": "XP-RELEASE-NO-STARVATION",
    "test_xp_shared_visibility__next_read_sees_it": "XP-SHARED-VISIBILITY",
    "test_xp_close_isolated__closing_one_instance_spares_the_others": "XP-CLOSE-ISOLATED",
    # One run judges four clauses; each anomaly names its own (blame).
    "test_xp_fault_safety__history_linearizable_under_faults": (
        "XP-FAULT-SAFETY", "XP-FAULT-RECOVERY", "XP-FAULT-NO-HANG", "XP-FAULT-DURABILITY"),
}


def test_generated_tests_keep_their_names_and_clauses() -> None:
    tests = {n: clauses_of(getattr(StressContract, n))
             for n in dir(StressContract) if n.startswith("test_")}
    assert tests == {name: cid if isinstance(cid, tuple) else (cid,)
                     for name, cid in EXPECTED_TESTS.items()}


def test_a_generated_test_runs_its_own_scenario() -> None:
    ran: list[str] = []

    class Recorder(StressContract):
        def assert_stress(self, scenario: str) -> None:  # type: ignore[override]
            ran.append(scenario)

    for scenario in SCENARIOS.values():
        getattr(Recorder(), scenario.test_name)()
    assert ran == list(SCENARIOS)


def test_every_public_scenario_module_registers_exactly_one_scenario() -> None:
    modules = sorted(f"{scenarios.__name__}.{m.name}" for m in pkgutil.iter_modules(
        scenarios.__path__) if not m.name.startswith("_"))
    registered = sorted(s.run.__module__ for s in SCENARIOS.values())
    assert registered == modules


def _stress_clause_ids() -> list[str]:
    """Cross-process clauses the harness proves (XP-CTRL-* are the controller checks')."""
    return [c.id for c in CLAUSES.values()
            if c.scope is Scope.CROSS_PROCESS and not c.id.startswith("XP-CTRL-")]


def test_scenarios_follow_the_clause_catalogue() -> None:
    order = _stress_clause_ids()
    assert [cid for s in SCENARIOS.values() for cid in s.clauses] == order


def test_each_xp_clause_is_written_once_in_the_stress_package() -> None:
    sources = {p: p.read_text(encoding="utf-8")
               for p in Path(stress.__file__).parent.rglob("*.py")}
    for cid in _stress_clause_ids():
        places = [p.name for p, text in sources.items()
                  for _ in re.finditer(rf'"{re.escape(cid)}"', text)]
        assert len(places) == 1, f"{cid} is declared in {places}"


def test_register_refuses_unknown_and_single_connection_clauses_and_reused_names() -> None:
    before = dict(SCENARIOS)
    with pytest.raises(KeyError, match="XP-NO-SUCH"):
        register(Scenario(name="x", clause="XP-NO-SUCH", rule="x", run=save_race_run))
    single = next(c.id for c in CLAUSES.values() if c.scope is Scope.CONTRACT)
    with pytest.raises(ValueError, match="not a cross-process clause"):
        register(Scenario(name="x", clause=single, rule="x", run=save_race_run))
    with pytest.raises(ValueError, match="two stress scenarios are named 'save_race'"):
        register(Scenario(name="save_race", clause="XP-SAVE-ATOMIC", rule="again",
                          run=save_race_run))
    assert dict(SCENARIOS) == before
