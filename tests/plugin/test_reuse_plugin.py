"""The reset_store seam through the plugin, as a third party runs it: found next to
make_store, proven before any test, recorded in the report; a reset that does not empty
the store is one usage error (exit 4), never a verdict."""

from __future__ import annotations

import pytest
from plugin_helpers import load_report, run

STORES = '''
from reference_stores.memory import InMemoryTaskStore

calls = {"reset": 0}


def make_store():
    return InMemoryTaskStore()


def reset_store(store):
    calls["reset"] += 1
    store._tasks.clear()
    store._history.clear()
    store._commands.clear()
'''

LEAKY_FROM_THE_START = '''
from reference_stores.memory import InMemoryTaskStore


def make_store():
    return InMemoryTaskStore()


def reset_store(store):
    store._tasks.clear()  # forgets history and commands
'''

LEAKY_LATER = '''
from reference_stores.memory import InMemoryTaskStore

calls = {"reset": 0}


def make_store():
    return InMemoryTaskStore()


def reset_store(store):
    calls["reset"] += 1
    if calls["reset"] < 20:  # correct at first (the preflight passes), then leaks tasks
        store._tasks.clear()
    store._history.clear()
    store._commands.clear()
'''

QUICK = ("--chongming-profile=quick", "--hypothesis-seed=0", "--chongming-suite-only")


def test_a_working_reset_is_used_and_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(stores_ok=STORES)
    result = run(pytester, "--chongming-store=stores_ok:make_store", *QUICK,
                 "--chongming-report=report.json")
    assert result.ret == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["chongming: store reuse: stores_ok:reset_store empties one *"])
    reuse = load_report(pytester.path / "report.json")["run"]["store_reuse"]
    assert reuse["reset_store"] == "stores_ok:reset_store"
    # One store per process, plus one for each check that closes its store.
    assert 1 <= reuse["stores_opened"] < 40, reuse
    assert reuse["reuses"] > 5 * reuse["stores_opened"], reuse


def test_no_reuse_opens_a_new_store_every_time(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(stores_ok=STORES)
    result = run(pytester, "--chongming-store=stores_ok:make_store", *QUICK,
                 "--chongming-no-reuse", "--chongming-report=report.json")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert load_report(pytester.path / "report.json")["run"]["store_reuse"] is None


def test_a_reset_that_leaves_rows_is_refused_before_any_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(stores_leaky=LEAKY_FROM_THE_START)
    result = run(pytester, "--chongming-store=stores_leaky:make_store", *QUICK)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()[-3000:]
    err = result.stderr.str()
    assert "stores_leaky:reset_store(store) left: " in err, err
    assert "history('chongming-reset-probe') still returns rows" in err, err
    assert "passed" not in result.stdout.str()


def test_a_reset_that_stops_emptying_mid_run_stops_the_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(stores_late=LEAKY_LATER)
    result = run(pytester, "--chongming-store=stores_late:make_store", *QUICK,
                 "--chongming-gate=must", "--chongming-report=report.json")
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "reset_store(store) did not empty the store: query() returns" in out, out[-3000:]
    doc = load_report(pytester.path / "report.json")
    assert doc["run"]["partial"] is True
    assert any("stopped by a usage error" in r for r in doc["run"]["partial_reasons"])
    assert doc["run"]["gate_passed"] is False
    assert not [c["id"] for c in doc["clauses"] if c["outcome"] == "FAIL"], (
        "a broken reset_store must not be blamed on the store's clauses"
    )
