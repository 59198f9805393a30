"""Under pytest-xdist (``-n 2``) the plugin's report is the serial run's.

Each reference store runs the packaged suite twice from a foreign directory,
serially and with two workers, and the two JSON reports must agree on
everything a verdict is made of: every clause's outcome, every test's outcome
and node id, partial detection, the gate and the verdict. The JUnit XML of the
distributed run must carry each suite test's clauses as properties, the
stress scenarios (which start their own processes) must all run on one worker,
and the long work (stress group, state machine) must be what the workers start with.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from plugin_helpers import load_report, run

from chongming_conformance.protocol.clauses import CLAUSES, FAULT_MODES_NEEDED, Scope

pytest.importorskip("xdist", reason="pytest-xdist is in the kit's dev extras")

_WORKER_LINE = re.compile(r"^\[(gw\d+)\] .*?(PASSED|FAILED|SKIPPED|XFAIL|XPASS|ERROR) (\S+)")


def verdict_facts(doc: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on how the run was distributed."""
    run_ = doc["run"]
    return {
        "verdict": doc["verdict"],
        "summary": doc["summary"],
        "partial": run_["partial"],
        "partial_reasons": run_["partial_reasons"],
        "gate": run_["gate"],
        "gate_passed": run_["gate_passed"],
        "tests_collected": run_["tests_collected"],
        "profile": run_["profile"],
        "stress_profile": run_.get("stress_profile"),
        "clauses": {
            c["id"]: (c["outcome"], sorted((t["nodeid"], t["outcome"]) for t in c["tests"]))
            for c in doc["clauses"]
        },
        "unmapped": sorted((t["nodeid"], t["outcome"]) for t in doc["unmapped_tests"]),
    }


def junit_key(nodeid: str) -> str:
    """The ``classname.name`` pytest's JUnit XML gives the test with this node id."""
    return nodeid.split("@")[0].replace(".py::", ".").replace("::", ".").replace("/", ".")


def junit_clauses(path: Path) -> dict[str, list[str]]:
    """testcase ``classname.name`` -> the values of its chongming_clause properties."""
    found: dict[str, list[str]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        key = f"{case.get('classname')}.{case.get('name')}"
        found[key] = [
            p.get("value", "") for p in case.iter("property") if p.get("name") == "chongming_clause"
        ]
    return found


def run_both(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any],
                                                              pytest.RunResult, dict[str, Any]]:
    serial = run(pytester, *args, "--chongming-report=serial.json", "--junitxml=serial.xml")
    spread = run(pytester, *args, "-n", "2", "-v", "--chongming-report=spread.json",
                 "--junitxml=spread.xml")
    return (serial, load_report(pytester.path / "serial.json"),
            spread, load_report(pytester.path / "spread.json"))


def check_same_report(pytester: pytest.Pytester, spec: str, *extra: str) -> dict[str, Any]:
    serial, sdoc, spread, xdoc = run_both(
        pytester, f"--chongming-store={spec}", "--chongming-gate=must",
        "--chongming-stress=quick", *extra,
    )
    # Without a shared store the must gate fails on the NOT VERIFIED XP clauses: in both runs.
    assert spread.ret == serial.ret, spread.stdout.str()
    assert serial.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), serial.stdout.str()
    assert "no suite test was collected" not in spread.stdout.str()
    assert verdict_facts(xdoc) == verdict_facts(sdoc)
    assert xdoc["run"]["tests_collected"] > 0
    # Every test that ran has a duration in both runs.
    for doc in (sdoc, xdoc):
        for entry in doc["clauses"]:
            for t in entry["tests"]:
                assert t["outcome"] == "not run" or t["duration_s"] > 0, t
    # JUnit XML: every suite test lists its clauses with their levels, in both runs.
    declared: dict[str, set[str]] = {}
    for entry in sdoc["clauses"]:
        for t in entry["tests"]:
            declared.setdefault(t["nodeid"], set()).add(f"{entry['id']} [{entry['level']}]")
    for xml in ("serial.xml", "spread.xml"):
        props = junit_clauses(pytester.path / xml)
        for nodeid, want in declared.items():
            assert set(props[junit_key(nodeid)]) == want, (xml, nodeid)
    # The stress scenarios all ran on one worker (they start processes of their own).
    stress_workers = {
        m.group(1)
        for line in spread.stdout.lines
        if (m := _WORKER_LINE.match(line)) and "test_stress.py::" in m.group(3)
        and m.group(2) in ("PASSED", "FAILED")
    }
    ran_stress = any(
        "test_stress.py::" in t["nodeid"] and t["outcome"] in ("passed", "failed")
        for entry in xdoc["clauses"] for t in entry["tests"]
    )
    assert len(stress_workers) == (1 if ran_stress else 0), stress_workers
    # Long work first: each worker began with the stress group or the state machine
    # (plugin/distribution.py), not with a millisecond check or a property check.
    first: dict[str, str] = {}
    for line in spread.stdout.lines:
        if (m := _WORKER_LINE.match(line)):
            first.setdefault(m.group(1), m.group(3))
    assert first and all(
        "test_stress.py::" in nodeid or "test_stateful.py::" in nodeid for nodeid in first.values()
    ), first
    return xdoc


