"""The single-connection contract, run against the store the plugin was given."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from chongming_conformance.contract import StoreContract
from chongming_conformance.protocol import TaskStore
from chongming_conformance.suite import _config
from chongming_conformance.timeouts import call_with_timeout

T = TypeVar("T")


class TestStoreContract(StoreContract):
    """StoreContract on ``--chongming-store``; opening, every call and teardown timed."""

    def make_store(self) -> Any:
        return _config.store_factory()()

    def wrap_store(self, store: TaskStore) -> TaskStore:
        return _config.timed(store)

    def guard(self, what: str, step: Callable[[], T]) -> T:
        return call_with_timeout(what, _config.timeout(), step)
