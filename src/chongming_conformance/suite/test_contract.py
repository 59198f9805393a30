"""The single-connection contract, run against the store the plugin was given."""

from __future__ import annotations

from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.suite._config import ConfiguredSeam


class TestStoreContract(ConfiguredSeam, StoreContract):
    """StoreContract on ``--chongming-store``; opening, every call and teardown timed."""
