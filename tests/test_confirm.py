"""The re-check probes of ``confirm.py`` have teeth both ways.

A probe turns a guessed culprit into a blame. It must be refuted on a correct store (else
a correct store's unrelated failure would be pinned on a clause it keeps) and confirmed
on the broken store whose bug it is about (else the guess would never be blamed).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import broken_stores
import pytest

from chongming_conformance import confirm
from chongming_conformance.protocol import TaskStore
from reference_stores.memory import InMemoryTaskStore

KATHMANDU = timezone(timedelta(hours=5, minutes=45))
ST_JOHNS = timezone(timedelta(hours=-3, minutes=-30))
#: Wall-clock order and instant order disagree on these three.
MIXED_ZONES = [
    datetime(2031, 1, 1, 12, 0, tzinfo=ST_JOHNS),
    datetime(2031, 1, 1, 14, 0, tzinfo=KATHMANDU),
    datetime(2031, 1, 1, 9, 0, tzinfo=UTC),
]

PROBES: list[tuple[str, Callable[[], confirm.Probe], type[TaskStore]]] = [
    ("ties_dropped", confirm.ties_dropped, broken_stores.QueryDropsTies),
    ("claim_leases_beyond_limit", confirm.claim_leases_beyond_limit,
     broken_stores.ClaimLeasesBeyondLimit),
    ("limit_before_filter", confirm.limit_before_filter, broken_stores.LimitBeforeFilter),
    ("lease_cut_short", confirm.lease_cut_short, broken_stores.WholeSecondLeases),
    ("lease_from_wall_clock", confirm.lease_from_wall_clock,
     broken_stores.LeaseExpiryByWallClock),
    ("query_order_follows_wall_clock",
     lambda: confirm.query_order_follows_wall_clock(MIXED_ZONES),
     broken_stores.SortsByWallClockText),
    ("claim_order_follows_wall_clock",
     lambda: confirm.claim_order_follows_wall_clock(MIXED_ZONES),
     broken_stores.SortsByWallClockText),
]


@pytest.mark.parametrize(("name", "probe", "broken"), PROBES, ids=[p[0] for p in PROBES])
def test_probe_is_refuted_on_a_correct_store(
    name: str, probe: Callable[[], confirm.Probe], broken: type[TaskStore]
) -> None:
    assert probe()(InMemoryTaskStore()) is False, name


@pytest.mark.parametrize(("name", "probe", "broken"), PROBES, ids=[p[0] for p in PROBES])
def test_probe_is_confirmed_on_the_store_it_is_about(
    name: str, probe: Callable[[], confirm.Probe], broken: type[TaskStore]
) -> None:
    assert probe()(broken()) is True, f"{name} on {broken.__name__}"


def test_ties_probe_is_refuted_on_a_filter_bug_that_drops_a_tied_task() -> None:
    # The audit's case: a tag looked up by JSON path misses a task that happens to tie
    # with another; the tie is not why, and the probe (plain names, no tags) says so.
    assert confirm.ties_dropped()(broken_stores.JsonPathTag()) is False
