"""Keeping one open store per process and emptying it between uses: the ``reset_store`` seam.

Opening a store can be expensive -- a server-backed store creates a schema or a
database, installs tables and opens a pool -- while the kit needs an empty store
for every test and every hypothesis example. A factory module may therefore
export ``reset_store(store) -> None``, which empties the store it is given (every
task, history row, command and counter). When it exists, the kit keeps the
stores it opened and hands them out again:

* Without ``reset_store``, the kit calls ``make_store()`` once per test and once
  per hypothesis example; with it, once per worker process (plus once more each
  time a check closes the store it was given), and ``reset_store(store)`` empties
  the store between tests and examples.
* Before a kept store is handed out again it is reset, and then checked *through
  the protocol* to be empty (:func:`leftovers`: ``query()``, ``counts()`` and a
  claim far in the future). A reset that leaves anything behind, or raises, is a
  :class:`StoreReuseError`: a usage problem of the author's test plumbing, which
  the plugin turns into one precise message and a stopped run -- never a silent
  fall back, and never a verdict drawn from a store that was not empty.
* A store a check closed (``close()`` is part of the contract) or whose call was
  cut off (a per-call timeout, an interrupt) is never reused: it is closed and its
  factory torn down, and the next use opens a new one.
* The plugin also proves the seam once before any test runs
  (:func:`check_reset`: a populated store must come back empty).

Nothing here imports pytest; :class:`chongming_conformance.seam.StoreSeam` is the
one caller.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..protocol import PROTOCOL_METHODS, TaskStore
from ..protocol.model import Command, CommandKind, TaskSnapshot, TaskStatus, Transition

__all__ = [
    "RESET_ATTR",
    "StoreReuse",
    "StoreReuseError",
    "check_reset",
    "leftovers",
    "reuse_for",
    "shutdown_all",
    "summary",
]

#: The name a factory module exports its reset function under.
RESET_ATTR = "reset_store"

#: A ``now`` beyond every lease the checks write: a claim then returns every unfinished
#: command a store still holds.
_FAR_FUTURE = datetime(2199, 1, 1, tzinfo=UTC)
#: Idle stores kept per process: one is the common case, a second serves the contract's
#: "another instance" checks; more would only hold connections.
_MAX_IDLE = 2


class StoreReuseError(Exception):
    """``reset_store`` did not give back an empty store: the run cannot go on with reuse."""


def leftovers(store: TaskStore) -> list[str]:
    """What a store that should be empty still shows through the protocol ('[]': empty)."""
    found: list[str] = []
    tasks = list(store.query())
    if tasks:
        found.append(f"query() returns {len(tasks)} task(s), e.g. "
                     f"{[t.task_id for t in tasks[:3]]!r}")
    counts = {status.value: n for status, n in dict(store.counts()).items() if n}
    if counts:
        found.append(f"counts() is {counts}")
    claimed = list(store.claim_commands(now=_FAR_FUTURE, lease_seconds=1.0, limit=3))
    if claimed:
        found.append(f"claim_commands() still returns command(s) "
                     f"{[c.command_id for c in claimed]!r}")
    return found


def check_reset(store: TaskStore, reset: Callable[[TaskStore], None]) -> list[str]:
    """Populate ``store``, reset it, and say what is left ('[]': the seam works).

    One task with a history row and one command: every kind of row the kit writes.
    """
    at = datetime(2030, 1, 1, tzinfo=UTC)
    task_id = "chongming-reset-probe"
    store.create(TaskSnapshot(task_id, "probe", TaskStatus.RUNNING, 1, at, at))
    store.append(Transition(task_id, 1, None, TaskStatus.RUNNING, at))
    store.submit_command(Command("chongming-reset-probe", task_id, CommandKind.STOP, "kit", at))
    reset(store)
    found = leftovers(store)
    if store.get(task_id) is not None:
        found.append(f"get({task_id!r}) still returns the task")
    if list(store.history(task_id)):
        found.append(f"history({task_id!r}) still returns rows")
    return found


@dataclass
class _Kept:
    """One store this process opened, with the teardown of the factory that opened it."""

    store: TaskStore
    stack: contextlib.ExitStack
    #: A check called close() on it: it cannot be used again.
    closed: bool = False
    #: A call on it was cut off (timeout, interrupt): its state is unknown.
    poisoned: bool = False
    uses: int = field(default=0)


class _Tracked:
    """The kept store as a check sees it: every protocol method forwarded unchanged, with
    ``close()`` and a cut-off call noted so the store is not handed out again.

    Signatures are the store's own (``functools.wraps``), and ``__chongming_target__``
    points at the store, so protocol checks and ``timeouts.unwrap`` see the real thing.
    """

    def __init__(self, kept: _Kept) -> None:
        target = kept.store
        object.__setattr__(self, "_chongming_kept", kept)
        object.__setattr__(self, "__chongming_target__", target)
        for name in PROTOCOL_METHODS:
            value = getattr(target, name, None)
            if callable(value):
                object.__setattr__(self, name, self._tracked(name, value, kept))

    @staticmethod
    def _tracked(name: str, method: Callable[..., Any], kept: _Kept) -> Callable[..., Any]:
        @functools.wraps(method)
        def call(*args: Any, **kwargs: Any) -> Any:
            if name == "close":
                kept.closed = True
            try:
                return method(*args, **kwargs)
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    kept.poisoned = True  # a timeout or an interrupt cut the call off
                raise

        return call

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "__chongming_target__"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "__chongming_target__"), name, value)

    def __repr__(self) -> str:
        return repr(object.__getattribute__(self, "__chongming_target__"))


class StoreReuse:
    """The stores one factory opened in this process, reset and handed out again.

    ``open_store(stack)`` opens a new store whose teardown (``close()``, then the
    factory's own) is registered on ``stack``; ``reset`` is the author's
    ``reset_store``; ``label`` names it in messages.
    """

    def __init__(
        self,
        open_store: Callable[[contextlib.ExitStack], TaskStore],
        reset: Callable[[TaskStore], None],
        label: str,
    ) -> None:
        self._open_store = open_store
        self._reset = reset
        self.label = label
        self._idle: list[_Kept] = []
        #: What the report says about this run's reuse.
        self.opened = 0
        self.reused = 0

    def acquire(self, stack: contextlib.ExitStack) -> TaskStore:
        """An empty store for one test or example; it comes back here when ``stack`` unwinds."""
        kept = self._idle.pop() if self._idle else None
        if kept is None:
            kept = self._open()
        else:
            self._empty(kept)
            self.reused += 1
        kept.uses += 1
        stack.callback(self._release, kept)
        tracked: TaskStore = _Tracked(kept)
        return tracked

    def _open(self) -> _Kept:
        stack = contextlib.ExitStack()
        try:
            store = self._open_store(stack)
        except BaseException:
            stack.close()
            raise
        self.opened += 1
        return _Kept(store, stack)

    def _empty(self, kept: _Kept) -> None:
        try:
            self._reset(kept.store)
            found = leftovers(kept.store)
        except Exception as exc:
            self._discard(kept)
            raise StoreReuseError(
                f"{self.label}(store) raised {type(exc).__name__}: {exc}; the kit cannot "
                "reuse the store. Fix reset_store, or remove it to open a new store per test "
                "(slower, always correct)"
            ) from exc
        except BaseException:
            self._discard(kept)
            raise
        if found:
            self._discard(kept)
            raise StoreReuseError(
                f"{self.label}(store) did not empty the store: " + "; ".join(found)
                + ". Every check needs an empty store; fix reset_store (delete every task, "
                "history row and command, and reset any counters), or remove it to open a "
                "new store per test (slower, always correct)"
            )

    def _release(self, kept: _Kept) -> None:
        if kept.closed or kept.poisoned or len(self._idle) >= _MAX_IDLE:
            self._discard(kept)
        else:
            self._idle.append(kept)

    @staticmethod
    def _discard(kept: _Kept) -> None:
        kept.stack.close()

    def shutdown(self) -> None:
        """Close every idle store and tear down its factory (the end of the run)."""
        idle, self._idle = self._idle, []
        errors: list[BaseException] = []
        for kept in idle:
            try:
                self._discard(kept)
            except Exception as exc:  # every store gets its teardown; report the first
                errors.append(exc)
        if errors:
            raise errors[0]


#: This process's reusers, one per (factory, reset) pair: the contract, the properties
#: and the state machine of one configured run share one store.
_REUSERS: dict[object, StoreReuse] = {}


def reuse_for(
    key: object,
    open_store: Callable[[contextlib.ExitStack], TaskStore],
    reset: Callable[[TaskStore], None],
    label: str,
) -> StoreReuse:
    """The reuser of ``key`` in this process, made on first use."""
    reuser = _REUSERS.get(key)
    if reuser is None:
        reuser = _REUSERS[key] = StoreReuse(open_store, reset, label)
    return reuser


def summary() -> dict[str, int]:
    """Stores opened and reuses in this process, over every reuser (for the report)."""
    return {
        "stores_opened": sum(r.opened for r in _REUSERS.values()),
        "reuses": sum(r.reused for r in _REUSERS.values()),
    }


def shutdown_all() -> None:
    """Close every kept store of this process and forget the reusers (end of a run)."""
    reusers = list(_REUSERS.values())
    _REUSERS.clear()
    errors: list[BaseException] = []
    for reuser in reusers:
        try:
            reuser.shutdown()
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]
