"""Model validation and the codec's exact round-trip."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from chongming_conformance import (
    Command,
    CommandKind,
    ConcurrencyConflict,
    Progress,
    StoreError,
    TaskQuery,
    TaskStatus,
    Transition,
)
from chongming_conformance.protocol import codec
from chongming_conformance.strategies.samples import (
    KATHMANDU,
    at,
    full_command,
    full_snapshot,
    full_transition,
    snapshot,
)

NAIVE = datetime(2026, 1, 1, 12, 0)


@pytest.mark.parametrize(
    "field",
    ["created_at", "updated_at", "started_at", "finished_at", "heartbeat_at", "lease_until"],
)
def test_naive_datetime_is_refused_naming_the_field(field: str) -> None:
    with pytest.raises(ValueError, match=rf"TaskSnapshot\.{field} is a naive datetime"):
        snapshot().evolve(**{field: NAIVE})


def test_naive_datetimes_in_transition_and_command() -> None:
    with pytest.raises(ValueError, match=r"Transition\.at is a naive datetime"):
        Transition("t", 1, None, TaskStatus.PENDING, NAIVE)
    with pytest.raises(ValueError, match=r"Command\.created_at is a naive datetime"):
        Command("c", "t", CommandKind.STOP, "me", NAIVE)


@pytest.mark.parametrize("bad", [-1, True, 1.0, "1"])
def test_version_must_be_a_non_negative_int(bad: object) -> None:
    with pytest.raises((TypeError, ValueError), match="status_version"):
        snapshot(version=bad)  # type: ignore[arg-type]


def test_tags_become_a_frozenset_and_a_bare_string_is_refused() -> None:
    assert snapshot(tags=["b", "a", "a"]).tags == frozenset({"a", "b"})
    assert isinstance(snapshot(tags={"x"}).tags, frozenset)
    with pytest.raises(TypeError, match="tags must be a frozenset of str"):
        snapshot(tags="io")
    with pytest.raises(TypeError, match="tags must contain only str"):
        snapshot(tags={1})


def test_query_validation() -> None:
    assert TaskQuery(statuses=[TaskStatus.RUNNING]).statuses == frozenset({TaskStatus.RUNNING})
    with pytest.raises(ValueError, match="limit"):
        TaskQuery(limit=-1)
    with pytest.raises(TypeError, match="statuses"):
        TaskQuery(statuses=TaskStatus.RUNNING)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="buckets"):
        TaskQuery(buckets=3)  # type: ignore[arg-type]


def test_progress_and_terminal_statuses() -> None:
    with pytest.raises(ValueError, match=r"Progress\.done"):
        Progress(done=-1)
    assert {s for s in TaskStatus if s.is_terminal} == {
        TaskStatus.SUCCEEDED,
        TaskStatus.FAILED,
        TaskStatus.CANCELLED,
        TaskStatus.LOST,
    }


def test_conflict_is_a_store_error_with_details_that_survive_pickling() -> None:
    import pickle

    exc = ConcurrencyConflict("t-1", 3, 5)
    assert isinstance(exc, StoreError)
    back = pickle.loads(pickle.dumps(exc))
    assert (back.task_id, back.expected, back.actual) == ("t-1", 3, 5)
    assert "expected version 3" in str(back) and "version 5" in str(back)


def test_snapshot_row_roundtrip_is_exact() -> None:
    for s in (full_snapshot(), snapshot(), snapshot(progress=Progress(0), tags={""})):
        row = codec.snapshot_to_row(s)
        assert set(row) == set(codec.SNAPSHOT_COLUMNS)
        assert all(isinstance(v, str | int | type(None)) for v in row.values()), row
        back = codec.row_to_snapshot(row)
        assert back == s
        assert isinstance(back.tags, frozenset)


def test_row_is_flat_utc_text_with_values_of_enums() -> None:
    row = codec.snapshot_to_row(full_snapshot())
    assert row["status"] == "failed"
    assert row["created_at"].endswith("+00:00")
    assert len(row["created_at"]) == len("2026-01-02T03:04:05.678901+00:00")
    assert json.loads(row["tags"]) == sorted(full_snapshot().tags)


def test_encoded_datetimes_sort_as_text_in_time_order() -> None:
    instants = [at(s, KATHMANDU) for s in (0, 0.000001, 1, 59.999999, 3600)]
    encoded = [codec.encode_dt(i) for i in instants]
    assert encoded == sorted(encoded)  # type: ignore[type-var]
    assert codec.decode_dt(encoded[0]) == instants[0]
    assert codec.decode_dt(encoded[0]).tzinfo is UTC  # type: ignore[union-attr]


def test_encode_dt_refuses_naive_and_decode_refuses_tzless_text() -> None:
    with pytest.raises(ValueError, match="naive"):
        codec.encode_dt(NAIVE)
    with pytest.raises(ValueError, match="no timezone"):
        codec.decode_dt("2026-01-01T00:00:00")


def test_transition_and_command_roundtrip() -> None:
    t = full_transition()
    assert codec.row_to_transition(codec.transition_to_row(t)) == t
    first = Transition("t", 1, None, TaskStatus.PENDING, at(0))
    assert codec.row_to_transition(codec.transition_to_row(first)) == first
    c = full_command()
    assert codec.row_to_command(codec.command_to_row(c)) == c
    leased = Command("c", "t", CommandKind.STOP, "me", at(0), at(30), at(31), "stopped")
    assert codec.row_to_command(codec.command_to_row(leased)) == leased


def test_save_columns_exclude_exactly_the_lease() -> None:
    assert set(codec.SNAPSHOT_COLUMNS) - set(codec.SAVE_COLUMNS) == {"lease_owner", "lease_until"}
