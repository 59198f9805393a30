"""The mixed random workload: it passes the references (test_stress_reference runs it on
SQLite and Postgres) and finds every broken store of ``stress_stores`` at the ci profile,
with the seed and the log slice in its report."""

from __future__ import annotations

import dataclasses

import pytest
from stress_helpers import until_caught
from stress_stores import (
    CachingReads,
    CheckThenInsertAppend,
    CheckThenReplaceCreate,
    CheckThenWriteSave,
    ExpiryIgnoredClaim,
    LeaseWritingSave,
    NoLeaseClaim,
    OrmStyleSave,
    ReleaseKeepsLease,
    SelectThenDeleteEachPrune,
    StaleRowTouch,
    TouchBumpsVersion,
    UncommittedTouch,
    UnlockedClaim,
    shared,
)

from chongming_conformance.stress import PROFILES
from reference_stores.sqlite import SqliteTaskStore

#: The ci profile's processes and rounds; a shorter deadline only bounds the store that
#: holds a lock (UncommittedTouch), which is caught long before it.
CI = dataclasses.replace(PROFILES["ci"], deadline=60.0)

BROKEN = [CheckThenWriteSave, UnlockedClaim, NoLeaseClaim, ExpiryIgnoredClaim, LeaseWritingSave,
          CheckThenInsertAppend, CachingReads, ReleaseKeepsLease, TouchBumpsVersion,
          StaleRowTouch, CheckThenReplaceCreate, OrmStyleSave, SelectThenDeleteEachPrune,
          UncommittedTouch]


@pytest.mark.parametrize("store", BROKEN, ids=[s.__name__ for s in BROKEN])
def test_the_mixed_workload_finds_the_broken_store(store: type[SqliteTaskStore]) -> None:
    attempt, result = until_caught(shared(store), "mixed_workload", CI, attempts=2)
    assert result.anomalies, (f"{store.__name__} passed the mixed workload {attempt} times:\n"
                              + result.report())
    first = result.anomalies[0]
    assert first.kind == "lock-contention" or f"(seed {CI.seed})" in first.message, str(first)
