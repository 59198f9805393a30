"""How often does a property or the state machine catch a broken store? (a rate, not a yes)

Usage: PYTHONPATH=tests:tests/properties python benchmarks/catch_rate.py STORE CHECK N

STORE is a class name from tests/properties/property_broken_stores.py, CHECK a test of
StoreProperties or ``test_state_machine``, N the number of unseeded runs at the kit's ci
profile without shrinking (the settings tests/properties/test_property_broken_stores.py
uses, minus ``derandomize``). Prints ``STORE CHECK caught/N``; docs/benchmarks.md records
the rates a claimed catch must reach.
"""

from __future__ import annotations

import sys
from typing import Any

from hypothesis import Phase, settings
from property_broken_stores import BROKEN_STORES

from chongming_conformance.checking.hypothesis_profiles import PROFILES
from chongming_conformance.checking.properties import StoreProperties
from chongming_conformance.checking.stateful import StoreStateMachineTests


def caught(store_name: str, check: str, runs: int) -> int:
    unseeded = settings(settings.get_profile(PROFILES["ci"]), derandomize=False, database=None,
                        phases=[Phase.explicit, Phase.generate], report_multiple_bugs=False)
    [store] = [s for s in BROKEN_STORES.values() if s.__name__ == store_name]
    base: type[Any] = StoreStateMachineTests if check == "test_state_machine" else StoreProperties
    hits = 0
    for _ in range(runs):
        suite = type("Rate", (base,), {"make_store": lambda self: store(),
                                       "hypothesis_settings": unseeded})()
        try:
            getattr(suite, check)()
        except Exception:  # any failure of the store counts as a catch
            hits += 1
    return hits


if __name__ == "__main__":
    name, check, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print(f"{name} {check} {caught(name, check, n)}/{n}")
