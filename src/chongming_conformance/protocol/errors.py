"""The two exceptions a store may raise on purpose.

Everything a store raises deliberately is a ``StoreError``: a duplicate id, use
after ``close()``, a broken connection. ``ConcurrencyConflict`` is the one the
caller must be able to tell apart, because it means a second writer exists.
"""

from __future__ import annotations

__all__ = ["ConcurrencyConflict", "StoreError"]


class StoreError(Exception):
    """A store operation failed for a reason the store understands."""


class ConcurrencyConflict(StoreError):
    """``save`` found a ``status_version`` other than ``expect_version``.

    ``actual`` is the version the store holds, or ``None`` when the task does
    not exist (or the store cannot cheaply tell).
    """

    def __init__(self, task_id: str, expected: int, actual: int | None) -> None:
        self.task_id = task_id
        self.expected = expected
        self.actual = actual
        held = "no such task" if actual is None else f"store holds version {actual}"
        super().__init__(f"task {task_id!r}: expected version {expected}, {held}")

    def __reduce__(self) -> tuple[type[ConcurrencyConflict], tuple[str, int, int | None]]:
        # Keep the fields when the exception crosses a process boundary.
        return (type(self), (self.task_id, self.expected, self.actual))
