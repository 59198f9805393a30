"""``StressContract``: the cross-process clauses as test methods, one per registered scenario.

Subclass it (pytest collects the ``test_*`` methods of a ``Test*`` class) and
implement ``make_shared_store()``, which sets up ONE shared location and
returns or yields an *opener*: a picklable zero-argument callable that opens a
new, independent store on that location every time it is called::

    class TestMyStoreAcrossProcesses(StressContract):
        stress_profile = "ci"

        def make_shared_store(self):
            path = make_temp_file()
            yield functools.partial(MyStore, path)
            os.remove(path)

The test methods are not written here: one is generated for every scenario in
``scenarios.SCENARIOS``, named ``test_<clause>__<rule>`` and declaring its
clause with ``@checks`` -- the same mark every other check in the kit carries,
which is how the plugin maps results to clauses. A new scenario module
therefore gets its test (and its clause in the report) without touching this
file.

No pytest import: the assertions are plain ``assert``-style ``AssertionError``s
carrying the anomalies found.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from ..clauses import checks
from ..factory import enter_opener
from .harness import Opener
from .runner import ScenarioResult, run_scenario
from .scenarios import SCENARIOS, Scenario
from .stress_profiles import StressProfile, get_profile

__all__ = ["StressContract", "scenario_test"]


class StressContract:
    """Base class for a backend's multi-process stress tests."""

    #: A ``StressProfile`` or the name of one in ``PROFILES`` (quick, ci, thorough).
    stress_profile: StressProfile | str = "ci"

    def make_shared_store(self) -> Any:
        """Set up one shared location; return/yield an opener (or a context manager giving one)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement make_shared_store() returning an opener, "
            "e.g. functools.partial(MyStore, path)"
        )

    def check_integrity(self, opener: Opener) -> Sequence[str]:
        """Store-specific integrity problems after a scenario (override; default: none)."""
        return ()

    # -- lifecycle ----------------------------------------------------------------------
    def setup_method(self, method: object = None) -> None:
        self._stress_stack = contextlib.ExitStack()

    def teardown_method(self, method: object = None) -> None:
        stack = getattr(self, "_stress_stack", None)
        if stack is not None:
            stack.close()

    def run_stress(self, scenario: str) -> ScenarioResult:
        """Open a fresh shared location and run one scenario on it; return the result."""
        if not hasattr(self, "_stress_stack"):
            self.setup_method()
        opener = enter_opener(self.make_shared_store, self._stress_stack,
                              origin=f"{type(self).__name__}.make_shared_store()")
        return run_scenario(scenario, opener, get_profile(self.stress_profile),
                            integrity=self.check_integrity)

    def assert_stress(self, scenario: str) -> ScenarioResult:
        result = self.run_stress(scenario)
        if not result.ok:
            raise AssertionError(result.report())
        return result


def scenario_test(scenario: Scenario) -> Callable[[StressContract], None]:
    """A test method running ``scenario`` (failing with its anomalies), marked with its clause."""

    def test(self: StressContract) -> None:
        self.assert_stress(scenario.name)

    test.__name__ = scenario.test_name
    test.__qualname__ = f"{StressContract.__qualname__}.{scenario.test_name}"
    test.__doc__ = f"Scenario {scenario.name!r} proves {scenario.clause}."
    return checks(scenario.clause)(test)


def _add_scenario_tests() -> None:
    for scenario in SCENARIOS.values():
        setattr(StressContract, scenario.test_name, scenario_test(scenario))


_add_scenario_tests()
