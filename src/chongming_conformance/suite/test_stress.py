"""The cross-process clauses, run by the stress harness on the configured shared store.

Runs only when a shared store is configured (``--chongming-shared-store`` or a
``make_shared_store`` next to the store factory); otherwise the plugin skips
these tests and reports their clauses NOT VERIFIED, never PASS. Each scenario
has its own deadline inside the harness, so a deadlocked store fails its
scenario with the stuck worker named instead of hanging the run.
"""

from __future__ import annotations

from typing import Any

from chongming_conformance.faults.network import takes_network
from chongming_conformance.stress import StressContract, StressProfile, get_profile
from chongming_conformance.suite import _config


class TestStoreStress(StressContract):
    """StressContract on the configured shared store and ``--chongming-stress`` profile."""

    #: The plugin's report marks the clauses a run could not judge NOT VERIFIED, one by one.
    partial_verdicts = True

    def setup_method(self, method: object = None) -> None:
        # The profile first: the base opens the scenario's location with it.
        self.stress_profile: StressProfile | str = get_profile(_config.stress_profile())
        super().setup_method(method)

    def make_shared_store(self, network: Any = None) -> Any:
        shared: Any = _config.shared_store_factory()
        if shared is None:  # the plugin skips these tests first; this is a guard only
            raise RuntimeError("no shared store is configured for the stress harness")
        # The network seam goes to the store's factory only when a fault run routes it.
        return shared() if network is None else shared(network=network)

    def takes_network(self) -> bool:
        shared = _config.shared_store_factory()
        return shared is not None and takes_network(shared)

    def network_absent(self) -> str | None:
        return _config.capabilities().unsupported.get("network")

    def deployment(self) -> Any:
        return _config.deployment()
