"""Each deliberately broken store is caught by a property or the state machine.

Runs are deterministic: derandomized settings with no example database, so
the same examples are tried on every run and machine; the shrink phase is off
(finding a counterexample is the point here, not minimising it). A check "catches" a
store when hypothesis finds a falsifying example and re-raises the store's
failure (an AssertionError from the model comparison, or the store's own
exception) -- never a hypothesis usage error or health check.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import Phase, settings
from hypothesis.errors import HypothesisException
from property_broken_stores import (
    BROKEN_STORES,
    ClaimIgnoresLease,
    PipelineTestedByTruthiness,
    PruneDropsNonTerminal,
    PruneHistoryByPattern,
    ReleaseMarksComplete,
    SaveClobbersLease,
    SaveRequiresNextVersion,
    StoresLocalTime,
    TagRowsKeepCreatedAt,
    TagSubstringMatch,
    TaskIdPadSpace,
    TouchBumpsVersion,
    UnescapedLikePrefix,
)

from chongming_conformance.checking.hypothesis_profiles import PROFILES
from chongming_conformance.checking.properties import StoreProperties
from chongming_conformance.checking.stateful import StoreStateMachineTests
from chongming_conformance.oracle.blame import BLAME_NOTE
from reference_stores.memory import InMemoryTaskStore

# Exactly the kit's default (ci) profile -- derandomized, no database -- minus
# the shrink phase: what is asserted is that a falsifying example is found;
# shrinking it adds tens of seconds per case and changes nothing.
DETERMINISTIC = settings(
    settings.get_profile(PROFILES["ci"]),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    report_multiple_bugs=False,
)

STATE_MACHINE = "test_state_machine"
#: Catches are measured, not scripted: with the ci budget (100 examples) each claimed
#: catch was made in at least 9 of 10 unseeded tries (docs/benchmarks.md). A derandomized
#: run repeats only for one set of imported modules (hypothesis mixes constants it finds
#: in loaded modules into generation), so which examples CI tries depends on what ran
#: before in that worker. A claimed catch must be near-certain, not lucky: the catch runs
#: get three times the budget (a 90 % catch becomes 99.9 %; a caught run stops at once).
#: Catches below 90 % (the state machine on a LIKE prefix or a substring tag) are not
#: claimed; the query property and the contract catch those in every run.
CATCH_SETTINGS = settings(DETERMINISTIC, max_examples=3 * (DETERMINISTIC.max_examples or 100))

#: broken store -> the checks that must each catch it on their own.
CATCHERS: dict[type[InMemoryTaskStore], tuple[str, ...]] = {
    SaveRequiresNextVersion: ("test_version_skip", STATE_MACHINE),
    TouchBumpsVersion: ("test_touch_interleaved_with_saves", STATE_MACHINE),
    SaveClobbersLease: (
        "test_snapshot_roundtrip",
        "test_touch_interleaved_with_saves",
        STATE_MACHINE,
    ),
    # The state machine's catch of a substring tag match depended on the derandomized draw
    # sequence and was lost when the alphabet strategies changed; the query property (here)
    # and the contract's QUERY-TAG-EXACT tests (tests/test_teeth.py) catch it in every run.
    TagSubstringMatch: ("test_query_matches_model",),
    UnescapedLikePrefix: ("test_query_matches_model",),
    StoresLocalTime: ("test_snapshot_roundtrip", "test_query_matches_model", STATE_MACHINE),
    ClaimIgnoresLease: ("test_claim_matches_model", STATE_MACHINE),
    ReleaseMarksComplete: (STATE_MACHINE,),
    PruneDropsNonTerminal: ("test_prune_matches_model", STATE_MACHINE),
    TaskIdPadSpace: (STATE_MACHINE,),
    # Issue 33's blind spots: a save changing one field (created_at) and a tag query; the
    # empty run id; a pruned id that a LIKE confuses with a kept one (cases.py counts each).
    # (The state machine makes one-field saves too, but two tasks sharing a tag whose order a
    # created_at change flips are rare in its runs: 0 of 300 examples caught it. Not claimed.)
    TagRowsKeepCreatedAt: ("test_single_field_save",),
    PipelineTestedByTruthiness: ("test_query_matches_model",),
    PruneHistoryByPattern: ("test_prune_matches_model",),
}

CASES = [
    pytest.param(store, check, id=f"{store.__name__}-{check}")
    for store, checks in CATCHERS.items()
    for check in checks
]


def _suite_for(store_type: type[InMemoryTaskStore], check: str, *, catch: bool = True) -> Any:
    base: type[Any] = StoreStateMachineTests if check == STATE_MACHINE else StoreProperties
    suite = type(
        f"Broken{store_type.__name__}",
        (base,),
        {
            "make_store": lambda self: store_type(),
            "hypothesis_settings": CATCH_SETTINGS if catch else DETERMINISTIC,
        },
    )
    return suite()


def test_every_broken_store_has_a_catcher() -> None:
    assert set(CATCHERS) == set(BROKEN_STORES.values())
    assert all(CATCHERS.values())


@pytest.mark.parametrize(("store_type", "check"), CASES)
def test_broken_store_is_caught(store_type: type[InMemoryTaskStore], check: str) -> None:
    suite = _suite_for(store_type, check)
    with pytest.raises(Exception) as caught:  # any store failure counts
        getattr(suite, check)()
    assert not isinstance(caught.value, HypothesisException), (
        f"{check} broke for a reason other than the store: {caught.value!r}"
    )


@pytest.mark.parametrize("check", sorted({c for cs in CATCHERS.values() for c in cs}))
def test_the_same_checks_pass_on_the_correct_store(check: str) -> None:
    """Control: with the bug removed, the very same deterministic run passes."""
    getattr(_suite_for(InMemoryTaskStore, check, catch=False), check)()


#: broken store -> the one clause its failures must be blamed on (where it can be told).
BLAMED = {
    SaveClobbersLease: "SAVE-KEEPS-LEASE",
    TouchBumpsVersion: "TOUCH-NO-VERSION",
}


@pytest.mark.parametrize(
    ("store_type", "check"),
    [
        pytest.param(store, check, id=f"{store.__name__}-{check}")
        for store in BLAMED
        for check in CATCHERS[store]
    ],
)
def test_failure_is_blamed_on_the_broken_clause(
    store_type: type[InMemoryTaskStore], check: str
) -> None:
    """Many-clause checks say which clause broke, so the report fails only that one."""
    suite = _suite_for(store_type, check)
    with pytest.raises(AssertionError) as caught:
        getattr(suite, check)()
    notes = [n for n in getattr(caught.value, "__notes__", []) if n.startswith(BLAME_NOTE)]
    assert notes == [BLAME_NOTE + BLAMED[store_type]], notes
