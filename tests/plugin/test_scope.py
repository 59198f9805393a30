"""``--chongming-scope=single``: the fast loop spawns nothing and claims nothing it did not run."""

from __future__ import annotations

import pytest
from plugin_helpers import load_report, run

from chongming_conformance.protocol.clauses import FAULT_MODES_NEEDED

#: Loaded with ``-p spawn_guard``: any process started in the run fails the test that
#: starts it (multiprocess is what the stress harness and the XP-CTRL checks use).
SPAWN_GUARD = '''
import multiprocess.process
import multiprocessing.process


def _refuse(self, *args, **kwargs):
    raise RuntimeError("a process was spawned under --chongming-scope=single")


multiprocess.process.BaseProcess.start = _refuse
multiprocessing.process.BaseProcess.start = _refuse
'''


def test_single_scope_spawns_no_process_and_leaves_every_xp_clause_unverified(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(spawn_guard=SPAWN_GUARD)
    result = run(pytester, "-p", "spawn_guard", "--chongming-scope=single",
                 "--chongming-store=reference_stores.sqlite:make_store",
                 "--chongming-profile=quick", "--hypothesis-seed=0",
                 "--chongming-report=report.json")
    out = result.stdout.str()
    assert "a process was spawned" not in out, out[-3000:]
    assert result.ret == 0, out[-3000:]  # no gate: pytest's status, and nothing failed
    doc = load_report(pytester.path / "report.json")
    assert doc["run"]["partial"] is True
    assert any("--chongming-scope=single" in r for r in doc["run"]["partial_reasons"])
    # (The fault clauses are left out of the gate: no fault run was requested.)
    xp = [c for c in doc["clauses"] if c["scope"] == "cross_process"
          and c["id"] not in FAULT_MODES_NEEDED]
    assert xp and all(c["outcome"] == "NOT VERIFIED" for c in xp), [
        (c["id"], c["outcome"]) for c in xp]
    assert all("--chongming-scope=single" in (c["note"] or "") for c in xp)
    faults = [c for c in doc["clauses"] if c["id"] in FAULT_MODES_NEEDED]
    assert faults and all(c["outcome"] != "PASS" and not c["gated"] for c in faults)
    single = [c for c in doc["clauses"] if c["scope"] in ("contract", "controller")
              and c["level"] == "MUST"]
    assert all(c["outcome"] == "PASS" for c in single), [
        (c["id"], c["outcome"]) for c in single if c["outcome"] != "PASS"]


def test_the_spawn_guard_has_teeth(pytester: pytest.Pytester) -> None:
    """Without the scope, the same run does spawn (its stress tests fail on the guard)."""
    pytester.makepyfile(spawn_guard=SPAWN_GUARD)
    result = run(pytester, "-p", "spawn_guard",
                 "--chongming-store=reference_stores.sqlite:make_store",
                 "--chongming-profile=quick", "--hypothesis-seed=0", "-k", "xp_save_atomic")
    assert "a process was spawned" in result.stdout.str()
