"""A refusal of an input is reported as that, naming the value, on the value's own clause.

A MariaDB-style store with 32-bit ``TIMESTAMP`` columns refuses a snapshot created in 2040
with ``StoreError``. Before, the kit blamed CREATE-THEN-GET and never said "2038"; now the
failure says the store refused the snapshot, names the date and is blamed on
TIME-UTC-ROUNDTRIP, which FAILs (docs/backend-guide.md §10: a store must take every
instant the kit draws, 1970-2200).
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from matrix import Case, run_case
from y2038_stores import RefusesPast2038

from chongming_conformance.oracle.blame import UNCONFIRMED, blamed, parse_blames
from chongming_conformance.oracle.confirm import confirming
from chongming_conformance.oracle.messages import unusual_values
from chongming_conformance.protocol.errors import StoreError
from chongming_conformance.protocol.model import Failure, TaskSnapshot, TaskStatus
from reference_stores.memory import InMemoryTaskStore

LATE = datetime(2040, 3, 1, tzinfo=UTC)


def _late(task_id: str = "t-1") -> TaskSnapshot:
    return TaskSnapshot(task_id, "n", TaskStatus.PENDING, 0, LATE, LATE)


def _fresh() -> contextlib.AbstractContextManager[RefusesPast2038]:
    return contextlib.nullcontext(RefusesPast2038())


def test_a_refused_create_names_the_date_and_blames_time() -> None:
    store = RefusesPast2038()
    with confirming(_fresh), pytest.raises(AssertionError) as caught:
        blamed(("CREATE-THEN-GET",), functools.partial(store.create, _late()))
    text = str(caught.value)
    assert "the store refused the snapshot" in text
    assert "2040-03-01T00:00:00+00:00, past 2038-01-19 (a 32-bit TIMESTAMP column?)" in text
    assert parse_blames("\n".join(caught.value.__notes__)) == ("TIME-UTC-ROUNDTRIP",)


def test_a_late_date_refused_for_another_reason_is_the_writes_own_failure() -> None:
    """The twin: a store that takes 2040 but already holds the id (here: the kit's
    own earlier create) refuses a late snapshot as a duplicate. On a fresh store the same
    snapshot is taken, so the date is cleared and the write's own clause is blamed."""
    store = InMemoryTaskStore()
    store.create(_late())
    with confirming(lambda: contextlib.nullcontext(InMemoryTaskStore())), \
            pytest.raises(StoreError) as caught:
        blamed(("CREATE-DUPLICATE-RAISES",), functools.partial(store.create, _late()))
    assert parse_blames("\n".join(caught.value.__notes__)) == ("CREATE-DUPLICATE-RAISES",)


def test_a_refusal_that_cannot_be_rechecked_blames_nothing() -> None:
    """No fresh store to re-check on: the date is only a suspect, so nothing is blamed
    (NOT VERIFIED), never a FAIL by guesswork."""
    store = RefusesPast2038()
    with pytest.raises(AssertionError) as caught:
        blamed(("CREATE-THEN-GET",), functools.partial(store.create, _late()))
    assert "past 2038-01-19" in str(caught.value)
    assert parse_blames("\n".join(caught.value.__notes__)) == ()
    assert UNCONFIRMED in "\n".join(caught.value.__notes__)


def test_an_ordinary_input_refused_stays_the_writes_own_failure() -> None:
    store = RefusesPast2038()
    store.create(_late("t-ok").__class__("t-ok", "n", TaskStatus.PENDING, 0,
                                          datetime(2030, 1, 1, tzinfo=UTC),
                                          datetime(2030, 1, 1, tzinfo=UTC)))
    again = TaskSnapshot("t-ok", "n", TaskStatus.PENDING, 0, datetime(2030, 1, 1, tzinfo=UTC),
                         datetime(2030, 1, 1, tzinfo=UTC))
    with pytest.raises(Exception) as caught:  # a duplicate: StoreError, nothing unusual
        blamed(("CREATE-DUPLICATE-RAISES",), functools.partial(store.create, again))
    assert parse_blames("\n".join(caught.value.__notes__)) == ("CREATE-DUPLICATE-RAISES",)


def test_long_ids_and_texts_are_named_on_their_clauses() -> None:
    snap = TaskSnapshot("t" * 300, "x" * 2000, TaskStatus.PENDING, 0, LATE, LATE)
    found = unusual_values(snap)
    assert found["LENGTH-IDS-CAPACITY"] == ["task_id of 300 characters"]
    # A long name the store may refuse (a SHOULD); the controller's own text it must take.
    assert found["LENGTH-TEXT-CAPACITY"] == ["name of 2000 characters"]
    assert "LENGTH-TEXT" not in found
    failed = replace(snap, failure=Failure("E", "m", "d" * 3000))
    assert unusual_values(failed)["LENGTH-TEXT"] == ["failure.detail of 3000 characters"]
    assert "TIME-UTC-ROUNDTRIP" in found


def test_through_the_plugin_time_fails_and_create_then_get_does_not(tmp_path: Path) -> None:
    case = Case("y2038_stores:make_store", frozenset({"TIME-UTC-ROUNDTRIP"}),
                args=("-k", "time_utc_roundtrip or create_then_get"))
    outcome = run_case(case, tmp_path)
    assert outcome.clauses, outcome.output[-3000:]
    time_outcome, time_note = outcome.clauses["TIME-UTC-ROUNDTRIP"]
    assert time_outcome == "FAIL", (time_outcome, time_note, outcome.output[-3000:])
    assert outcome.clauses["CREATE-THEN-GET"][0] != "FAIL", outcome.clauses["CREATE-THEN-GET"]
    assert "past 2038-01-19" in outcome.output, outcome.output[-3000:]
