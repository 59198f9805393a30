"""``TaskContext``: what a running task sees of its controller.

A task reports progress and proves it is alive through ``checkpoint``, and
that is also the one place it learns it has been asked to stop. Nothing here
writes to the store: the controller's side path picks up progress and the
heartbeat and writes them with ``touch`` (guide §2.3), so a task that
checkpoints a thousand times a second causes no version churn at all.
"""

from __future__ import annotations

import threading
from datetime import datetime

from ..protocol.model import Progress
from .clock import Clock

__all__ = ["TaskContext", "TaskStopped"]


class TaskStopped(Exception):
    """Raised by :meth:`TaskContext.checkpoint` when a stop was requested.

    The controller turns it into the CANCELLED transition; a task may catch it
    to clean up, but should re-raise it.
    """


class TaskContext:
    """Per-task handle given to ``fn(ctx)``; thread-safe."""

    def __init__(self, task_id: str, clock: Clock) -> None:
        self.task_id = task_id
        self._clock = clock
        self._lock = threading.Lock()
        self._progress: Progress | None = None
        self._heartbeat: datetime | None = None
        self._stop = threading.Event()
        self._stop_reason: str | None = None

    # -- what the task calls --------------------------------------------------------------
    def checkpoint(
        self, done: int | None = None, total: int | None = None, message: str | None = None
    ) -> None:
        """Record progress (when ``done`` is given) and the heartbeat; raise TaskStopped if asked.

        The heartbeat answers "is the task advancing?" -- it is written here and
        only here, never by the supervisor (guide §2.3: the two signals are
        never derived from each other).
        """
        now = self._clock()
        with self._lock:
            if done is not None:
                self._progress = Progress(done=done, total=total, message=message)
            self._heartbeat = now
        if self._stop.is_set():
            raise TaskStopped(self._stop_reason or "stop requested")

    @property
    def stop_requested(self) -> bool:
        """True once a stop was requested (for tasks that poll instead of checkpointing)."""
        return self._stop.is_set()

    # -- what the controller calls --------------------------------------------------------
    def request_stop(self, reason: str) -> bool:
        """Ask the task to stop at its next checkpoint; False if it was already asked."""
        with self._lock:
            if self._stop.is_set():
                return False
            self._stop_reason = reason
            self._stop.set()
            return True

    @property
    def stop_reason(self) -> str | None:
        with self._lock:
            return self._stop_reason

    def signals(self) -> tuple[Progress | None, datetime | None]:
        """The latest progress and heartbeat (None where never recorded)."""
        with self._lock:
            return self._progress, self._heartbeat
