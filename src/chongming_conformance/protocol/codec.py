"""Snapshot, transition and command <-> flat rows of primitives.

Reuse this instead of writing your own serialisation: the silent losses
(timezone, ``frozenset``, nested ``Progress``/``Failure``, enums) are handled
here once. A row is a one-level ``dict`` of ``str | int | None``: a relational
row as is, a sub-document in a document store, a hash in a key-value store.

Three rules, all checked by the contract:

1. datetimes are converted to UTC before encoding, as fixed-width ISO-8601
   text (``2026-01-02T03:04:05.000006+00:00``), so text order is time order;
2. ``row_to_snapshot(snapshot_to_row(s)) == s`` for every field;
3. enums are written as ``.value``.

Tags are a sorted, compact JSON array. Exact tag match must parse the array
(SQLite ``json_each``, Postgres ``jsonb ?``); a substring search on the text,
even on the quoted tag, is wrong (``"io"`` is not in ``["ios"]``, but ``","``
*is* in ``["a,",",b"]``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from .model import (
    Command,
    CommandKind,
    Failure,
    Progress,
    TaskSnapshot,
    TaskStatus,
    Transition,
)

__all__ = [
    "COMMAND_COLUMNS",
    "LEASE_COLUMNS",
    "SAVE_COLUMNS",
    "SNAPSHOT_COLUMNS",
    "TRANSITION_COLUMNS",
    "command_to_row",
    "decode_dt",
    "decode_tags",
    "encode_dt",
    "encode_tags",
    "progress_to_row",
    "row_to_command",
    "row_to_snapshot",
    "row_to_transition",
    "snapshot_to_row",
    "transition_to_row",
]

Row = dict[str, Any]

SNAPSHOT_COLUMNS: tuple[str, ...] = (
    "task_id",
    "name",
    "status",
    "status_version",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "tags",
    "bucket",
    "pipeline_run_id",
    "progress_done",
    "progress_total",
    "progress_message",
    "failure_type",
    "failure_message",
    "failure_detail",
    "heartbeat_at",
    "lease_owner",
    "lease_until",
)
#: Written only by ``create`` and ``touch``; ``save`` must leave them alone.
LEASE_COLUMNS: tuple[str, ...] = ("lease_owner", "lease_until")
#: The columns ``save`` writes: everything except the lease.
SAVE_COLUMNS: tuple[str, ...] = tuple(c for c in SNAPSHOT_COLUMNS if c not in LEASE_COLUMNS)
TRANSITION_COLUMNS: tuple[str, ...] = (
    "task_id",
    "version",
    "from_status",
    "to_status",
    "at",
    "reason",
)
COMMAND_COLUMNS: tuple[str, ...] = (
    "command_id",
    "task_id",
    "kind",
    "issued_by",
    "created_at",
    "lease_until",
    "finished_at",
    "outcome",
)


def encode_dt(value: datetime | None) -> str | None:
    """Aware datetime -> fixed-width UTC ISO-8601 text (None stays None).

    Raises ValueError for a naive datetime: it has no defined instant.
    """
    if value is None:
        return None
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"cannot encode naive datetime {value.isoformat()}; make it aware")
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def decode_dt(value: str | datetime | None) -> datetime | None:
    """Text from ``encode_dt`` (or a driver's aware datetime) -> aware UTC datetime."""
    if value is None:
        return None
    parsed = value if isinstance(value, datetime) else datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"stored datetime {value!r} has no timezone; stores must keep UTC")
    return parsed.astimezone(UTC)


def encode_tags(tags: Iterable[str]) -> str:
    """Tags -> sorted compact JSON array text (deterministic, parseable in SQL)."""
    return json.dumps(sorted(tags), ensure_ascii=False, separators=(",", ":"))


def decode_tags(value: str | Iterable[str] | None) -> frozenset[str]:
    """JSON array text (or an already-decoded list) -> frozenset."""
    if value is None:
        return frozenset()
    items = json.loads(value) if isinstance(value, str) else list(value)
    return frozenset(items)


def _status(value: str | None) -> TaskStatus | None:
    return None if value is None else TaskStatus(value)


