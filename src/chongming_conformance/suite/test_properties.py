"""Hypothesis property checks on the configured store (round-trips, version skips, queries).

Every example gets a fresh store from the user's factory; opening it, every
call and its teardown run under the per-call timeout. Settings come from
``--chongming-profile`` (default: the derandomized ``ci`` profile);
``--hypothesis-profile`` and ``--hypothesis-seed`` still win.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from chongming_conformance.properties import StoreProperties
from chongming_conformance.protocol import TaskStore
from chongming_conformance.suite import _config
from chongming_conformance.timeouts import call_with_timeout

T = TypeVar("T")


class TestStoreProperties(StoreProperties):
    """StoreProperties on ``--chongming-store``; opening, every call and teardown timed."""

    def make_store(self) -> Any:
        return _config.store_factory()()

    def wrap_store(self, store: TaskStore) -> TaskStore:
        return _config.timed(store)

    def guard(self, what: str, step: Callable[[], T]) -> T:
        return call_with_timeout(what, _config.timeout(), step)
