"""A controller check's failure that is another clause's, blamed there (issue 33, item 3).

* a touch that moves the version makes the holder's own CANCELLED save conflict:
  CTRL-STOP-REACHES-HOLDER's stop did reach the holder, and a fresh store shows touch
  moving the version -- TOUCH-NO-VERSION;
* a completed stop handed out again once its lease ran out: the complete did not take --
  COMPLETE-NEVER-RECLAIMED, not CTRL-STOP-DELIVERED-ONCE (whose own trap, a claim that
  ignores the lease, stays its own);
* the dashboard reads (query by tag, run id, buckets; counts) wrong on a fresh store: the
  store's query or counts clause (checking/controller/preflight.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from broken_stores import (
    ClaimIgnoresLease,
    CompleteOnlyClearsLease,
    CountsCachedAtCreate,
    TouchBumpsVersion,
)

from chongming_conformance.checking.controller import ControllerContract
from chongming_conformance.oracle.blame import notes_blame
from chongming_conformance.protocol.model import TaskQuery, TaskSnapshot
from reference_stores.memory import InMemoryTaskStore


class DropsBuckets(InMemoryTaskStore):
    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        return super().query(replace(query or TaskQuery(), buckets=None))


class DropsPipeline(InMemoryTaskStore):
    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        return super().query(replace(query or TaskQuery(), pipeline_run_id=None))


def _failure(store: type, name: str) -> BaseException | None:
    class Check(ControllerContract):
        def make_store(self) -> Any:
            return store()

    check = Check()
    check.setup_method()
    try:
        getattr(check, name)()
    except Exception as exc:
        return exc
    finally:
        check.teardown_method()
    return None


STOP_REACHES = "test_ctrl_stop_reaches_holder__after_a_non_holder_claimed_it_first"
DELIVERED_ONCE = "test_ctrl_stop_delivered_once__no_second_delivery_while_held"
PLUGS_IN = "test_ctrl_plugs_in__tasks_succeed_and_reads_agree"


@pytest.mark.parametrize(
    ("store", "name", "blamed"),
    [
        (TouchBumpsVersion, STOP_REACHES, ("TOUCH-NO-VERSION",)),
        (CompleteOnlyClearsLease, DELIVERED_ONCE, ("COMPLETE-NEVER-RECLAIMED",)),
        (ClaimIgnoresLease, DELIVERED_ONCE, ()),  # the clause's own trap
        (DropsBuckets, PLUGS_IN, ("QUERY-BUCKETS",)),
        (DropsPipeline, PLUGS_IN, ("QUERY-PIPELINE",)),
        (CountsCachedAtCreate, PLUGS_IN, ("COUNTS-PER-STATUS",)),
    ],
    ids=lambda v: v.__name__ if isinstance(v, type) else None,
)
def test_the_failure_is_blamed_on_the_clause_the_store_breaks(
    store: type, name: str, blamed: tuple[str, ...]
) -> None:
    failure = _failure(store, name)
    assert isinstance(failure, AssertionError), f"{store.__name__} passed {name}: {failure!r}"
    assert notes_blame(failure) == blamed, failure


@pytest.mark.parametrize("name", [STOP_REACHES, DELIVERED_ONCE, PLUGS_IN])
def test_the_reference_store_passes(name: str) -> None:
    assert _failure(InMemoryTaskStore, name) is None
