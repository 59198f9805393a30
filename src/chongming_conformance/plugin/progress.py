"""Progress lines for the long phases, so a run is never silent for minutes.

A stress scenario starts its own processes and runs for tens of seconds; a
``thorough`` hypothesis profile makes each property test long. pytest prints
one character per finished test, which leaves the terminal still for the whole
phase. This module announces each such test when it starts and says how long
it took when it ends, in pytest's own ``write_line`` style::

    chongming: stress 4/7 test_xp_claim_exclusive__claim_race (ci: 4 processes, 30 rounds, ...)
    chongming: stress 4/7 passed in 12.4 s

It works on the process that owns the terminal: the serial run, or xdist's
controller (which receives the workers' ``logstart`` and reports).

Inside a long step, code calls :func:`chongming_conformance.seam.progress.note`: the
stress harness every few seconds (``stress save_race: round 3/8, 9 s of at most
60 s``), the Postgres reference store while it installs a schema. This module
installs the reporter that prints those notes as ``chongming:`` lines, with output
capture paused for the line. Under xdist the notes of the workers are dropped (a
worker has no terminal); the start and end lines above still appear.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from ..seam.progress import reporting
from .itemdata import is_fault_nodeid, is_stress_nodeid, serial_nodeid

__all__ = ["Progress"]

_HYPOTHESIS_FILES = ("suite/test_properties.py::", "suite/test_stateful.py::")


def _is_long_hypothesis_nodeid(nodeid: str) -> bool:
    return any(f in nodeid for f in _HYPOTHESIS_FILES)


class Progress:
    """Hooks announcing stress scenarios (and, under a thorough profile, hypothesis tests)."""

    def __init__(self, config: pytest.Config, stress_profile: Any, thorough: bool) -> None:
        self.config = config
        #: The StressProfile the scenarios run with (None: no shared store, they are skipped).
        self.stress_profile = stress_profile
        self.thorough = thorough
        self.planned: dict[str, int] = {"stress": 0, "hypothesis": 0}
        self.started: dict[str, int] = {"stress": 0, "hypothesis": 0}
        self.numbers: dict[str, tuple[str, int]] = {}
        self._notes = contextlib.ExitStack()

    def _phase(self, nodeid: str) -> str | None:
        if self.stress_profile is not None and is_stress_nodeid(nodeid):
            if is_fault_nodeid(nodeid) and getattr(self.stress_profile, "faults", "none") == "none":
                return None  # not requested: it runs nothing, no line would say anything
            return "stress"
        if self.thorough and _is_long_hypothesis_nodeid(nodeid):
            return "hypothesis"
        return None

    def _plan(self, nodeids: list[str]) -> None:
        for phase in self.planned:
            self.planned[phase] = sum(1 for n in nodeids if self._phase(n) == phase)

    # -- notes from inside a long step (chongming_conformance.seam.progress) ------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # Only the process that owns the terminal shows notes: an xdist worker has none.
        if not hasattr(self.config, "workerinput"):
            self._notes.enter_context(reporting(self._note))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._notes.close()

    def _note(self, text: str) -> None:
        """Write a note now, in the middle of a test: output capture is paused for it."""
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        paused = capman.global_and_fixture_disabled() if capman is not None else None
        with paused if paused is not None else contextlib.nullcontext():
            self._write(text)

    def _write(self, text: str) -> None:
        tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if tr is None:
            return
        # pytest's dots may have left the cursor mid-line (ensure_newline only knows
        # about the file-name prefix it wrote itself).
        writer = getattr(tr, "_tw", None)
        if writer is not None and writer.width_of_current_line:
            tr.write("\n")
        tr.write_line(f"chongming: {text}")

    # -- how many there will be -----------------------------------------------------------
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        self._plan([item.nodeid for item in items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self._plan(list(ids))

    # -- each one ---------------------------------------------------------------------------
    def pytest_runtest_logstart(self, nodeid: str, location: tuple[str, int | None, str]) -> None:
        phase = self._phase(nodeid)
        if phase is None:
            return
        self.started[phase] += 1
        number = self.started[phase]
        self.numbers[serial_nodeid(nodeid)] = (phase, number)
        name = serial_nodeid(nodeid).rsplit("::", 1)[-1]
        detail = ""
        if phase == "stress" and "close_isolated" in name:
            # No workers: it takes milliseconds, and should not read like a skip.
            detail = " (in this process: instances on one location, no worker processes)"
        elif phase == "stress":
            p = self.stress_profile
            faults = (f", faults {p.faults}, seed {p.seed}, at least {p.fault_seconds:g} s"
                      if is_fault_nodeid(nodeid) else "")
            detail = (f" ({p.name}: {p.processes} processes, {p.rounds} rounds, "
                      f"{p.deadline:g} s bound{faults})")
        total = max(self.planned[phase], number)
        self._write(f"{phase} {number}/{total} {name}{detail}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        found = self.numbers.get(serial_nodeid(report.nodeid))
        # The call's end, or a setup that did not get as far (an error, a skip).
        if found is None or not (report.when == "call" or
                                 (report.when == "setup" and not report.passed)):
            return
        phase, number = found
        total = max(self.planned[phase], number)
        took = (f"{report.duration:.1f} s" if report.duration >= 1 else
                f"{report.duration * 1000:.0f} ms")
        # A set-up that failed is pytest's ERROR: the check never ran (its store or shared
        # location could not be opened), which is not a failure of the store.
        outcome = "error" if report.when == "setup" and report.failed else report.outcome
        self._write(f"{phase} {number}/{total} {outcome} in {took}")
