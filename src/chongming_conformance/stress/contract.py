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
carrying the anomalies found. A scenario whose verdict could not be reached (the
linearizability checker ran out of its budget) raises :class:`NotVerified`, a
``unittest.SkipTest`` -- pytest reports the test skipped with the reason, and the
plugin's report shows the clause NOT VERIFIED with it, so the verdict is "not
proven" and a gate fails: never PASS, never FAIL.
"""

from __future__ import annotations

import contextlib
import unittest
from collections.abc import Callable, Sequence
from typing import Any

from ..faults.network import takes_network
from ..oracle.blame import blame
from ..protocol.clauses import checks, may_blame
from .evidence import keep_coverage, keep_unproven
from .harness import Opener
from .picture import keep_picture
from .runner import INTEGRITY_CLAUSES, ScenarioResult, open_location, run_scenario
from .scenarios import SCENARIOS, Scenario
from .stress_profiles import StressProfile, get_profile

__all__ = ["NotVerified", "StressContract", "scenario_test"]


class NotVerified(unittest.SkipTest):
    """A scenario ran but its verdict could not be reached; the message says why (and,
    for the linearizability checker, the budget it ran out of and where the logs are)."""


class StressContract:
    """Base class for a backend's multi-process stress tests."""

    #: A ``StressProfile`` or the name of one in ``PROFILES`` (quick, ci, thorough).
    stress_profile: StressProfile | str = "ci"
    #: Whether a scenario that judged some of its clauses and not others (a fault run
    #: short of the coverage one clause needs) passes and leaves the others to the report
    #: (``stress.evidence``): only when a report can show them NOT VERIFIED -- the
    #: plugin's. Otherwise (False, plain pytest) such a run is skipped as NOT VERIFIED
    #: whole: never a green test for a clause it did not judge.
    partial_verdicts: bool = False

    def make_shared_store(self) -> Any:
        """Set up one shared location; return/yield an opener (or a context manager giving one)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement make_shared_store() returning an opener, "
            "e.g. functools.partial(MyStore, path)"
        )

    def check_integrity(self, opener: Opener) -> Sequence[str]:
        """Store-specific integrity problems after a scenario (override; default: none)."""
        return ()

    def takes_network(self) -> bool:
        """Whether ``make_shared_store`` takes the ``network`` keyword (the seam of a fault
        run, docs/faults.md); read off its signature unless overridden."""
        return takes_network(self.make_shared_store)

    def network_absent(self) -> str | None:
        """Why the store talks to no server (override; default None: it may). A fault run
        then injects pauses only, and never asks for the ``network`` keyword."""
        return None

    def deployment(self) -> Any:
        """The store's deployment (``faults.Deployment``: its topology and the fault actions
        only it can cause, such as crashing its server), or None (default): a fault run
        with ``faults="deployment"`` then has no deployment action to take."""
        return None

    # -- lifecycle ----------------------------------------------------------------------
    def setup_method(self, method: object = None) -> None:
        """Open the shared location of the scenario ``method`` runs, when it is one of the
        generated scenario tests: in pytest's set-up phase, so a ``make_shared_store()``
        that fails -- an install cut off by a flaky network -- is an ERROR of the test,
        as pytest says of any failing set-up, and the plugin's report leaves its clause
        NOT VERIFIED ("failed in set-up"), never FAIL: nothing ran, so nothing was
        judged. (Opened in the test's body, the same failure was a FAIL of the clause.)"""
        self._stress_stack = contextlib.ExitStack()
        self._location: tuple[str, StressProfile, Opener, Any] | None = None
        name = getattr(method, "__name__", None)
        scenario = next((s.name for s in SCENARIOS.values() if s.test_name == name), None)
        if scenario is not None:
            profile = get_profile(self.stress_profile)
            opener, network = self._open_location(scenario, profile)
            self._location = (scenario, profile, opener, network)

    def teardown_method(self, method: object = None) -> None:
        stack = getattr(self, "_stress_stack", None)
        if stack is not None:
            stack.close()

    def _open_location(self, scenario: str, profile: StressProfile) -> tuple[Opener, Any]:
        if SCENARIOS[scenario].faults and profile.faults == "none":
            raise NotVerified(
                f"{scenario}: faults were not requested (--chongming-faults=network or "
                "deployment, or pause "
                "for a store with no server; python -m chongming_conformance.stress "
                "--faults network): its clauses are not judged, and left out of the gate")
        return open_location(self.make_shared_store, scenario, profile,
                             self._stress_stack, takes=self.takes_network(),
                             origin=f"{type(self).__name__}.make_shared_store()")

    def run_stress(self, scenario: str) -> ScenarioResult:
        """Run one scenario on a fresh shared location (the one ``setup_method`` opened for
        it, or one opened now); return the result."""
        if not hasattr(self, "_stress_stack"):
            self.setup_method()
        profile = get_profile(self.stress_profile)
        location = getattr(self, "_location", None)
        self._location = None
        if location is not None and location[:2] == (scenario, profile):
            opener, network = location[2], location[3]
        else:
            opener, network = self._open_location(scenario, profile)
        result = run_scenario(scenario, opener, profile, integrity=self.check_integrity,
                              network=network, network_absent=self.network_absent(),
                              deployment=self.deployment())
        if result.picture is not None:
            keep_picture(result.picture)  # for the HTML report's timeline
        if result.fault_coverage is not None:
            keep_coverage(result.fault_coverage)  # for every report's coverage matrix
        return result

    def assert_stress(self, scenario: str) -> ScenarioResult:
        result = self.run_stress(scenario)
        if result.failed:
            failure = AssertionError(result.report())
            # Each anomaly names the clause it is against: the scenario's own (a run
            # judging several names one of them), or another one -- the after-scenario
            # integrity check's findings are never the scenario's (runner.INTEGRITY).
            blame(failure, result.blamed())
            raise failure
        if result.unverified:
            raise NotVerified(result.report())
        if result.unproven:
            if not self.partial_verdicts:
                raise NotVerified(result.report())
            keep_unproven(result.unproven)
        return result


def scenario_test(scenario: Scenario) -> Callable[[StressContract], None]:
    """A test method running ``scenario`` (failing with its anomalies), marked with its clause.

    It also *may blame* the after-scenario integrity check's clauses
    (``runner.INTEGRITY_CLAUSES``: COUNTS-PER-STATUS, XP-SHARED-VISIBILITY) without
    declaring them (``clauses.may_blame``). Decision: a finding of that check FAILs its
    clause in the report -- the check did observe counts() disagreeing with query() (or a
    store a fresh connection cannot read back) -- and leaves the scenario's own clause NOT
    VERIFIED, a knock-on. Declaring them with ``checks`` instead would make every scenario
    a check of COUNTS-PER-STATUS: a scenario skipped (faults not requested, the
    linearizability checker out of budget) or failing on its own clause would leave that
    single-process clause NOT VERIFIED, and a clause the contract checks on purpose would
    hang on the stress run. A may-blame clause counts only on a failure blamed on it.
    """

    def test(self: StressContract) -> None:
        self.assert_stress(scenario.name)

    test.__name__ = scenario.test_name
    test.__qualname__ = f"{StressContract.__qualname__}.{scenario.test_name}"
    test.__doc__ = f"Scenario {scenario.name!r} proves {', '.join(scenario.clauses)}."
    return may_blame(*INTEGRITY_CLAUSES)(checks(*scenario.clauses)(test))


def _add_scenario_tests() -> None:
    for scenario in SCENARIOS.values():
        setattr(StressContract, scenario.test_name, scenario_test(scenario))


_add_scenario_tests()