def snapshot_to_row(snapshot: TaskSnapshot) -> Row:
    """Flatten a snapshot; ``progress``/``failure`` become prefixed columns."""
    progress, failure = snapshot.progress, snapshot.failure
    return {
        "task_id": snapshot.task_id,
        "name": snapshot.name,
        "status": snapshot.status.value,
        "status_version": snapshot.status_version,
        "created_at": encode_dt(snapshot.created_at),
        "updated_at": encode_dt(snapshot.updated_at),
        "started_at": encode_dt(snapshot.started_at),
        "finished_at": encode_dt(snapshot.finished_at),
        "tags": encode_tags(snapshot.tags),
        "bucket": snapshot.bucket,
        "pipeline_run_id": snapshot.pipeline_run_id,
        # progress_done is NOT NULL exactly when progress is present.
        "progress_done": None if progress is None else progress.done,
        "progress_total": None if progress is None else progress.total,
        "progress_message": None if progress is None else progress.message,
        # failure_type is NOT NULL exactly when failure is present.
        "failure_type": None if failure is None else failure.error_type,
        "failure_message": None if failure is None else failure.message,
        "failure_detail": None if failure is None else failure.detail,
        "heartbeat_at": encode_dt(snapshot.heartbeat_at),
        "lease_owner": snapshot.lease_owner,
        "lease_until": encode_dt(snapshot.lease_until),
    }


def progress_to_row(progress: Progress) -> Row:
    """The three progress columns, for ``touch``."""
    return {
        "progress_done": progress.done,
        "progress_total": progress.total,
        "progress_message": progress.message,
    }


def row_to_snapshot(row: Mapping[str, Any]) -> TaskSnapshot:
    """Inverse of ``snapshot_to_row``."""
    progress = None
    if row["progress_done"] is not None:
        progress = Progress(
            done=row["progress_done"],
            total=row["progress_total"],
            message=row["progress_message"],
        )
    failure = None
    if row["failure_type"] is not None:
        failure = Failure(
            error_type=row["failure_type"],
            message=row["failure_message"],
            detail=row["failure_detail"],
        )
    created_at = decode_dt(row["created_at"])
    updated_at = decode_dt(row["updated_at"])
    assert created_at is not None and updated_at is not None
    return TaskSnapshot(
        task_id=row["task_id"],
        name=row["name"],
        status=TaskStatus(row["status"]),
        status_version=row["status_version"],
        created_at=created_at,
        updated_at=updated_at,
        started_at=decode_dt(row["started_at"]),
        finished_at=decode_dt(row["finished_at"]),
        tags=decode_tags(row["tags"]),
        bucket=row["bucket"],
        pipeline_run_id=row["pipeline_run_id"],
        progress=progress,
        failure=failure,
        heartbeat_at=decode_dt(row["heartbeat_at"]),
        lease_owner=row["lease_owner"],
        lease_until=decode_dt(row["lease_until"]),
    )


def transition_to_row(transition: Transition) -> Row:
    """Flatten a transition."""
    return {
        "task_id": transition.task_id,
        "version": transition.version,
        "from_status": None if transition.from_status is None else transition.from_status.value,
        "to_status": transition.to_status.value,
        "at": encode_dt(transition.at),
        "reason": transition.reason,
    }


def row_to_transition(row: Mapping[str, Any]) -> Transition:
    """Inverse of ``transition_to_row``."""
    at = decode_dt(row["at"])
    to_status = _status(row["to_status"])
    assert at is not None and to_status is not None
    return Transition(
        task_id=row["task_id"],
        version=row["version"],
        from_status=_status(row["from_status"]),
        to_status=to_status,
        at=at,
        reason=row["reason"],
    )


def command_to_row(command: Command) -> Row:
    """Flatten a command."""
    return {
        "command_id": command.command_id,
        "task_id": command.task_id,
        "kind": command.kind.value,
        "issued_by": command.issued_by,
        "created_at": encode_dt(command.created_at),
        "lease_until": encode_dt(command.lease_until),
        "finished_at": encode_dt(command.finished_at),
        "outcome": command.outcome,
    }


def row_to_command(row: Mapping[str, Any]) -> Command:
    """Inverse of ``command_to_row``."""
    created_at = decode_dt(row["created_at"])
    assert created_at is not None
    return Command(
        command_id=row["command_id"],
        task_id=row["task_id"],
        kind=CommandKind(row["kind"]),
        issued_by=row["issued_by"],
        created_at=created_at,
        lease_until=decode_dt(row["lease_until"]),
        finished_at=decode_dt(row["finished_at"]),
        outcome=row["outcome"],
    )
