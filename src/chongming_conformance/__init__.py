"""chongming-conformance: prove a TaskStore backend meets the persistence contract.

Run the kit against your store with ``pytest --chongming-store=mypkg:make_store``;
see README.md and docs/ for the rest.
"""

from __future__ import annotations

from .protocol import PROTOCOL_METHODS, TaskStore
from .protocol.clauses import CATALOGUE_VERSION, CLAUSES, Clause, Level, Scope, checks
from .protocol.errors import ConcurrencyConflict, StoreError
from .protocol.model import (
    TERMINAL_STATUSES,
    Command,
    CommandKind,
    Failure,
    Progress,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)

__version__ = "0.1.0"

__all__ = [
    "CATALOGUE_VERSION",
    "CLAUSES",
    "PROTOCOL_METHODS",
    "TERMINAL_STATUSES",
    "Clause",
    "Command",
    "CommandKind",
    "ConcurrencyConflict",
    "Failure",
    "Level",
    "Progress",
    "Scope",
    "StoreError",
    "TaskQuery",
    "TaskSnapshot",
    "TaskStatus",
    "TaskStore",
    "Transition",
    "__version__",
    "checks",
]
