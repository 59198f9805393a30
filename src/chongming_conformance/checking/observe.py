"""Reads a check makes only to *see* the store, blamed on the read's own clause.

A check for PRUNE-OLDEST-FIRST lists what is left with ``query()``; a check for
SAVE-MISSING-RAISES confirms with ``get()`` that nothing was created. When that
read is itself broken (``get`` raises for an unknown id, ``query()`` returns nothing
for "no filter"), the failure is evidence against GET-MISSING-NONE or QUERY-ALL,
not against the clause the check set out to prove. These helpers make the read,
check what can be checked about the read itself, and attach that blame
(:mod:`chongming_conformance.oracle.blame`; the first note wins, so an outer rule's blame
does not override it). Contract tests, properties and the state machine share them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TypeVar

from ..oracle.blame import blame, blamed
from ..protocol import TaskStore
from ..protocol.model import TaskQuery, TaskSnapshot

__all__ = ["all_tasks", "present", "read_task"]

T = TypeVar("T")


def read_task(store: TaskStore, task_id: str, *, exists: bool) -> TaskSnapshot | None:
    """``store.get(task_id)``; if it raises, blame GET-MISSING-NONE for a task the caller
    knows is absent (``exists=False``), else CREATE-THEN-GET."""
    clause = "CREATE-THEN-GET" if exists else "GET-MISSING-NONE"
    return blamed((clause,), functools.partial(store.get, task_id))


def present(store: TaskStore, task_ids: Iterable[str]) -> set[str]:
    """Which of ``task_ids`` the store still holds, read one by one with ``get``.

    What a prune check uses to see what it left: ``get`` is the plainest read there is,
    so a query bug (ties dropped, a filter applied wrongly) cannot pass for a prune bug.
    A ``get`` that raises is GET-MISSING-NONE's failure (the task may be gone).
    """
    return {
        task_id for task_id in task_ids
        if blamed(("GET-MISSING-NONE",), functools.partial(store.get, task_id)) is not None
    }


def all_tasks(store: TaskStore) -> list[TaskSnapshot]:
    """Every stored task, read as a means to an end.

    ``query()`` and ``query(TaskQuery())`` must both answer and agree (QUERY-ALL);
    a check that only needs "what is stored" then does not fail on its own clause
    because "no filter" is broken.
    """
    implicit = _blamed_all(lambda: list(store.query()))
    explicit = _blamed_all(lambda: list(store.query(TaskQuery())))
    if [t.task_id for t in implicit] != [t.task_id for t in explicit]:
        exc = AssertionError(
            f"query() returned {[t.task_id for t in implicit]!r} but query(TaskQuery()) "
            f"returned {[t.task_id for t in explicit]!r}"
        )
        blame(exc, ("QUERY-ALL",))
        raise exc
    return implicit


def _blamed_all(call: Callable[[], T]) -> T:
    return blamed(("QUERY-ALL",), call)
