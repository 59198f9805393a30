"""The controller-in-the-loop checks (CTRL-* and XP-CTRL-* clauses); see docs/controller.md."""

from __future__ import annotations

from .contract import ControllerContract
from .crossprocess import SCENARIOS, run_cross_process
from .faults import WRITE_METHODS, FaultyStore

__all__ = ["SCENARIOS", "WRITE_METHODS", "ControllerContract", "FaultyStore", "run_cross_process"]
