"""The controller-in-the-loop checks, run against the store the plugin was given.

The in-process CTRL-* checks run for every store. The XP-CTRL-* checks need a
shared store (``make_shared_store`` or ``--chongming-shared-store``): without
one the plugin skips them and reports their clauses NOT VERIFIED, and a store
declaring ``cross_process`` unsupported gets them UNSUPPORTED -- never PASS.
"""

from __future__ import annotations

from typing import Any

from chongming_conformance.checking.controller import ControllerContract
from chongming_conformance.suite import _config
from chongming_conformance.suite._config import ConfiguredSeam


class TestStoreUnderAController(ConfiguredSeam, ControllerContract):
    """ControllerContract on ``--chongming-store``; opening, main-thread calls, teardown timed."""

    def make_shared_store(self) -> Any:
        shared = _config.shared_store_factory()
        if shared is None:  # the plugin skips these tests first; this is a guard only
            raise RuntimeError("no shared store is configured for the cross-process checks")
        return shared()
