"""Derandomized draws do not depend on which kit modules a test imported first.

Hypothesis mixes the constants of every loaded local module into its draws, so before the
plugin imported every kit module at configure time (``plugin/draws.py``), importing
``chongming_conformance.checking.contract`` before the state machine ran changed the machine's
derandomized inputs (the case counts of ``tests/test_cases.py`` moved with test order).
Each order runs in a fresh interpreter; the case counts must be the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_RUN = """
import json, sys
if sys.argv[1] == "contract-first":
    import chongming_conformance.checking.contract  # what a contract test does before the machine
if sys.argv[2] == "settle":
    from chongming_conformance.plugin.draws import import_kit_modules
    import_kit_modules()
from chongming_conformance.checking.cases import take_counts
from chongming_conformance.checking.hypothesis_profiles import load_profile
from chongming_conformance.checking.stateful import StoreStateMachineTests
from reference_stores.memory import InMemoryTaskStore

class Machine(StoreStateMachineTests):
    def make_store(self):
        return InMemoryTaskStore()

load_profile("ci")
take_counts()
Machine().test_state_machine()
print(json.dumps(take_counts().get("test_state_machine", {}), sort_keys=True))
"""


def _counts(order: str, settle: str) -> dict[str, int]:
    out = subprocess.run([sys.executable, "-c", _RUN, order, settle], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, check=True)
    counts: dict[str, int] = json.loads(out.stdout.strip().splitlines()[-1])
    return counts


def test_import_order_changes_the_draws_without_the_plugins_import() -> None:
    """The cause, shown: without importing every kit module first, the order matters (if
    this ever passes, hypothesis stopped mixing in local constants and draws.py can go)."""
    assert _counts("machine-first", "no") != _counts("contract-first", "no")


def test_after_importing_every_kit_module_the_order_does_not_matter() -> None:
    assert _counts("machine-first", "settle") == _counts("contract-first", "settle")
