"""The task model every store persists.

Frozen dataclasses, validated on construction, so that a malformed record is
rejected where it is made rather than discovered later inside a backend. The
rules that matter most to backend authors:

* every datetime must be timezone-aware (a naive one raises ``ValueError``
  naming the field) -- stores convert to UTC, so a naive value has no defined
  instant;
* versions are non-negative ints (``bool`` is rejected: ``True`` is not a version);
* ``tags`` is a ``frozenset[str]`` (any other iterable of str is converted; a
  bare ``str`` is rejected because it would silently split into characters).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

__all__ = [
    "TERMINAL_STATUSES",
    "Command",
    "CommandKind",
    "Failure",
    "Progress",
    "TaskQuery",
    "TaskSnapshot",
    "TaskStatus",
    "Transition",
]


class TaskStatus(enum.Enum):
    """Lifecycle state of a task. Stores persist ``.value``."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"

    @property
    def is_terminal(self) -> bool:
        """True for states a task never leaves; only these may be pruned."""
        return self in TERMINAL_STATUSES


TERMINAL_STATUSES: frozenset[TaskStatus] = frozenset(
    {TaskStatus.SUCCEEDED, TaskStatus.FAILED, TaskStatus.CANCELLED, TaskStatus.LOST}
)


class CommandKind(enum.Enum):
    """What a control command asks the task's owner to do. Stores never interpret it."""

    STOP = "stop"
    RETRY = "retry"


def _check_aware(owner: str, name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, datetime):
        raise TypeError(f"{owner}.{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(
            f"{owner}.{name} is a naive datetime ({value.isoformat()}); "
            "stores need timezone-aware datetimes (e.g. datetime.now(timezone.utc))"
        )


def _check_str(owner: str, name: str, value: object, *, optional: bool) -> None:
    if value is None and optional:
        return
    if not isinstance(value, str):
        raise TypeError(f"{owner}.{name} must be a str, got {type(value).__name__}")


def _check_int(owner: str, name: str, value: object, *, optional: bool, minimum: int) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{owner}.{name} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{owner}.{name} must be >= {minimum}, got {value}")


def _str_frozenset(owner: str, name: str, value: object) -> frozenset[str]:
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise TypeError(f"{owner}.{name} must be a frozenset of str, got {type(value).__name__}")
    items = frozenset(value)
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"{owner}.{name} must contain only str, got {type(item).__name__}")
    return items


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a task has got. ``total`` is None when unknown."""

    done: int
    total: int | None = None
    message: str | None = None

    def __post_init__(self) -> None:
        _check_int("Progress", "done", self.done, optional=False, minimum=0)
        _check_int("Progress", "total", self.total, optional=True, minimum=0)
        _check_str("Progress", "message", self.message, optional=True)


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a task failed: the error type's name, its message, optional detail (traceback)."""

    error_type: str
    message: str
    detail: str | None = None

    def __post_init__(self) -> None:
        _check_str("Failure", "error_type", self.error_type, optional=False)
        _check_str("Failure", "message", self.message, optional=False)
        _check_str("Failure", "detail", self.detail, optional=True)


@dataclass(frozen=True, slots=True)
class TaskSnapshot:
    """One task's current state, the unit of ``create``/``save``/``get``.

    ``status_version`` is the optimistic-concurrency token. ``heartbeat_at`` and
    the two ``lease_*`` fields are written by ``touch`` on a side path; ``save``
    must never write the lease fields (see the backend guide).
    """

    task_id: str
    name: str
    status: TaskStatus
    status_version: int
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    tags: frozenset[str] = field(default_factory=frozenset)
    bucket: int | None = None
    pipeline_run_id: str | None = None
    progress: Progress | None = None
    failure: Failure | None = None
    heartbeat_at: datetime | None = None
    lease_owner: str | None = None
    lease_until: datetime | None = None

    def __post_init__(self) -> None:
        owner = "TaskSnapshot"
        _check_str(owner, "task_id", self.task_id, optional=False)
        _check_str(owner, "name", self.name, optional=False)
        if not isinstance(self.status, TaskStatus):
            raise TypeError(f"{owner}.status must be a TaskStatus, got {self.status!r}")
        _check_int(owner, "status_version", self.status_version, optional=False, minimum=0)
        _check_aware(owner, "created_at", self.created_at, optional=False)
        _check_aware(owner, "updated_at", self.updated_at, optional=False)
        for name in ("started_at", "finished_at", "heartbeat_at", "lease_until"):
            _check_aware(owner, name, getattr(self, name), optional=True)
        object.__setattr__(self, "tags", _str_frozenset(owner, "tags", self.tags))
        _check_int(owner, "bucket", self.bucket, optional=True, minimum=0)
        _check_str(owner, "pipeline_run_id", self.pipeline_run_id, optional=True)
        if self.progress is not None and not isinstance(self.progress, Progress):
            raise TypeError(f"{owner}.progress must be a Progress or None")
        if self.failure is not None and not isinstance(self.failure, Failure):
            raise TypeError(f"{owner}.failure must be a Failure or None")
        _check_str(owner, "lease_owner", self.lease_owner, optional=True)

    def evolve(self, **changes: Any) -> TaskSnapshot:
        """Return a copy with ``changes`` applied (validated like a new snapshot)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        values.update(changes)
        return TaskSnapshot(**values)


@dataclass(frozen=True, slots=True)
class Transition:
    """One row of a task's append-only history; unique per ``(task_id, version)``."""

    task_id: str
    version: int
    from_status: TaskStatus | None
    to_status: TaskStatus
    at: datetime
    reason: str | None = None

    def __post_init__(self) -> None:
        owner = "Transition"
        _check_str(owner, "task_id", self.task_id, optional=False)
        _check_int(owner, "version", self.version, optional=False, minimum=0)
        if self.from_status is not None and not isinstance(self.from_status, TaskStatus):
            raise TypeError(f"{owner}.from_status must be a TaskStatus or None")
        if not isinstance(self.to_status, TaskStatus):
            raise TypeError(f"{owner}.to_status must be a TaskStatus")
        _check_aware(owner, "at", self.at, optional=False)
        _check_str(owner, "reason", self.reason, optional=True)


