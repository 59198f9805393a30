"""The stateful model test: the configured store and a model, side by side, all 14 methods."""

from __future__ import annotations

from typing import Any

from chongming_conformance.protocol import TaskStore
from chongming_conformance.stateful import StoreStateMachineTests
from chongming_conformance.suite import _config


class TestStoreStateMachine(StoreStateMachineTests):
    """StoreStateMachineTests on ``--chongming-store``; every store call under the timeout."""

    def make_store(self) -> Any:
        return _config.store_factory()()

    def wrap_store(self, store: TaskStore) -> TaskStore:
        return _config.timed(store)