#: CI compares the two runs on memory (no shared store) and SQLite (every XP clause); the
#: same comparison on jsonfile, PostgreSQL and MariaDB (about 500 s of CPU together) runs
#: under ``-m full_evidence``. CI still runs those stores' whole gate serially
#: (test_reference_stores.py) and the Postgres one through PgBouncer (.ci/run).
_FULL = pytest.mark.full_evidence


@pytest.mark.parametrize("module", ["memory", "sqlite", pytest.param("jsonfile", marks=_FULL)])
def test_two_workers_give_the_serial_report(pytester: pytest.Pytester, module: str) -> None:
    doc = check_same_report(pytester, f"reference_stores.{module}:make_store")
    assert doc["summary"]["MUST"]["FAIL"] == 0
    if module == "sqlite":  # the only one with a shared store: the XP clauses ran
        assert doc["run"]["gate_passed"] is True
        for cid, c in CLAUSES.items():
            # (No fault run requested: the fault clauses are left out, see test_fault_gate.)
            if c.scope is Scope.CROSS_PROCESS and cid not in FAULT_MODES_NEEDED:
                assert next(e for e in doc["clauses"] if e["id"] == cid)["outcome"] == "PASS"


@_FULL
@pytest.mark.postgres
def test_two_workers_give_the_serial_report_on_postgres(
    pytester: pytest.Pytester, postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHONGMING_TEST_POSTGRES", postgres_dsn)
    check_same_report(pytester, "reference_stores.postgres:make_store")


@_FULL
@pytest.mark.mariadb
def test_two_workers_give_the_serial_report_on_mariadb(
    pytester: pytest.Pytester, mariadb_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHONGMING_TEST_MARIADB", mariadb_dsn)
    doc = check_same_report(pytester, "reference_stores.mariadb:make_store")
    assert doc["run"]["gate_passed"] is True  # every XP clause PASS under -n 2 too


def test_deselection_under_workers_is_still_partial(pytester: pytest.Pytester) -> None:
    serial, sdoc, spread, xdoc = run_both(
        pytester, "--chongming-store=reference_stores.memory:make_store", "-k", "prune",
    )
    assert serial.ret == 0 and spread.ret == 0, spread.stdout.str()
    assert xdoc["run"]["partial"] is True
    assert any("deselected" in reason for reason in xdoc["run"]["partial_reasons"])
    assert verdict_facts(xdoc) == verdict_facts(sdoc)


def test_a_failure_under_workers_keeps_its_blame_and_fails_the_gate(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        leaky="""
        from reference_stores.memory import InMemoryTaskStore

        class Leaky(InMemoryTaskStore):
            def counts(self):
                result = super().counts()
                result.pop(next(iter(result)))
                return result

        def make_store():
            return Leaky()
        """
    )
    serial, sdoc, spread, xdoc = run_both(
        pytester, "--chongming-store=leaky:make_store", "--chongming-gate=must", "-k", "counts",
    )
    assert serial.ret == spread.ret == pytest.ExitCode.TESTS_FAILED
    assert xdoc["run"]["gate_passed"] is False
    assert next(e for e in xdoc["clauses"] if e["id"] == "COUNTS-ALL-KEYS")["outcome"] == "FAIL"
    assert verdict_facts(xdoc) == verdict_facts(sdoc)
    # Blames and hypothesis details (seeds, falsifying examples: the ci profile is
    # derandomized) travel from the worker unchanged.
    serial_failed, spread_failed = (
        {
            t["nodeid"]: (bool(t["message"]), t["blames"], t["hypothesis"])
            for e in doc["clauses"] for t in e["tests"] if t["outcome"] == "failed"
        }
        for doc in (sdoc, xdoc)
    )
    assert serial_failed
    assert spread_failed == serial_failed
