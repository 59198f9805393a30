"""Multi-process stress harness: the cross-process clauses (``XP-*``) one connection cannot see.

A backend shares one store location across processes through
``make_shared_store()``, which returns an *opener* (see docs/stress.md).
``run_scenario(name, opener, profile)`` runs one scenario in spawned worker
processes and returns a ``ScenarioResult`` with the anomalies it found;
``StressContract`` wraps every scenario as a test method.

Layout: ``scenarios/<name>.py`` -- one per scenario: its worker roles, setup
and verdict, registered with the clause it proves; ``harness`` -- spawning,
barrier, deadlines, logs; ``runner`` -- one scenario run to a result;
``records`` -- what workers write and log; ``stress_profiles`` -- how hard a
run pushes; ``contract`` -- the tests generated from the registry;
``diagnosis`` -- what a deadline report says; ``contention`` -- lock failures
told apart from other errors.
"""

from __future__ import annotations

from .contract import StressContract
from .harness import Anomaly, Opener
from .integrity import sqlite_integrity, sqlite_opener_integrity
from .runner import IntegrityCheck, ScenarioResult, run_all, run_scenario
from .scenarios import SCENARIOS, Scenario
from .stress_profiles import DEFAULT_PROFILE, PROFILES, StressProfile, get_profile

__all__ = [
    "DEFAULT_PROFILE",
    "PROFILES",
    "SCENARIOS",
    "Anomaly",
    "IntegrityCheck",
    "Opener",
    "Scenario",
    "ScenarioResult",
    "StressContract",
    "StressProfile",
    "get_profile",
    "run_all",
    "run_scenario",
    "sqlite_integrity",
    "sqlite_opener_integrity",
]
