"""A per-call timeout around every store method, so one hung call fails one test.

Why SIGALRM and not a thread: the suite runs store calls in pytest's main
thread, and many stores are bound to the thread that opened them (``sqlite3``
refuses cross-thread use by default; ``psycopg`` connections are not meant to
be shared). Running the call in a helper thread would change the store's
environment and could not stop the call anyway -- a Python thread cannot be
killed, so the hung call would live on and keep locks. ``signal.setitimer``
interrupts the main thread itself: the handler raises :class:`StoreCallTimeout`
inside the hung call, its ``finally`` blocks and the test's teardown run, and
the next test starts normally.

Limits (documented in docs/plugin.md): the signal is handled when the
interpreter next runs Python code in the main thread, so a call stuck inside C
code that retries on ``EINTR`` without checking signals is interrupted only
when it returns to Python. Where SIGALRM does not exist (Windows) or the call
runs outside the main thread, calls are made without a timeout and
:func:`mechanism` says so (the report records it).

:class:`StoreCallTimeout` derives from ``BaseException`` on purpose: a store's
own ``except Exception`` (e.g. wrapping driver errors in ``StoreError``) must not
turn a hang into an ordinary error that a test expecting ``StoreError`` would
accept as a pass.
"""

from __future__ import annotations

import functools
import signal
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

from ..protocol import PROTOCOL_METHODS

__all__ = [
    "DEFAULT_TIMEOUT",
    "StoreCallTimeout",
    "TimeoutProxy",
    "call_with_timeout",
    "mechanism",
    "unwrap",
]

#: Seconds a single store call may take before its test fails.
DEFAULT_TIMEOUT = 30.0

T = TypeVar("T")


class StoreCallTimeout(BaseException):
    """A store call did not return in time (see the module docstring for the base class)."""

    def __init__(self, label: str, seconds: float) -> None:
        super().__init__(
            f"store call {label} did not return within {seconds:g} s "
            "(--chongming-timeout); the store is probably blocked or deadlocked in it"
        )
        self.label = label
        self.seconds = seconds


_state = threading.local()


def _enforceable() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def mechanism() -> str:
    """How timeouts are enforced in this process, for the report."""
    if not hasattr(signal, "setitimer"):
        return "none (no SIGALRM on this platform)"
    return "SIGALRM/setitimer in the main thread"


def call_with_timeout(label: str, seconds: float, func: Callable[[], T]) -> T:
    """Run ``func()``; raise :class:`StoreCallTimeout` naming ``label`` after ``seconds``.

    Nested calls (a proxied store calling another proxied object) run under the
    outer timer only. ``seconds <= 0`` disables the timeout.
    """
    if seconds <= 0 or getattr(_state, "active", False) or not _enforceable():
        return func()

    def on_alarm(signum: int, frame: FrameType | None) -> None:
        if getattr(_state, "active", False):
            _state.active = False
            raise StoreCallTimeout(label, seconds)

    previous_handler = signal.signal(signal.SIGALRM, on_alarm)
    started = time.monotonic()
    previous_timer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    _state.active = True
    try:
        return func()
    finally:
        _state.active = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        if previous_timer > 0:
            # Someone else (e.g. pytest-timeout) had a timer running: give it back
            # what is left of it, firing at once if it already ran out.
            left = previous_timer - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 1e-6))


class TimeoutProxy:
    """Wraps a store; every callable attribute runs under :func:`call_with_timeout`.

    The protocol methods the store has are set as instance attributes up front
    (so ``isinstance(proxy, TaskStore)`` works even where it inspects
    attributes statically) and keep the store's signatures (``functools.wraps``
    sets ``__wrapped__``): protocol checks on the proxy see the real store, and
    a method the store lacks is lacking on the proxy too.
    """

    def __init__(self, target: object, seconds: float) -> None:
        object.__setattr__(self, "_chongming_target", target)
        object.__setattr__(self, "_chongming_seconds", seconds)
        # The contract's structural check looks through the proxy via this name.
        object.__setattr__(self, "__chongming_target__", target)
        for name in PROTOCOL_METHODS:
            value = getattr(target, name, None)
            if callable(value):
                object.__setattr__(self, name, self._timed(name, value))

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        seconds: float = object.__getattribute__(self, "_chongming_seconds")

        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            return call_with_timeout(
                f"{name}()", seconds, functools.partial(method, *args, **kwargs)
            )

        return timed

    def __getattr__(self, name: str) -> Any:
        target = object.__getattribute__(self, "_chongming_target")
        value = getattr(target, name)
        if name.startswith("__") or not callable(value):
            return value
        return self._timed(name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_chongming_target"), name, value)

    def __repr__(self) -> str:
        target = object.__getattribute__(self, "_chongming_target")
        return f"TimeoutProxy({target!r})"


def unwrap(store: object) -> object:
    """The real store behind the kit's wrappers (a :class:`TimeoutProxy`, a reused store's
    tracker: anything that names its target ``__chongming_target__``), or ``store`` itself."""
    seen = 0
    while seen < 8:  # wrappers nest a level or two; never loop on a self-reference
        try:
            target = object.__getattribute__(store, "__chongming_target__")
        except AttributeError:
            return store
        store, seen = target, seen + 1
    return store
