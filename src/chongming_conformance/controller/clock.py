"""The controller's clock: real UTC time by default, a manual clock for deterministic tests.

Every timestamp the controller writes (transitions, heartbeats, leases, the
``now`` of command claims) comes from one injectable callable, so a test can
move time forward by exactly the amount a lease or a staleness threshold needs
instead of sleeping and hoping the machine keeps up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "ManualClock", "utc_now"]

#: A zero-argument callable returning an aware datetime.
Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The default clock: the real time, in UTC, timezone-aware."""
    return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to; safe to read from several threads."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start if start is not None else datetime(2030, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("ManualClock needs a timezone-aware start")
        self._now = start
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> datetime:
        """Move the clock forward by ``seconds`` (never backward); return the new time."""
        if seconds < 0:
            raise ValueError("a clock never goes backward")
        with self._lock:
            self._now += timedelta(seconds=seconds)
            return self._now
