"""The one way the single-connection bases open and close a store.

``StoreContract``, ``StoreProperties`` and ``StoreStateMachineTests`` all get
their stores here, so a subclass provides the same hooks whichever base it
extends (the shape of zarr-python's ``StoreTests``: one declared seam that
every test uses):

* ``make_store()`` -- required: a zero-argument factory call in any of the
  three factory forms (a store, a generator yielding one, a context manager);
  :func:`chongming_conformance.seam.factory.enter_store` unwraps it;
* ``wrap_store(store)`` -- optional: the store the tests should drive
  (identity by default; the packaged suite adds the per-call timeout);
* ``guard(what, step)`` -- optional: runs one lifecycle step, opening or
  tearing down (a plain call by default; the packaged suite runs it under
  ``--chongming-timeout`` so a hung factory or ``close()`` fails one test with
  the step named instead of hanging the run);
* ``reset_function()`` -- optional: a ``reset_store(store)`` that empties a store
  of this factory. When given, each process keeps the stores it opened and
  hands them out again, reset and checked empty, instead of calling
  ``make_store`` per test and per example (:mod:`chongming_conformance.seam.reuse`).

Teardown always closes the store first (``store.close()``), then runs the
factory's own teardown, so an author never has to remember ``close()``. The
teardown is an ``ExitStack.close()``, never an ``__exit__`` with the test's
exception: a context-manager factory cannot swallow a failing check.

The part ``seam`` (docs/architecture.md, "The parts") is how the kit reaches a store: a
``MODULE:ATTR`` spec (:mod:`.specs`) becomes a factory, a factory in any of its forms an
open store or a shared-store opener (:mod:`.factory`); every call gets a deadline
(:mod:`.timeouts`), a kept store is reset between uses (:mod:`.reuse`), the check bases
open stores through :class:`StoreSeam` (here), a store's slow step sends notes back
(:mod:`.progress`), and the commands' usage errors exit 4 (:mod:`.usage`). It may import
``protocol``, ``oracle`` and ``report`` (the masking every usage error passes through).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from ..protocol import TaskStore
from .factory import enter_store
from .reuse import RESET_ATTR, reuse_for

__all__ = ["OPEN_STEP", "RESET_STEP", "TEARDOWN_STEP", "StoreSeam"]

T = TypeVar("T")

#: How :meth:`StoreSeam.guard` names the opening step (a timeout message quotes it).
OPEN_STEP = "make_store()"
#: How :meth:`StoreSeam.guard` names the step that hands out a kept store again.
RESET_STEP = f"make_store() or {RESET_ATTR}() and the emptiness check"
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

    def reset_function(self) -> Callable[[TaskStore], None] | None:
        """Hook: the function that empties a store of ``make_store`` for the next test
        (a ``reset_store``), or None (default): every test and example opens a new one."""
        return None

    def reuse_key(self) -> object:
        """Hook: which stores may be handed to this seam (default: its class's factory)."""
        return (type(self).make_store, self.reset_function())

    def open_into(self, stack: contextlib.ExitStack) -> TaskStore:
        """Open one empty store (a new one, or a kept one reset); its teardown -- or its
        return to the kept stores -- is registered on ``stack``."""
        origin = f"{type(self).__name__}.make_store"
        reset = self.reset_function()
        if reset is None:
            store = self.guard(
                OPEN_STEP, lambda: enter_store(self.make_store, stack, origin=origin)
            )
        else:
            reuser = reuse_for(
                self.reuse_key(),
                lambda inner: enter_store(self.make_store, inner, origin=origin),
                reset,
                getattr(reset, "__qualname__", RESET_ATTR),
            )
            store = self.guard(RESET_STEP, lambda: reuser.acquire(stack))
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
