"""Each reference store passes the packaged suite through the plugin, from a foreign directory."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from plugin_helpers import clause, load_report, run, table_outcome

import reference_stores
from chongming_conformance import CATALOGUE_VERSION, CLAUSES, Scope, __version__
from chongming_conformance.attest import verify_statement
from chongming_conformance.attest.intoto import statement_problems
from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.protocol.clauses import FAULT_MODES_NEEDED
from chongming_conformance.suite import SUITE_DIR, suite_files

CONTRACT_TESTS = len([name for name in dir(StoreContract) if name.startswith("test_")])
#: The clauses only a fault run judges, and those a store without a network cannot meet.
FAULT_CLAUSES = sorted(FAULT_MODES_NEEDED)
NO_NETWORK = {cid for cid, mode in FAULT_MODES_NEEDED.items() if mode == "network"}
#: Contract tests that skip outside the thorough profile (PRUNE-LARGE writes 100,000 tasks).
THOROUGH_ONLY = len([name for name in dir(StoreContract) if name.startswith("test_prune_large")])


def stress_wired() -> bool:
    """Whether the packaged suite includes the multi-process stress scenarios."""
    return any("chongming_conformance.stress" in f.read_text() for f in suite_files())


@pytest.mark.parametrize("module", ["memory", "sqlite", "jsonfile"])
def test_reference_store_is_green_with_clause_table(pytester: pytest.Pytester, module: str) -> None:
    spec = f"reference_stores.{module}:make_store"
    # SQLite under the fault run too: it declares no network, so pauses only. Its green
    # must gate also writes the attestation and the badge (checked at the end).
    extra = ["--chongming-faults=network", "--chongming-gate=must",
             "--chongming-attest=out/statement.json",
             "--chongming-badge=out/badge.json"] if module == "sqlite" else []
    result = run(pytester, f"--chongming-store={spec}", "--chongming-report=out/report.json",
                 *extra)
    assert result.ret == 0, result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= CONTRACT_TESTS
    assert "failed" not in outcomes and "error" not in outcomes
    out = result.stdout.str()
    assert f"chongming conformance: {spec}" in out
    for cid, c in CLAUSES.items():
        got = table_outcome(out, cid)
        if cid == "PRUNE-LARGE":
            # 100,000 tasks: checked under the thorough profile only, never green here.
            assert got == "NOT VERIFIED", cid
        elif c.scope in (Scope.CONTRACT, Scope.CONTROLLER):
            assert got == "PASS", cid
        elif c.scope is Scope.REVIEW:
            assert got == "NOT VERIFIED", cid
        elif module == "sqlite" and cid in NO_NETWORK:
            assert got == "UNSUPPORTED", cid  # declared: a file has no network to break
        elif module == "sqlite" and cid == "XP-FAULT-DURABILITY":
            assert got == "NOT VERIFIED", cid  # needs --chongming-faults=deployment
        elif module == "sqlite" and stress_wired():
            assert got == "PASS", cid  # the stress scenarios ran on make_shared_store
        else:
            # memory cannot be shared; jsonfile is one-process only: never PASS.
            assert got in ("NOT VERIFIED", "UNSUPPORTED"), cid
    # Node ids name the suite file even though it lives outside this directory.
    doc = load_report(pytester.path / "out" / "report.json")
    assert doc["kit_version"] == __version__
    assert doc["catalogue_version"] == CATALOGUE_VERSION
    assert doc["store"]["spec"] == spec
    assert doc["run"]["partial"] is False
    assert doc["run"]["pytest_exit_status"] == 0
    entry = clause(doc, "SAVE-KEEPS-LEASE")
    assert entry["outcome"] == "PASS"
    assert {t["outcome"] for t in entry["tests"]} == {"passed"}
    assert all(t["nodeid"].startswith("chongming_conformance/suite/test_") for t in entry["tests"])
    assert any(
        t["nodeid"].startswith("chongming_conformance/suite/test_contract.py::")
        for t in entry["tests"]
    )
    assert all(t["duration_s"] >= 0 for t in entry["tests"])
    if module == "sqlite":
        # make_shared_store is found next to make_store and used for the XP clauses.
        result.stdout.fnmatch_lines(
            ["chongming: shared store reference_stores.sqlite:make_shared_store (found *"]
        )
        assert doc["store"]["shared_spec"] == "reference_stores.sqlite:make_shared_store"
        expected = "PASS" if stress_wired() else "NOT VERIFIED"
        for cid, c in CLAUSES.items():
            if c.scope is Scope.CROSS_PROCESS and cid not in NO_NETWORK \
                    and cid != "XP-FAULT-DURABILITY":
                assert clause(doc, cid)["outcome"] == expected, cid
        assert doc["run"]["stress_profile"]["faults"] == "network"
        _attestation_verifies_until_the_store_changes(pytester.path / "out", doc)
    elif module == "memory":
        # No fault run was requested: the fault clauses are left out, and the summary says so.
        assert "fault clause(s) (XP-FAULT-SAFETY, XP-FAULT-RECOVERY, XP-FAULT-NO-HANG" in out
        assert not any(clause(doc, cid)["gated"] for cid in FAULT_CLAUSES)
    else:  # jsonfile declares cross_process unsupported: settled, nothing left to say
        assert all(clause(doc, cid)["outcome"] == "UNSUPPORTED" for cid in FAULT_CLAUSES)


def _attestation_verifies_until_the_store_changes(out: Path, doc: dict[str, Any]) -> None:
    """The green gate's attestation: ``verify`` accepts it on this install and rejects it
    once one byte of the store's code differs (a copy of reference_stores, changed, found
    first on PYTHONPATH by a fresh ``chongming-conformance verify``)."""
    statement = json.loads((out / "statement.json").read_text(encoding="utf-8"))
    assert statement["predicate"]["result"] == "PASSED"
    assert statement_problems(statement) == []
    assert verify_statement(statement) is None
    badge = json.loads((out / "badge.json").read_text(encoding="utf-8"))
    assert badge["message"] == f"conforms · catalogue {CATALOGUE_VERSION} · kit {__version__}"
    copy = out / "site" / "reference_stores"
    shutil.copytree(Path(reference_stores.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__"))

    def verify() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "chongming_conformance.commands.cli", "verify",
             str(out / "statement.json")],
            env={**os.environ, "PYTHONPATH": str(out / "site")}, capture_output=True,
            text=True, timeout=120, check=False,
        )

    same = verify()
    assert same.returncode == 0, same.stderr
    sqlite = copy / "sqlite.py"
    sqlite.write_bytes(sqlite.read_bytes() + b" ")
    changed = verify()
    assert changed.returncode == 1
    assert "reference_stores/sqlite.py changed" in changed.stderr, changed.stderr
    assert doc["verdict"].startswith("conforms")


@pytest.mark.postgres
@pytest.mark.usefixtures("postgres_dsn")  # visible skip, or a failure when required
def test_postgres_store_is_green_under_network_faults(pytester: pytest.Pytester) -> None:
    """The whole suite and the fault run (resets, blackholes, latency, cut replies, the
    server down, pauses) through the plugin: the must gate passes, every fault clause PASS."""
    result = run(pytester, "--chongming-store=reference_stores.postgres:make_store",
                 "--chongming-faults=network", "--chongming-gate=must",
                 "--chongming-report=out/report.json")
    assert result.ret == 0, result.stdout.str()
    out = result.stdout.str()
    assert table_outcome(out, "QUERY-TAG-EXACT") == "PASS"
    doc = load_report(pytester.path / "out" / "report.json")
    assert doc["run"]["gate_passed"] is True
    for cid in FAULT_CLAUSES:
        if cid == "XP-FAULT-DURABILITY":  # needs --chongming-faults=deployment: left out
            assert clause(doc, cid)["outcome"] == "NOT VERIFIED" and not clause(doc, cid)["gated"]
            continue
        assert clause(doc, cid)["outcome"] == "PASS", (cid, clause(doc, cid)["note"])
        assert clause(doc, cid)["gated"] is True
    # The store's chongming_deployment() names the server in every report's topology line.
    assert doc["run"]["topology"].startswith("faults network; deployment topology PostgreSQL ")
    assert "cross-process verdicts ran on: faults network; deployment topology PostgreSQL" in out


@pytest.mark.mariadb
def test_mariadb_store_is_green_with_every_cross_process_clause_under_network_faults(
    pytester: pytest.Pytester, mariadb_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole packaged suite on MariaDB, as a third party runs it: the gate, XP and XP-CTRL."""
    monkeypatch.setenv("CHONGMING_TEST_MARIADB", mariadb_dsn)
    spec = "reference_stores.mariadb:make_store"
    result = run(
        pytester, f"--chongming-store={spec}", "--chongming-gate=must",
        "--chongming-faults=network", "--chongming-report=out/report.json",
    )
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        ["chongming: shared store reference_stores.mariadb:make_shared_store (found *"]
    )
    doc = load_report(pytester.path / "out" / "report.json")
    assert doc["run"]["partial"] is False
    assert doc["run"]["gate_passed"] is True
    for cid, c in CLAUSES.items():
        # PRUNE-LARGE writes 100,000 tasks: it runs under the thorough profile only.
        # Durability needs --chongming-faults=deployment: left out of this run's gate.
        unchecked = c.scope is Scope.REVIEW or cid in ("PRUNE-LARGE", "XP-FAULT-DURABILITY")
        expected = "NOT VERIFIED" if unchecked else "PASS"
        assert clause(doc, cid)["outcome"] == expected, cid
    assert {c["id"] for c in doc["clauses"] if c["scope"] == "cross_process"} >= {
        "XP-MIXED-WORKLOAD", "XP-CTRL-STOP", "XP-CTRL-NO-STARVATION", "XP-CTRL-KILLED-HOLDER",
    }


