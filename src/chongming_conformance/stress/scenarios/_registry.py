"""The scenario registry: what a scenario is, and the one table of them.

A scenario proves exactly one cross-process clause. It is declared once, in
its own module, by ``register(Scenario(...))``; ``StressContract`` makes one
test per registered scenario from this table, and ``run_scenario`` looks
scenarios up in it by name. Nothing else lists the scenarios, so adding one
is adding its module.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ...protocol.clauses import CLAUSES, Scope
from ..harness import Harness

__all__ = ["SCENARIOS", "Scenario", "register", "sort_by_catalogue"]


@dataclass(frozen=True, slots=True)
class Scenario:
    """One stress scenario, registered with the clause it proves.

    ``name`` is what ``run_scenario`` and ``--scenario`` take; ``clause`` the
    ``XP-*`` clause a pass proves; ``rule`` the behaviour the generated test is
    named after (``test_<clause>__<rule>``); ``run`` does the parent-side
    setup, starts the workers in their roles and records the verdict's
    anomalies on the harness -- the three parts live in the scenario's module.

    ``also`` are further clauses the same run judges (the fault run judges safety,
    recovery and no-hang at once); its anomalies then name their clause
    (``Harness.anomaly(..., clause=...)``) so a failure is blamed on that one alone.
    ``faults``: the scenario runs only when faults are requested (``StressProfile.faults``)
    and gets the network seam (``stress.faults``). ``aims``: the scenario injects no
    fault but, when network faults are requested, gets the seam too, to *aim* what it does
    anyway -- its crashes between two requests of a call, latency inside a call
    (``faults.aim``); without the seam it runs as before.
    """

    name: str
    clause: str
    rule: str
    run: Callable[[Harness], None]
    also: tuple[str, ...] = ()
    faults: bool = False
    aims: bool = False

    @property
    def clauses(self) -> tuple[str, ...]:
        return (self.clause, *self.also)

    @property
    def test_name(self) -> str:
        """The ``StressContract`` method that runs it: the clause, then the rule."""
        return f"test_{self.clause.lower().replace('-', '_')}__{self.rule}"

    def __call__(self, h: Harness) -> None:
        """Run it on a harness (a scenario used to be a bare ``scenario(h)`` function)."""
        self.run(h)


#: Every registered scenario by name, in the clause catalogue's order once loaded.
SCENARIOS: dict[str, Scenario] = {}


def register(scenario: Scenario) -> Scenario:
    """Add ``scenario`` to ``SCENARIOS``; refuse a reused name or a clause it cannot prove.

    The checks run at import time, so a typo cannot produce a scenario that
    silently proves nothing.
    """
    for cid in scenario.clauses:
        clause = CLAUSES.get(cid)
        if clause is None:
            raise KeyError(f"scenario {scenario.name!r}: unknown clause id {cid!r}")
        if clause.scope is not Scope.CROSS_PROCESS:
            raise ValueError(f"scenario {scenario.name!r}: {cid} is not a cross-process "
                             "clause; only XP-* clauses need the stress harness")
    if scenario.name in SCENARIOS and SCENARIOS[scenario.name] is not scenario:
        raise ValueError(f"two stress scenarios are named {scenario.name!r}")
    SCENARIOS[scenario.name] = scenario
    return scenario


def sort_by_catalogue() -> None:
    """Order ``SCENARIOS`` (in place) by the clause catalogue, then by name.

    Discovery order is the file system's; the catalogue's is the one the
    report and the docs use, so the tests and ``run_all`` follow it.
    """
    position = {cid: i for i, cid in enumerate(CLAUSES)}
    ordered = sorted(SCENARIOS.values(), key=lambda s: (position[s.clause], s.name))
    SCENARIOS.clear()
    SCENARIOS.update((s.name, s) for s in ordered)
