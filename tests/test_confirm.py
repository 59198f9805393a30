"""The re-check probes of ``confirm.py`` have teeth both ways.

A probe turns a guessed culprit into a blame. It must be refuted on a correct store (else
a correct store's unrelated failure would be pinned on a clause it keeps) and confirmed
on the broken store whose bug it is about (else the guess would never be blamed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone

import broken_stores
import pytest

from chongming_conformance.oracle import confirm, query_culprits
from chongming_conformance.protocol import TaskStore
from chongming_conformance.protocol.model import TaskQuery, TaskSnapshot, TaskStatus
from reference_stores.memory import InMemoryTaskStore

KATHMANDU = timezone(timedelta(hours=5, minutes=45))
ST_JOHNS = timezone(timedelta(hours=-3, minutes=-30))
#: Wall-clock order and instant order disagree on these three.
MIXED_ZONES = [
    datetime(2031, 1, 1, 12, 0, tzinfo=ST_JOHNS),
    datetime(2031, 1, 1, 14, 0, tzinfo=KATHMANDU),
    datetime(2031, 1, 1, 9, 0, tzinfo=UTC),
]

#: Claimed two at a time, wall-clock order and instant order take the same first command
#: (01:00 UTC) and differ in the second: 10:00+08:00 (02:00 UTC) by instant, 05:00 UTC by
#: wall clock -- a claim of one cannot tell them apart.
SECOND_PICK = [
    datetime(2031, 1, 1, 1, 0, tzinfo=UTC),
    datetime(2031, 1, 1, 10, 0, tzinfo=timezone(timedelta(hours=8))),
    datetime(2031, 1, 1, 5, 0, tzinfo=UTC),
]


#: A task that matches the tag of ORED_QUERY and fails its name prefix.
ORED_TASK = TaskSnapshot("t-1", "web-a", TaskStatus.PENDING, 1,
                         datetime(2031, 1, 1, tzinfo=UTC), datetime(2031, 1, 1, tzinfo=UTC),
                         tags=frozenset({"io"}))
ORED_QUERY = TaskQuery(name_prefix="etl-", tag="io")


class IgnoresSetFilter(InMemoryTaskStore):
    """A query that drops one set filter (``FIELD``) altogether."""

    FIELD = ""

    def query(self, query: TaskQuery | None = None) -> Sequence[TaskSnapshot]:
        return super().query(replace(query or TaskQuery(), **{self.FIELD: None}))


class IgnoresStatuses(IgnoresSetFilter):
    FIELD = "statuses"


class IgnoresBuckets(IgnoresSetFilter):
    FIELD = "buckets"


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
    ("claim_order_follows_wall_clock_second_pick",
     lambda: confirm.claim_order_follows_wall_clock(SECOND_PICK, 2),
     broken_stores.SortsByWallClockText),
    ("set_filter_ignored_statuses", lambda: confirm.set_filter_ignored("statuses"),
     IgnoresStatuses),
    ("set_filter_ignored_buckets", lambda: confirm.set_filter_ignored("buckets"),
     IgnoresBuckets),
    ("touch_moves_version", confirm.touch_moves_version, broken_stores.TouchBumpsVersion),
    ("query_admits",
     lambda: confirm.query_admits(ORED_TASK, ORED_QUERY), broken_stores.QueryFiltersOred),
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


def test_a_claim_of_one_cannot_see_a_wall_clock_second_pick() -> None:
    # Why the probe takes the claim's size: with one, both orders take the same command.
    store = broken_stores.SortsByWallClockText
    assert confirm.claim_order_follows_wall_clock(SECOND_PICK)(store()) is False
    assert confirm.claim_order_follows_wall_clock(SECOND_PICK, 2)(store()) is True


def test_set_filter_probe_is_refuted_where_only_the_empty_set_is_no_filter() -> None:
    # The empty-set bug keeps its clause: a non-empty set filters on that store.
    for field in ("statuses", "buckets"):
        assert confirm.set_filter_ignored(field)(broken_stores.QueryEmptySetIsNoFilter()) is False


@pytest.mark.parametrize(
    ("store", "field", "clause"),
    [
        (broken_stores.QueryEmptySetIsNoFilter, "statuses", "QUERY-EMPTY-SET-MATCHES-NOTHING"),
        (broken_stores.QueryEmptySetIsNoFilter, "buckets", "QUERY-EMPTY-SET-MATCHES-NOTHING"),
        (IgnoresStatuses, "statuses", "QUERY-STATUSES"),
        (IgnoresBuckets, "buckets", "QUERY-BUCKETS"),
    ],
)
def test_an_empty_set_that_matches_is_blamed_on_the_clause_a_fresh_store_shows(
    store: type[TaskStore], field: str, clause: str
) -> None:
    at = datetime(2031, 1, 1, tzinfo=UTC)
    task = TaskSnapshot("t-1", "job", TaskStatus.PENDING, 1, at, at, bucket=3)
    q = TaskQuery(**{field: frozenset()})
    with confirm.confirming(lambda: contextlib.nullcontext(store())):
        assert query_culprits([task], [task], q) == (clause,)


#: Matches the name prefix of ORED_QUERY and fails its tag, as a substring only.
SUBSTRING_TASK = replace(ORED_TASK, name="etl-a", tags=frozenset({"ios"}))


@pytest.mark.parametrize(
    ("store", "task", "clause"),
    [
        # each filter works alone, the whole query lets it through: not ANDed
        (broken_stores.QueryFiltersOred, ORED_TASK, "QUERY-FILTERS-COMBINE"),
        # the tag filter alone lets it through
        (broken_stores.QueryTagSubstring, SUBSTRING_TASK, "QUERY-TAG-EXACT"),
        # a fresh store shows nothing: the filter read off the answer, as before
        (InMemoryTaskStore, ORED_TASK, "QUERY-NAME-PREFIX-LITERAL"),
    ],
)
def test_a_task_failing_one_filter_of_several_is_blamed_on_what_a_fresh_store_shows(
    store: type[TaskStore], task: TaskSnapshot, clause: str
) -> None:
    with confirm.confirming(lambda: contextlib.nullcontext(store())):
        assert query_culprits([task], [task], ORED_QUERY) == (clause,)