def test_without_a_store_the_plugin_is_invisible(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine="def test_one():\n    assert 1 + 1 == 2\n")
    result = run(pytester)
    assert result.ret == 0
    result.assert_outcomes(passed=1)
    assert "chongming" not in result.stdout.str().replace("chongming-conformance-", "")


def test_suite_runs_alongside_the_users_own_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine="def test_mine():\n    assert 'io' != 'ios'\n")
    result = run(
        pytester, "--chongming-store=reference_stores.memory:make_store", "-v",
        "-k", "test_mine or TestStoreContract",
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["test_mine.py::test_mine PASSED*"])
    result.stdout.fnmatch_lines(["chongming_conformance/suite/test_contract.py::* PASSED*"])
    assert result.parseoutcomes()["passed"] == CONTRACT_TESTS - THOROUGH_ONLY + 1
    assert result.parseoutcomes()["skipped"] == THOROUGH_ONLY == 1


def test_suite_only_skips_the_users_tests(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mine="def test_mine():\n    raise AssertionError('must not run')\n")
    result = run(
        pytester, "--chongming-store=reference_stores.memory:make_store",
        "--chongming-suite-only", "-k", "TestStoreContract or test_mine",
    )
    assert result.ret == 0
    assert result.parseoutcomes()["passed"] == CONTRACT_TESTS - THOROUGH_ONLY


