"""The one way the single-connection bases open and close a store.

``StoreContract``, ``StoreProperties`` and ``StoreStateMachineTests`` all get
their stores here, so a subclass provides the same hooks whichever base it
extends (the shape of zarr-python's ``StoreTests``: one declared seam that
every test uses):

* ``make_store()`` -- required: a zero-argument factory call in any of the
  three factory forms (a store, a generator yielding one, a context manager);
  :func:`chongming_conformance.factory.enter_store` unwraps it;
* ``wrap_store(store)`` -- optional: the store the tests should drive
  (identity by default; the packaged suite adds the per-call timeout);
* ``guard(what, step)`` -- optional: runs one lifecycle step, opening or
  tearing down (a plain call by default; the packaged suite runs it under
  ``--chongming-timeout`` so a hung factory or ``close()`` fails one test with
  the step named instead of hanging the run).

Teardown always closes the store first (``store.close()``), then runs the
factory's own teardown, so an author never has to remember ``close()``. The
teardown is an ``ExitStack.close()``, never an ``__exit__`` with the test's
exception: a context-manager factory cannot swallow a failing check.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .factory import enter_store
from .protocol import TaskStore

__all__ = ["OPEN_STEP", "TEARDOWN_STEP", "StoreSeam"]

T = TypeVar("T")

#: How :meth:`StoreSeam.guard` names the opening step (a timeout message quotes it).
OPEN_STEP = "make_store()"
#: How :meth:`StoreSeam.guard` names the teardown step.
TEARDOWN_STEP = "close() / the factory's teardown"


class StoreSeam:
    """Mixin: ``make_store`` (+ optional ``wrap_store`` / ``guard``) in, open stores out."""

    def make_store(self) -> Any:
        """Return a fresh, isolated, empty store (or a generator / context manager of one)."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_store()")

    def wrap_store(self, store: TaskStore) -> TaskStore:
        """Hook: the store the tests drive, given the one just opened (default: itself)."""
        return store

    def guard(self, what: str, step: Callable[[], T]) -> T:
        """Hook: run the lifecycle step ``what`` (opening, teardown); default: just run it."""
        return step()

    def open_into(self, stack: contextlib.ExitStack) -> TaskStore:
        """Open one store through ``make_store``; its teardown is registered on ``stack``."""
        origin = f"{type(self).__name__}.make_store"
        store = self.guard(OPEN_STEP, lambda: enter_store(self.make_store, stack, origin=origin))
        return self.wrap_store(store)

    def close_stack(self, stack: contextlib.ExitStack) -> None:
        """Unwind ``stack`` (``store.close()`` first, then the factory's teardown), guarded."""
        self.guard(TEARDOWN_STEP, stack.close)

    @contextlib.contextmanager
    def opened_store(self) -> Iterator[TaskStore]:
        """One isolated store for the ``with`` block; closed and torn down on exit."""
        stack = contextlib.ExitStack()
        try:
            yield self.open_into(stack)
        finally:
            self.close_stack(stack)
