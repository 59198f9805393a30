"""A store with MariaDB-style 32-bit ``TIMESTAMP`` columns: nothing after 2038-01-19.

The in-memory reference store, refusing with ``StoreError`` (as a driver's "Incorrect
datetime value" becomes) every write of a datetime past 2038-01-19T03:14:07Z. Run through
the plugin by tests/test_refusal_blame.py: its report must FAIL TIME-UTC-ROUNDTRIP (the
kit's decision, docs/backend-guide.md §10) and not CREATE-THEN-GET.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from chongming_conformance import Command, StoreError, TaskSnapshot, Transition
from reference_stores.memory import InMemoryTaskStore

Y2038 = datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC)


def _check(*values: Any) -> None:
    for value in values:
        if isinstance(value, datetime) and value > Y2038:
            raise StoreError(f"Incorrect datetime value: '{value.isoformat()}'")


class RefusesPast2038(InMemoryTaskStore):
    """Every datetime written is checked against the 32-bit range first."""

    def create(self, snapshot: TaskSnapshot) -> None:
        _check(snapshot.created_at, snapshot.updated_at, snapshot.started_at,
               snapshot.finished_at, snapshot.heartbeat_at, snapshot.lease_until)
        super().create(snapshot)

    def save(self, snapshot: TaskSnapshot, *, expect_version: int) -> None:
        _check(snapshot.created_at, snapshot.updated_at, snapshot.started_at,
               snapshot.finished_at, snapshot.heartbeat_at)
        super().save(snapshot, expect_version=expect_version)

    def append(self, transition: Transition) -> None:
        _check(transition.at)
        super().append(transition)

    def submit_command(self, command: Command) -> None:
        _check(command.created_at)
        super().submit_command(command)

    def claim_commands(self, *, now: datetime, lease_seconds: float,
                       limit: int = 50) -> Sequence[Command]:
        _check(now + timedelta(seconds=lease_seconds))
        return super().claim_commands(now=now, lease_seconds=lease_seconds, limit=limit)

    def complete_command(self, command_id: str, *, now: datetime,
                         outcome: str | None = None) -> None:
        _check(now)
        super().complete_command(command_id, now=now, outcome=outcome)


def make_store() -> RefusesPast2038:
    return RefusesPast2038()