def test_store_from_env_and_ini(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHONGMING_STORE", "reference_stores.memory:make_store")
    result = run(pytester, "-k", "protocol_methods")
    result.stdout.fnmatch_lines(["*store reference_stores.memory:make_store from environment*"])
    monkeypatch.delenv("CHONGMING_STORE")
    pytester.makeini("[pytest]\nchongming_store = reference_stores.memory:make_store\n")
    result = run(pytester, "-k", "protocol_methods")
    result.stdout.fnmatch_lines(["*from ini option chongming_store*"])
    assert result.ret == 0


def test_suite_inside_an_ignored_directory_of_the_argument_is_still_collected(
    pytester: pytest.Pytester,
) -> None:
    """E.g. `pytest` in a project whose `.venv` (ignored by pytest) holds the installed kit.

    Simulated with the kit's own location: the argument contains the suite, and
    norecursedirs hides the package directory on the way to it.
    """
    package_dir = SUITE_DIR.parent
    result = run(
        pytester, "--chongming-store=reference_stores.memory:make_store",
        str(package_dir.parent), "-o", f"norecursedirs={package_dir.name}",
        "--co", "-q",
    )
    assert result.ret == 0, result.stdout.str()
    collected = [line for line in result.stdout.lines if "::TestStoreContract::" in line]
    assert len(collected) >= CONTRACT_TESTS
    # Only the suite came out of the ignored directory, nothing else in it.
    assert all("/suite/test_" in line for line in result.stdout.lines if "::" in line)
