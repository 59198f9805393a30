"""What the plugin resolved at configure time, for the packaged suite classes to read.

The plugin calls :func:`install` once per run (after validating the spec);
suite classes call the accessors below. Nothing here imports pytest, so suite
code stays plain Python like the contract itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..protocol import TaskStore
from ..protocol.capabilities import Capabilities
from ..seam.timeouts import DEFAULT_TIMEOUT, TimeoutProxy, call_with_timeout

T = TypeVar("T")

__all__ = [
    "ConfiguredSeam",
    "KitConfig",
    "capabilities",
    "current",
    "deployment",
    "guarded",
    "install",
    "shared_store_factory",
    "store_factory",
    "stress_profile",
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
    #: The factory module's ``reset_store`` (None: a new store per test and example).
    reset_store: Callable[[TaskStore], None] | None = None
    reset_spec: str | None = None
    #: The shared store's ``faults.Deployment`` (its module's ``chongming_deployment()``),
    #: or None when it describes none.
    deployment: Any = None


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


def deployment() -> Any:
    """The shared store's deployment (``faults.Deployment``), or None."""
    return current().deployment


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


def timed(store: TaskStore) -> TaskStore:
    """``store`` behind a TimeoutProxy: every method call is bounded by the timeout."""
    proxy: TaskStore = TimeoutProxy(store, timeout())
    return proxy


def guarded(what: str, step: Callable[[], T]) -> T:
    """Run ``step`` (opening a store, or its teardown) under the timeout, naming ``what``.

    A hung factory or a ``close()`` that never returns then fails one test with
    the step named, instead of hanging the run.
    """
    return call_with_timeout(what, timeout(), step)


class ConfiguredSeam:
    """The seam hooks (``seam.StoreSeam``) bound to the plugin's configuration.

    Every packaged single-connection suite module is ``class TestX(ConfiguredSeam,
    Base)``: the store comes from ``--chongming-store``, and opening it, each
    call and its teardown run under ``--chongming-timeout``. One definition, so
    the contract, the properties, the state machine and the controller checks
    can never drift apart in how they open a store.
    """

    def make_store(self) -> Any:
        return store_factory()()

    def reset_function(self) -> Callable[[TaskStore], None] | None:
        return current().reset_store

    def reuse_key(self) -> object:
        # Every configured class (contract, properties, state machine, controller) shares
        # the one kept store of this process.
        config = current()
        return ("configured", config.store_factory, config.reset_store)

    def wrap_store(self, store: TaskStore) -> TaskStore:
        return timed(store)

    def guard(self, what: str, step: Callable[[], T]) -> T:
        return guarded(what, step)

