"""What the plugin resolved at configure time, for the packaged suite classes to read.

The plugin calls :func:`install` once per run (after validating the spec);
suite classes call the accessors below. Nothing here imports pytest, so suite
code stays plain Python like the contract itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import factory as _factory
from ..capabilities import Capabilities
from ..protocol import TaskStore
from ..timeouts import DEFAULT_TIMEOUT, TimeoutProxy, call_with_timeout

__all__ = [
    "KitConfig",
    "capabilities",
    "current",
    "install",
    "open_timed",
    "shared_store_factory",
    "store_factory",
    "stress_profile",
    "teardown_timed",
    "timed",
    "timeout",
    "uninstall",
]


@dataclass(frozen=True)
class KitConfig:
    """One run's resolved configuration (specs are as the user wrote them)."""

    store_spec: str
    store_factory: Callable[[], Any]
    store_source: str = "--chongming-store"
    shared_spec: str | None = None
    shared_factory: Callable[[], Any] | None = None
    shared_source: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    capabilities: Capabilities = field(default_factory=Capabilities)
    profile: str | None = None
    #: A ``chongming_conformance.stress.StressProfile`` (None: the harness default).
    stress_profile: Any = None


_current: KitConfig | None = None


def install(config: KitConfig) -> None:
    global _current
    _current = config


def uninstall() -> None:
    global _current
    _current = None


def current() -> KitConfig:
    """The active configuration; a clear error when the suite runs without a store."""
    if _current is None:
        raise RuntimeError(
            "the chongming-conformance suite needs a store: run pytest with "
            "--chongming-store=MODULE:ATTR (or CHONGMING_STORE / ini chongming_store)"
        )
    return _current


def store_factory() -> Callable[[], Any]:
    """The user's zero-argument factory (any of the forms ``factory.enter_store`` accepts)."""
    return current().store_factory


def shared_store_factory() -> Callable[[], Any] | None:
    """The ``make_shared_store`` factory, or None: cross-process clauses are then NOT VERIFIED.

    Calling it (through ``factory``-style handling: callable, generator or
    context manager) gives a picklable zero-argument *opener*; see the context
    notes in docs/plugin.md.
    """
    return current().shared_factory


def stress_profile() -> Any:
    """The stress profile chosen with ``--chongming-stress`` and its overrides (or None)."""
    return current().stress_profile


def timeout() -> float:
    """Seconds one store call may take (``--chongming-timeout``; 0 disables)."""
    return current().timeout


def capabilities() -> Capabilities:
    return current().capabilities


def open_timed(open_store: Callable[[], TaskStore], label: str = "make_store()") -> TaskStore:
    """Open a store with ``open_store()`` under the timeout and wrap it in a TimeoutProxy.

    Suite classes call this from their ``open_store`` override, so a hung
    factory or a hung method call fails one test with the call named.
    """
    seconds = timeout()
    store = call_with_timeout(label, seconds, open_store)
    proxy: TaskStore = TimeoutProxy(store, seconds)
    return proxy  # structurally a TaskStore: it exposes exactly the store's methods


def timed(store: TaskStore) -> TaskStore:
    """``store`` behind a TimeoutProxy (for suite classes that open stores themselves)."""
    proxy: TaskStore = TimeoutProxy(store, timeout())
    return proxy


def teardown_timed(teardown: Callable[[], object]) -> None:
    """Run a suite class's teardown (store.close() and the factory's teardown) under the timeout.

    A ``close()`` that hangs then fails the test's teardown, naming it, instead of
    hanging the run.
    """
    call_with_timeout("close() / the factory's teardown", timeout(), teardown)


#: Kept for suite code written against it; the one implementation is in ``factory``.
enter_opener = _factory.enter_opener
