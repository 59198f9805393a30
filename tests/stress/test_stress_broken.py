"""Teeth of the harness: broken stores it must catch, and which of them the
single-connection contract catches too (asserted, not assumed).

Detection is probabilistic for the three races (check-then-write save,
unlocked claim, check-then-insert append): each run gets up to ATTEMPTS
scenario runs, and docs/stress.md records the measured per-run rate (every run
caught in our measurements, so ATTEMPTS only guards a freak quiet run).
"""

from __future__ import annotations

import pytest
from stress_helpers import contract_failures, until_caught
from stress_stores import (
    CachingReads,
    CheckThenInsertAppend,
    CheckThenReplaceCreate,
    CheckThenWriteSave,
    ExpiryIgnoredClaim,
    LeaseWritingSave,
    LocationPoolClose,
    NoLeaseClaim,
    OrmStyleSave,
    ReleaseKeepsLease,
    SelectThenDeleteEachPrune,
    StaleRowTouch,
    TouchBumpsVersion,
    UncommittedTouch,
    UnlockedClaim,
    shared,
    single,
)

from reference_stores.sqlite import SqliteTaskStore

ATTEMPTS = 5
PROFILE = "quick"

#: (store, scenario that must catch it, anomaly kinds that name the fault,
#:  contract tests that must fail -- empty: the contract cannot see it)
CASES = [
    (CheckThenWriteSave, "save_race", {"lost-update"}, set()),
    (UnlockedClaim, "claim_race", {"double-hold", "completed-twice"}, set()),
    (NoLeaseClaim, "claim_race", {"double-hold", "completed-twice"},
     {"test_claim_lease_exclusive__conflict_leased_command_not_reclaimed"}),
    (NoLeaseClaim, "crash_recovery", {"claimed-before-expiry"},
     {"test_claim_lease_exclusive__conflict_leased_command_not_reclaimed"}),
    (ExpiryIgnoredClaim, "crash_recovery", {"stuck-after-expiry"},
     {"test_claim_expired_reclaim__new_lease_after_expiry"}),
    (LeaseWritingSave, "touch_save", {"lease-clobbered"},
     {"test_save_keeps_lease__lease_from_touch_survives",
      "test_save_keeps_lease__lease_from_create_survives"}),
    (CheckThenInsertAppend, "append_replay", {"rows-per-version"}, set()),
    (CachingReads, "shared_visibility", {"stale-read"}, set()),
    (ReleaseKeepsLease, "release_starvation", {"starved"},
     {"test_release_not_complete__claimable_at_once"}),
    (StaleRowTouch, "touch_save", {"touch-conflict", "version-moved"}, set()),
    (TouchBumpsVersion, "touch_save", {"touch-conflict", "version-moved"},
     {"test_touch_no_version__version_unchanged_and_save_still_matches"}),
    # The four bugs of issue 15, each invisible to one connection:
    (CheckThenReplaceCreate, "create_race", {"create-twice", "create-overwritten"}, set()),
    (OrmStyleSave, "lease_writer", {"stale-lease"}, set()),
    (SelectThenDeleteEachPrune, "prune_race", {"revived-task-pruned"}, set()),
    (UncommittedTouch, "touch_visibility", {"touch-invisible"}, set()),
    # One instance's close() closing what every instance on the location shares:
    (LocationPoolClose, "close_isolated", {"close-not-isolated"}, set()),
]
IDS = [f"{c[0].__name__}-{c[1]}" for c in CASES]


@pytest.mark.parametrize(("store", "scenario", "kinds", "contract"), CASES, ids=IDS)
def test_harness_catches_the_broken_store(store: type[SqliteTaskStore], scenario: str,
                                          kinds: set[str], contract: set[str]) -> None:
    attempt, result = until_caught(shared(store), scenario, PROFILE, attempts=ATTEMPTS)
    assert result.anomalies, (
        f"{store.__name__} passed scenario {scenario!r} {attempt} times in a row:\n"
        + result.report())
    assert result.kinds() & kinds, (
        f"{store.__name__} was caught, but not for its fault ({sorted(kinds)}):\n"
        + result.report())
    assert not result.errors, result.report()


@pytest.mark.parametrize(("store", "scenario", "kinds", "contract"), CASES, ids=IDS)
def test_what_the_single_connection_contract_sees(store: type[SqliteTaskStore], scenario: str,
                                                  kinds: set[str], contract: set[str]) -> None:
    failures = contract_failures(single(store))
    if not contract:
        assert failures == {}, (
            f"{store.__name__} is meant to be invisible to one connection, but the contract "
            f"fails it: {failures}")
    else:
        missing = contract - set(failures)
        assert not missing, f"the contract should catch {store.__name__} in {sorted(missing)}"


def test_the_unbroken_base_passes_the_contract_runner() -> None:
    """The broken stores differ from a contract-clean store by one method only."""
    assert contract_failures(single(SqliteTaskStore)) == {}
