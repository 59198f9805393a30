"""Hypothesis property checks on the configured store (round-trips, version skips, queries).

Every example gets a fresh store from the user's factory, behind the per-call
timeout. Settings come from ``--chongming-profile`` (default: the derandomized
``ci`` profile); ``--hypothesis-profile`` and ``--hypothesis-seed`` still win.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from chongming_conformance.properties import StoreProperties
from chongming_conformance.protocol import TaskStore
from chongming_conformance.suite import _config


class TestStoreProperties(StoreProperties):
    """StoreProperties on ``--chongming-store``."""

    def make_store(self) -> Any:
        return _config.store_factory()()

    @contextlib.contextmanager
    def fresh_store(self) -> Iterator[TaskStore]:
        with super().fresh_store() as store:
            yield _config.timed(store)
