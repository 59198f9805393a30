"""``StressContract``: the cross-process clauses as test methods, one per scenario.

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

No pytest import: the assertions are plain ``assert``-style ``AssertionError``s
carrying the anomalies found.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from ..clauses import checks
from .harness import Opener
from .profile import StressProfile, get_profile
from .runner import ScenarioResult, enter_shared, run_scenario

__all__ = ["StressContract"]


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
        opener = enter_shared(self.make_shared_store, self._stress_stack,
                              origin=f"{type(self).__name__}.make_shared_store()")
        return run_scenario(scenario, opener, get_profile(self.stress_profile),
                            integrity=self.check_integrity)

    def assert_stress(self, scenario: str) -> ScenarioResult:
        result = self.run_stress(scenario)
        if not result.ok:
            raise AssertionError(result.report())
        return result

    # -- the scenarios --------------------------------------------------------------------
    @checks("XP-SAVE-ATOMIC")
    def test_xp_save_atomic__save_race(self) -> None:
        self.assert_stress("save_race")

    @checks("XP-CLAIM-EXCLUSIVE")
    def test_xp_claim_exclusive__claim_race(self) -> None:
        self.assert_stress("claim_race")

    @checks("XP-CLAIM-CRASH-RECOVERY")
    def test_xp_claim_crash_recovery__killed_holder(self) -> None:
        self.assert_stress("crash_recovery")

    @checks("XP-TOUCH-SAVE")
    def test_xp_touch_save__touch_while_saving(self) -> None:
        self.assert_stress("touch_save")

    @checks("XP-APPEND-REPLAY")
    def test_xp_append_replay__concurrent_replay(self) -> None:
        self.assert_stress("append_replay")

    @checks("XP-RELEASE-NO-STARVATION")
    def test_xp_release_no_starvation__owner_gets_its_command(self) -> None:
        self.assert_stress("release_starvation")

    @checks("XP-SHARED-VISIBILITY")
    def test_xp_shared_visibility__next_read_sees_it(self) -> None:
        self.assert_stress("shared_visibility")
