"""A compact, real task controller: the reference consumer of a ``TaskStore`` (guide §2-§5).

See docs/controller.md for the wiring and the checks built on it.

The part ``controller`` (docs/architecture.md, "The parts") may import ``protocol`` only;
its checks are ``chongming_conformance.checking.controller``.
"""

from __future__ import annotations

from .buckets import BucketPolicy, PolicyMismatch, assert_policies_agree
from .clock import Clock, ManualClock, utc_now
from .context import TaskContext, TaskStopped
from .core import Controller, ControllerClosed, TaskFn
from .writethrough import WriteThrough

__all__ = [
    "BucketPolicy",
    "Clock",
    "Controller",
    "ControllerClosed",
    "ManualClock",
    "PolicyMismatch",
    "TaskContext",
    "TaskFn",
    "TaskStopped",
    "WriteThrough",
    "assert_policies_agree",
    "utc_now",
]
