"""The stress scenarios: one module each, found and registered on import.

Every public module in this package (a name without a leading underscore) is
one scenario: its worker roles (module-level functions, because the spawn
context pickles them by reference), its parent-side setup, and its verdict
on the workers' logs, ending with ``register(Scenario(...))`` naming the one
``XP-*`` clause it proves. Importing the package imports them all, so adding
a scenario is adding a file here; ``StressContract`` grows a test for it.

Every verdict is made on the logical ``now`` timeline or on counts, never on
wall-clock timing, so a correct store cannot produce a false anomaly on a
slow machine; the barrier makes the races real. The one exception is the fault
run's recovery and no-hang verdicts (``fault_workload``): a hang *is* a duration,
so they use wall-clock bounds, seconds long where a healthy call takes
milliseconds.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._registry import SCENARIOS, Scenario, register, sort_by_catalogue

__all__ = ["SCENARIOS", "Scenario", "register"]


def _import_every_scenario() -> None:
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
    sort_by_catalogue()


_import_every_scenario()
