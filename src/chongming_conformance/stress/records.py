"""What workers write and what they log: deterministic builders and result summaries.

Workers never exchange objects: each rebuilds the same snapshots, transitions
and commands from names and round numbers, and logs JSON summaries of what
the store returned; a scenario's verdict rebuilds the same records to compare.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..protocol.codec import decode_dt, encode_dt
from ..protocol.model import Command, CommandKind, Progress, TaskSnapshot, TaskStatus, Transition

__all__ = [
    "BASE",
    "at",
    "command",
    "commands_summary",
    "offset",
    "snapshot_summary",
    "task",
    "transition",
    "transitions_summary",
]

#: Origin of the logical ``now`` timeline every scenario passes to the store.
BASE = datetime(2030, 1, 1, tzinfo=UTC)

_CYCLE = (TaskStatus.PENDING, TaskStatus.RUNNING)


def at(seconds: float) -> datetime:
    """The logical instant ``seconds`` after BASE."""
    return BASE + timedelta(seconds=seconds)


def offset(iso: str | None) -> float | None:
    """Seconds after BASE of a logged instant (None stays None)."""
    value = decode_dt(iso)
    return None if value is None else (value - BASE).total_seconds()


def task(task_id: str, *, version: int = 0, name: str | None = None,
         **changes: Any) -> TaskSnapshot:
    """A deterministic snapshot; ``changes`` override any field."""
    snap = TaskSnapshot(
        task_id=task_id,
        name=name if name is not None else f"v{version}",
        status=_CYCLE[version % 2] if version else TaskStatus.PENDING,
        status_version=version,
        created_at=at(0),
        updated_at=at(version),
        tags=frozenset({f"t{version}"}),
        progress=Progress(done=version, total=None, message=f"p{version}"),
    )
    return snap.evolve(**changes) if changes else snap


def transition(task_id: str, version: int, *, reason: str | None = None) -> Transition:
    """The transition to ``version`` (same content from every worker except ``reason``)."""
    return Transition(
        task_id=task_id,
        version=version,
        from_status=_CYCLE[(version - 1) % 2],
        to_status=_CYCLE[version % 2],
        at=at(version),
        reason=reason,
    )


def command(command_id: str, task_id: str, created_seconds: float) -> Command:
    return Command(
        command_id=command_id,
        task_id=task_id,
        kind=CommandKind.STOP,
        issued_by="stress",
        created_at=at(created_seconds),
    )


def commands_summary(commands: Sequence[Command]) -> list[dict[str, Any]]:
    return [
        {"id": c.command_id, "task": c.task_id, "lease_until": encode_dt(c.lease_until),
         "finished": encode_dt(c.finished_at)}
        for c in commands
    ]


def snapshot_summary(snap: TaskSnapshot | None) -> dict[str, Any] | None:
    if snap is None:
        return None
    return {
        "v": snap.status_version,
        "name": snap.name,
        "tags": sorted(snap.tags),
        "done": None if snap.progress is None else snap.progress.done,
        "heartbeat": encode_dt(snap.heartbeat_at),
        "lease_owner": snap.lease_owner,
        "lease_until": encode_dt(snap.lease_until),
    }


def transitions_summary(rows: Sequence[Transition]) -> list[dict[str, Any]]:
    return [
        {"v": t.version, "from": None if t.from_status is None else t.from_status.value,
         "to": t.to_status.value, "at": encode_dt(t.at), "reason": t.reason}
        for t in rows
    ]
