"""The single-connection contract, run against the store the plugin was given."""

from __future__ import annotations

from typing import Any

from chongming_conformance.contract import StoreContract
from chongming_conformance.protocol import TaskStore
from chongming_conformance.suite import _config


class TestStoreContract(StoreContract):
    """StoreContract on ``--chongming-store``; every store call runs under the timeout."""

    def make_store(self) -> Any:
        return _config.store_factory()()

    def open_store(self) -> TaskStore:
        return _config.open_timed(super().open_store)

    def teardown_method(self, method: object = None) -> None:
        _config.teardown_timed(lambda: super(TestStoreContract, self).teardown_method(method))
