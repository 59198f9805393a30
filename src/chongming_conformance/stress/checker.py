"""Deprecated alias: each scenario's verdict now lives in its own module, ``scenarios/<name>.py``.

Kept so that ``from chongming_conformance.stress.checker import check_claim_race``
(and the other ``check_*`` names) keeps working; new code imports ``judge``
from the scenario's module.
"""

from __future__ import annotations

from .scenarios._common import report_errors
from .scenarios.append_replay import judge as check_append
from .scenarios.claim_race import judge as check_claim_race
from .scenarios.crash_recovery import judge as check_crash
from .scenarios.release_starvation import judge as check_starvation
from .scenarios.save_race import judge as check_save_race
from .scenarios.shared_visibility import judge as check_visibility
from .scenarios.touch_save import judge as check_touch_save

__all__ = [
    "check_append",
    "check_claim_race",
    "check_crash",
    "check_save_race",
    "check_starvation",
    "check_touch_save",
    "check_visibility",
    "report_errors",
]
