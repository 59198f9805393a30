"""The stateful model test: the configured store and the oracle, side by side, all 14 methods."""

from __future__ import annotations

from chongming_conformance.checking.stateful import StoreStateMachineTests
from chongming_conformance.suite._config import ConfiguredSeam


class TestStoreStateMachine(ConfiguredSeam, StoreStateMachineTests):
    """StoreStateMachineTests on ``--chongming-store``; opening, every call and teardown timed."""
