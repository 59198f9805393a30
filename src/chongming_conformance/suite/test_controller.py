"""The controller-in-the-loop checks, run against the store the plugin was given.

The in-process CTRL-* checks run for every store. The XP-CTRL-* checks need a
shared store (``make_shared_store`` or ``--chongming-shared-store``): without
one the plugin skips them and reports their clauses NOT VERIFIED, and a store
declaring ``cross_process`` unsupported gets them UNSUPPORTED -- never PASS.
"""

from __future__ import annotations

from typing import Any

from chongming_conformance.controller_checks import ControllerContract
from chongming_conformance.protocol import TaskStore
from chongming_conformance.suite import _config


class TestStoreUnderAController(ControllerContract):
    """ControllerContract on ``--chongming-store``; opening and teardown under the timeout."""

    def make_store(self) -> Any:
        return _config.store_factory()()

    def make_shared_store(self) -> Any:
        shared = _config.shared_store_factory()
        if shared is None:  # the plugin skips these tests first; this is a guard only
            raise RuntimeError("no shared store is configured for the cross-process checks")
        return shared()

    def open_store(self) -> TaskStore:
        return _config.open_timed(super().open_store)

    def teardown_method(self, method: object = None) -> None:
        _config.teardown_timed(
            lambda: super(TestStoreUnderAController, self).teardown_method(method))
