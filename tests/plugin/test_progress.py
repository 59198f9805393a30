"""Long phases print progress lines, so a run is never silent for the length of a phase.

Each stress scenario is announced with its number, the stress profile's knobs and, when it
ends, its outcome and duration; under the thorough hypothesis profile each hypothesis test
is announced the same way. Unit tests pin the node-id rules the controller relies on.
"""

from __future__ import annotations

import re

import pytest
from plugin_helpers import run

from chongming_conformance.plugin.itemdata import (
    CLAUSE_PROPERTY,
    clause_properties,
    is_stress_nodeid,
    serial_nodeid,
)
from chongming_conformance.stress.scenarios import SCENARIOS

STRESS = "chongming_conformance/suite/test_stress.py::TestStoreStress::test_xp_save_atomic__x"


def test_stress_nodeids_are_recognised_by_their_suite_file() -> None:
    assert is_stress_nodeid(STRESS)
    assert is_stress_nodeid("src/" + STRESS)
    assert not is_stress_nodeid("chongming_conformance/suite/test_contract.py::T::test_x")


def test_serial_nodeid_drops_only_an_xdist_group_suffix() -> None:
    assert serial_nodeid(STRESS + "@chongming-stress") == STRESS
    assert serial_nodeid(STRESS) == STRESS
    # An '@' inside parametrize ids is part of the name.
    assert serial_nodeid("t.py::test_x[a@b]") == "t.py::test_x[a@b]"


def test_clause_properties_name_each_clause_and_level() -> None:
    assert clause_properties(("SAVE-CAS", "SAVE-CONFLICT-DETAILS")) == [
        (CLAUSE_PROPERTY, "SAVE-CAS [MUST]"),
        (CLAUSE_PROPERTY, "SAVE-CONFLICT-DETAILS [SHOULD]"),
    ]


def test_each_stress_scenario_is_announced_with_its_round_count(
    pytester: pytest.Pytester,
) -> None:
    result = run(
        pytester, "--chongming-store=reference_stores.sqlite:make_store", "-k", "test_stress",
        "--chongming-stress=quick", "--chongming-stress-rounds=3",
    )
    out = result.stdout.str()
    assert result.ret == 0, out
    total = len(SCENARIOS) - 1  # the fault run is not requested: nothing to announce
    starts = re.findall(
        rf"^chongming: stress (\d+)/{total} test_xp_\S+ \((?:quick\*: \d+ processes, 3 rounds, "
        r"[\d.]+ s bound|in this process: instances on one location, no worker processes)\)$",
        out, re.MULTILINE,
    )
    ends = re.findall(
        rf"^chongming: stress (\d+)/{total} passed in [\d.]+ m?s$", out, re.MULTILINE
    )
    expected = [str(k) for k in range(1, total + 1)]
    assert starts == expected, out
    assert ends == expected, out
    # The one scenario without workers says so, and its milliseconds are not "0.0 s".
    assert re.search(r"test_xp_close_isolated\S* \(in this process", out), out
    assert not re.search(r"passed in 0\.0 s", out), out


def test_without_a_shared_store_nothing_is_announced(pytester: pytest.Pytester) -> None:
    result = run(pytester, "--chongming-store=reference_stores.memory:make_store", "-k",
                 "test_stress or counts_per_status")
    assert "chongming: stress" not in result.stdout.str()


def test_thorough_profile_announces_each_hypothesis_test(pytester: pytest.Pytester) -> None:
    result = run(
        pytester, "--chongming-store=reference_stores.memory:make_store",
        "--chongming-profile=thorough", "-k", "test_counts_match_model",
    )
    out = result.stdout.str()
    assert result.ret == 0, out
    assert re.search(r"^chongming: hypothesis 1/1 test_counts_match_model$", out, re.MULTILINE)
    assert re.search(r"^chongming: hypothesis 1/1 passed in [\d.]+ m?s$", out, re.MULTILINE)


def test_a_store_factory_can_note_a_long_step_on_the_terminal(pytester: pytest.Pytester) -> None:
    """chongming_conformance.seam.progress.note from a factory (the Postgres store notes its
    schema install this way) is shown while the test runs, capture notwithstanding."""
    pytester.makepyfile(
        slowstore="""
        from chongming_conformance.seam import progress
        from reference_stores.memory import InMemoryTaskStore

        def make_store():
            progress.note("slowstore: installing the schema demo_1")
            return InMemoryTaskStore()
        """
    )
    result = run(pytester, "--chongming-store=slowstore:make_store", "-k",
                 "create_then_get__returns")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert re.search(r"^chongming: slowstore: installing the schema demo_1$", out, re.MULTILINE)
