"""Hypothesis property checks on the configured store (round-trips, version skips, queries).

Every example gets a fresh store from the user's factory; opening it, every
call and its teardown run under the per-call timeout. Settings come from
``--chongming-profile`` (default: the derandomized ``ci`` profile);
``--hypothesis-profile`` and ``--hypothesis-seed`` still win.
"""

from __future__ import annotations

from chongming_conformance.checking.properties import StoreProperties
from chongming_conformance.suite._config import ConfiguredSeam


class TestStoreProperties(ConfiguredSeam, StoreProperties):
    """StoreProperties on ``--chongming-store``; opening, every call and teardown timed."""
