"""Through the plugin, as a backend author runs it: the CTRL rows of the clause table.

* SQLite (``make_shared_store`` next to ``make_store``): every CTRL and XP-CTRL
  clause PASS;
* the in-memory store (cannot be shared): CTRL PASS, XP-CTRL NOT VERIFIED --
  never PASS;
* a store declaring ``cross_process`` unsupported: XP-CTRL UNSUPPORTED.

Only the controller suite module runs (``-k``), to keep these runs short.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "plugin"))
from plugin_helpers import clause, load_report, run, table_outcome

from chongming_conformance import CLAUSES, Scope

CTRL = sorted(c.id for c in CLAUSES.values() if c.scope is Scope.CONTROLLER)
XP_CTRL = sorted(c for c in CLAUSES if c.startswith("XP-CTRL-"))
ONLY_CONTROLLER = ("--chongming-suite-only", "-k", "TestStoreUnderAController")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CHONGMING_STORE", "CHONGMING_SHARED_STORE", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(name, raising=False)


def outcomes(pytester: pytest.Pytester, spec: str) -> tuple[str, dict[str, str]]:
    result = run(pytester, f"--chongming-store={spec}", "--chongming-report=r.json",
                 *ONLY_CONTROLLER)
    out = result.stdout.str()
    assert result.ret == 0, out
    doc = load_report(pytester.path / "r.json")
    got = {}
    for cid in CTRL + XP_CTRL:
        got[cid] = table_outcome(out, cid)
        assert clause(doc, cid)["outcome"] == got[cid], cid
    return out, got


def test_sqlite_passes_every_controller_clause_across_processes_too(
    pytester: pytest.Pytester,
) -> None:
    out, got = outcomes(pytester, "reference_stores.sqlite:make_store")
    assert got == {cid: "PASS" for cid in CTRL + XP_CTRL}, got
    assert "shared store reference_stores.sqlite:make_shared_store" in out


def test_memory_store_cross_process_controller_clauses_are_not_verified(
    pytester: pytest.Pytester,
) -> None:
    _, got = outcomes(pytester, "reference_stores.memory:make_store")
    assert {got[c] for c in CTRL} == {"PASS"}, got
    assert {got[c] for c in XP_CTRL} == {"NOT VERIFIED"}, got


def test_declared_single_process_store_gets_unsupported(pytester: pytest.Pytester) -> None:
    _, got = outcomes(pytester, "reference_stores.jsonfile:make_store")
    assert {got[c] for c in CTRL} == {"PASS"}, got
    assert {got[c] for c in XP_CTRL} == {"UNSUPPORTED"}, got