@dataclass(frozen=True, slots=True)
class Command:
    """A control request for the process that owns ``task_id``.

    The store only carries it: ``claim_commands`` leases it (``lease_until``),
    ``complete_command`` finishes it (``finished_at``, ``outcome``),
    ``release_command`` clears the lease without finishing it.
    """

    command_id: str
    task_id: str
    kind: CommandKind
    issued_by: str
    created_at: datetime
    lease_until: datetime | None = None
    finished_at: datetime | None = None
    outcome: str | None = None

    def __post_init__(self) -> None:
        owner = "Command"
        _check_str(owner, "command_id", self.command_id, optional=False)
        _check_str(owner, "task_id", self.task_id, optional=False)
        if not isinstance(self.kind, CommandKind):
            raise TypeError(f"{owner}.kind must be a CommandKind, got {self.kind!r}")
        _check_str(owner, "issued_by", self.issued_by, optional=False)
        _check_aware(owner, "created_at", self.created_at, optional=False)
        _check_aware(owner, "lease_until", self.lease_until, optional=True)
        _check_aware(owner, "finished_at", self.finished_at, optional=True)
        _check_str(owner, "outcome", self.outcome, optional=True)


@dataclass(frozen=True, slots=True)
class TaskQuery:
    """Filters for ``TaskStore.query``; every filter is ANDed, ``None`` means "no filter".

    An *empty* collection (``statuses=frozenset()``, ``buckets=frozenset()``)
    is a real filter that matches nothing -- not "no filter" (clause
    QUERY-EMPTY-SET-MATCHES-NOTHING). The empty string is a value like any other
    (``name=""`` matches tasks named ``""``), never "no filter". ``limit=0``, which the
    controller never passes, returns nothing or is refused (StoreError or ValueError): the
    original guide leaves it open (docs/backend-guide.md §10).
    """

    statuses: frozenset[TaskStatus] | None = None
    name: str | None = None
    name_prefix: str | None = None
    tag: str | None = None
    buckets: frozenset[int] | None = None
    pipeline_run_id: str | None = None
    limit: int | None = None
    newest_first: bool = False

    def __post_init__(self) -> None:
        owner = "TaskQuery"
        if self.statuses is not None:
            if isinstance(self.statuses, str | TaskStatus) or not isinstance(
                self.statuses, Iterable
            ):
                raise TypeError(f"{owner}.statuses must be a collection of TaskStatus")
            statuses = frozenset(self.statuses)
            if not all(isinstance(s, TaskStatus) for s in statuses):
                raise TypeError(f"{owner}.statuses must contain only TaskStatus")
            object.__setattr__(self, "statuses", statuses)
        if self.buckets is not None:
            if isinstance(self.buckets, int | str) or not isinstance(self.buckets, Iterable):
                raise TypeError(f"{owner}.buckets must be a collection of int")
            buckets = frozenset(self.buckets)
            for b in buckets:
                _check_int(owner, "buckets[]", b, optional=False, minimum=0)
            object.__setattr__(self, "buckets", buckets)
        _check_str(owner, "name", self.name, optional=True)
        _check_str(owner, "name_prefix", self.name_prefix, optional=True)
        _check_str(owner, "tag", self.tag, optional=True)
        _check_str(owner, "pipeline_run_id", self.pipeline_run_id, optional=True)
        _check_int(owner, "limit", self.limit, optional=True, minimum=0)
        if not isinstance(self.newest_first, bool):
            raise TypeError(f"{owner}.newest_first must be a bool")
