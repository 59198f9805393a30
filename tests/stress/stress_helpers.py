"""Helpers for the stress tests: run the single-connection contract programmatically,
and run a scenario against a ``make_shared_store`` factory."""

from __future__ import annotations

import contextlib
import unittest
from collections.abc import Callable
from typing import Any

from chongming_conformance.checking.contract import StoreContract
from chongming_conformance.seam.factory import enter_opener
from chongming_conformance.stress import ScenarioResult, StressProfile, run_scenario

CONTRACT_TESTS = sorted(n for n in dir(StoreContract) if n.startswith("test_"))


def contract_failures(make_store: Callable[[], Any]) -> dict[str, str]:
    """Every StoreContract test the store fails, with its message ('{}' if it passes all)."""

    class Contract(StoreContract):
        def make_store(self) -> Any:
            return make_store()

    failures: dict[str, str] = {}
    for name in CONTRACT_TESTS:
        case = Contract()
        case.setup_method()
        try:
            getattr(case, name)()
        except unittest.SkipTest:
            pass  # a check that did not run (PRUNE-LARGE outside the thorough profile)
        except Exception as exc:  # AssertionError or whatever the store raised
            failures[name] = f"{type(exc).__name__}: {exc}"
        finally:
            case.teardown_method()
    return failures


def run_shared(make_shared_store: Callable[[], Any], scenario: str,
               profile: StressProfile | str, **kwargs: Any) -> ScenarioResult:
    """One scenario on a fresh shared location from ``make_shared_store``."""
    with contextlib.ExitStack() as stack:
        opener = enter_opener(make_shared_store, stack)
        return run_scenario(scenario, opener, profile, keep_logs=False, **kwargs)


def until_caught(make_shared_store: Callable[[], Any], scenario: str,
                 profile: StressProfile | str, attempts: int) -> tuple[int, ScenarioResult]:
    """Run up to ``attempts`` times until the scenario reports anomalies; (attempt, result)."""
    result = run_shared(make_shared_store, scenario, profile)
    for attempt in range(1, attempts + 1):
        if result.anomalies or attempt == attempts:
            return attempt, result
        result = run_shared(make_shared_store, scenario, profile)
    return attempts, result
