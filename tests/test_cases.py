"""The generated checks meet the input cases that matter, at the default (ci) profile.

Each targeted case (chongming_conformance.checking.cases.TARGETED) is where a realistic bug hides:
a LIMIT before the WHERE, a prune by updated_at, a whole-second lease, a GLOB prefix. A
check that never draws the case cannot catch the bug, however many examples it runs; this
runs every check of TARGETED on the in-memory store at the ci profile (derandomized, so the
counts are the run's, every time) and requires every case to occur.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from chongming_conformance.checking.cases import EXAMPLES, TARGETED, query_cases, take_counts
from chongming_conformance.checking.hypothesis_profiles import load_profile
from chongming_conformance.checking.properties import StoreProperties
from chongming_conformance.protocol.model import TaskQuery, TaskStatus
from chongming_conformance.strategies.samples import snapshot
from reference_stores.memory import InMemoryTaskStore


class MemoryProperties(StoreProperties):
    def make_store(self) -> InMemoryTaskStore:
        return InMemoryTaskStore()


@pytest.fixture(autouse=True)
def _ci_profile() -> Iterator[None]:
    load_profile("ci")
    take_counts()  # nothing left over from another test
    yield
    take_counts()


#: The state machine's derandomized draws depend on which local modules the interpreter has
#: loaded: hypothesis mixes the constants of every loaded module outside site-packages into
#: its draws (tests/test_draws.py). The plugin imports every kit module before the first
#: draw (plugin/draws.py), and so does tests/conftest.py; the machine is counted in a fresh
#: interpreter that does the same and imports nothing else, so it draws what a store's run
#: through the plugin draws (whatever test files this pytest process loaded).
_MACHINE_COUNTS = """
import json
from chongming_conformance.plugin.draws import import_kit_modules
import_kit_modules()  # as the plugin does before the first draw: a store's run draws these
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
print(json.dumps(take_counts().get("test_state_machine", {})))
"""


def _machine_counts() -> dict[str, int]:
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", _MACHINE_COUNTS], cwd=root, text=True,
                          capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts: dict[str, int] = json.loads(proc.stdout.strip().splitlines()[-1])
    return counts


@pytest.mark.parametrize("check", sorted(TARGETED))
def test_every_targeted_case_occurs_at_the_ci_profile(check: str) -> None:
    if check == "test_state_machine":
        counts = _machine_counts()
    else:
        getattr(MemoryProperties(), check)()
        counts = take_counts().get(check, {})
    assert counts.get(EXAMPLES, 0) >= 50, counts
    missing = [case for case in TARGETED[check] if not counts.get(case)]
    assert not missing, f"{check} never met {missing}; it met {counts}"


def test_the_limit_case_is_the_one_a_limit_before_the_filter_gets_wrong() -> None:
    """The case names what it says: the first task in the order fails the filter."""
    tasks = [snapshot("a", name="x", created=0), snapshot("b", name="y", created=1)]
    assert "query: a limit, and a non-matching task first in the order" in query_cases(
        TaskQuery(name="y", limit=1), tasks)
    assert "query: a limit, and a non-matching task first in the order" not in query_cases(
        TaskQuery(name="x", limit=1), tasks)
    running = [snapshot("a", status=TaskStatus.RUNNING), snapshot("b", created=1)]
    assert "query: a limit, and a non-matching task first in the order" in query_cases(
        TaskQuery(statuses=frozenset({TaskStatus.PENDING}), limit=1), running)
