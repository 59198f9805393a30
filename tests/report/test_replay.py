"""The seeds line and the replay commands, read off a report document alone."""

from __future__ import annotations

import shlex
from typing import Any

from chongming_conformance.report.markdown import render_markdown
from chongming_conformance.report.replay import failing_nodeids, replay_command, seeds_line
from chongming_conformance.report.terminal import render_terminal

STRESS = {"name": "quick*", "processes": 3, "rounds": 5, "deadline": 60.0, "crash_cycles": 4,
          "seed": 17, "faults": "network", "fault_seconds": 8.0}
FAILED = "chongming_conformance/suite/test_stress.py::TestStoreStress::test_xp_mixed_workload"


def doc(**run: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "profile": "chongming-ci", "stress_profile": None, "hypothesis_seed": None,
        "seed": None, "topology": None, "gate": None, "gate_passed": None, "partial": False,
        "partial_reasons": [], "collection_errors": []}
    base.update(run)
    return {
        "run": base,
        "store": {"spec": "mypkg:make_store", "source": "--chongming-store", "type": "S",
                  "shared_spec": "mypkg:make_shared_store",
                  "shared_source": "found make_shared_store in mypkg"},
        "clauses": [{"id": "XP-MIXED-WORKLOAD", "level": "MUST", "outcome": "FAIL", "section": "§8",
                     "gated": True, "note": None, "scope": "cross_process",
                     "tests": [{"nodeid": FAILED + "[x]", "outcome": "failed",
                                "message": "boom"},
                               {"nodeid": "a::test_ok", "outcome": "passed", "message": ""}]}],
        "summary": {}, "unmapped_tests": [], "verdict": "does not conform",
    }


def test_the_seeds_line_names_the_schedule() -> None:
    assert seeds_line(doc()) == ("seeds: the gate's fixed schedule (no stress run, hypothesis "
                                 "derandomized)")
    assert seeds_line(doc(stress_profile={**STRESS, "seed": 0})) == (
        "seeds: the gate's fixed schedule (stress and fault schedules 0, hypothesis "
        "derandomized)")
    assert seeds_line(doc(seed=17, hypothesis_seed="17", stress_profile=STRESS)) == (
        "seeds: --chongming-seed=17 (stress and fault schedules 17, hypothesis 17)")
    assert "hypothesis --hypothesis-seed=5" in seeds_line(doc(hypothesis_seed="5"))


def test_a_replay_command_carries_store_profiles_faults_seed_and_test() -> None:
    d = doc(seed=17, hypothesis_seed="17", stress_profile=STRESS, profile="chongming-quick")
    [nodeid] = failing_nodeids(d)
    assert nodeid == FAILED + "[x]"
    assert shlex.split(replay_command(d, nodeid)) == [
        "pytest", "--chongming-store=mypkg:make_store", "--chongming-profile=quick",
        "--chongming-stress=quick", "--chongming-stress-processes=3",
        "--chongming-stress-rounds=5", "--chongming-stress-deadline=60",
        "--chongming-stress-crash-cycles=4", "--chongming-faults=network",
        "--chongming-seed=17", "-k", "test_xp_mixed_workload"]


def test_the_gate_schedule_replays_without_a_seed_and_a_given_shared_store_is_named() -> None:
    d = doc(stress_profile={**STRESS, "name": "ci", "seed": 0, "faults": "none"})
    d["store"]["shared_source"] = "--chongming-shared-store"
    assert shlex.split(replay_command(d, FAILED)) == [
        "pytest", "--chongming-store=mypkg:make_store",
        "--chongming-shared-store=mypkg:make_shared_store", "-k", "test_xp_mixed_workload"]
    d = doc(hypothesis_seed="99")
    assert "--hypothesis-seed=99" in replay_command(d, FAILED)


def test_terminal_and_markdown_print_the_seeds_and_each_replay() -> None:
    d = doc(seed=17, hypothesis_seed="17", stress_profile=STRESS)
    lines = [text for text, _ in render_terminal(d)]
    assert "seeds: --chongming-seed=17 (stress and fault schedules 17, hypothesis 17)" in lines
    assert f"replay test_xp_mixed_workload[x]: {replay_command(d, FAILED)}" in lines
    md = render_markdown({**d, "kit_version": "0", "catalogue_version": "1.5",
                          "environment": {"implementation": "CPython", "python": "3.11",
                                          "platform": "linux", "pytest": "8",
                                          "hypothesis": "6"}})
    assert "| Seeds | --chongming-seed=17 (stress and fault schedules 17, hypothesis 17) |" in md
    assert "Replay: `" + replay_command(d, FAILED) + "`" in md
