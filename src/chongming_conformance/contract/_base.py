"""What every group of the contract shares: the open store, its lifecycle, small helpers.

Each test gets one store in ``setup_method`` through the seam
(:class:`chongming_conformance.seam.StoreSeam`: ``make_store`` and the optional
``wrap_store`` / ``guard``) and ``teardown_method`` closes every store the test
opened: ``store.close()`` first, then the factory's teardown.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from ..model import Command, TaskQuery, TaskSnapshot, Transition
from ..protocol import TaskStore
from ..seam import StoreSeam

__all__ = ["LEASE", "ContractBase"]

LEASE = 30.0  # seconds; the lease every claim in the contract asks for


def _diff(expected: object, actual: object) -> str:
    """Field-by-field difference of two dataclass instances, for assertion messages."""
    if actual is None or expected is None or type(expected) is not type(actual):
        return f"expected {expected!r}, got {actual!r}"
    lines = [
        f"  {f.name}: expected {getattr(expected, f.name)!r}, got {getattr(actual, f.name)!r}"
        for f in fields(expected)  # type: ignore[arg-type]
        if getattr(expected, f.name) != getattr(actual, f.name)
    ]
    return "fields differ:\n" + "\n".join(lines) if lines else "equal"


def _ids(tasks: Sequence[TaskSnapshot]) -> list[str]:
    return [t.task_id for t in tasks]


def _cmd_ids(commands: Sequence[Command]) -> list[str]:
    return [c.command_id for c in commands]


def _versions(rows: Sequence[Transition]) -> list[int]:
    return [t.version for t in rows]


class ContractBase(StoreSeam):
    """The store under test (``self.store``), opened per test, and the contract's helpers."""

    store: TaskStore
    _stack: contextlib.ExitStack

    # -- lifecycle -------------------------------------------------------------------------
    def open_store(self) -> TaskStore:
        """Open one more store via the seam; it is closed at teardown.

        ``setup_method`` opens ``self.store`` through this method, so a subclass
        written against the older API that overrides it still takes effect.
        """
        return self.open_into(self._stack)

    def setup_method(self, method: object = None) -> None:
        self._stack = contextlib.ExitStack()
        try:
            self.store = self.open_store()
        except BaseException:
            self.close_stack(self._stack)
            raise

    def teardown_method(self, method: object = None) -> None:
        self.close_stack(self._stack)

    # -- helpers ------------------------------------------------------------------------------
    def _get(self, task_id: str) -> TaskSnapshot:
        found = self.store.get(task_id)
        assert found is not None, f"get({task_id!r}) returned None for a task that exists"
        return found

    def _assert_stored(self, expected: TaskSnapshot, why: str) -> None:
        actual = self.store.get(expected.task_id)
        assert actual == expected, f"{why}: {_diff(expected, actual)}"

    def _create_all(self, *snaps: TaskSnapshot) -> None:
        for s in snaps:
            self.store.create(s)

    def _query_ids(self, **filters: Any) -> list[str]:
        return _ids(self.store.query(TaskQuery(**filters)))
