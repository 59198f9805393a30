"""Lock contention told apart from other failures: its own anomaly kind, with a hint.

A store that lets a busy lock or a serialization failure escape to the caller
is wrong in a specific, fixable way (a busy timeout, a retry inside the store,
or a ``ConcurrencyConflict`` where the clause allows one). Lumping it in with
``unexpected-error`` hides that fix, so every verdict classifies raised
errors through :func:`contention_kind` first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "CONTENTION_HINT", "LOCK_CONTENTION", "contention_kind", "error_text", "is_lock_contention",
]

#: The anomaly kind of a call that failed because another process held a lock.
LOCK_CONTENTION = "lock-contention"

#: What to do about it, on its own line under every lock-contention message.
CONTENTION_HINT = (
    "lock contention escaped the store: give SQLite a busy timeout (and take write locks "
    "up front with BEGIN IMMEDIATE), retry a serialization failure or deadlock inside the "
    "store, or surface it as ConcurrencyConflict where the clause allows one"
)

# Driver texts of a lock that was busy or a transaction the server aborted for a
# concurrent one: SQLite, PostgreSQL (psycopg), MySQL, and generic lock timeouts.
_PATTERNS = re.compile(
    r"database is locked|database table is locked|SQLITE_BUSY|"
    r"could not serialize access|SerializationFailure|deadlock detected|DeadlockDetected|"
    r"LockNotAvailable|lock timeout|lock wait timeout|could not obtain lock|"
    r"Deadlock found when trying to get lock",
    re.IGNORECASE,
)


def is_lock_contention(error: Mapping[str, Any] | None) -> bool:
    """True when a logged error (type, message and cause) is a busy lock or serialization
    failure rather than any other exception."""
    if not error:
        return False
    text = " ".join(str(error.get(k) or "") for k in ("type", "message", "cause"))
    return bool(_PATTERNS.search(text))


def contention_kind(error: Mapping[str, Any] | None, default: str) -> str:
    """``LOCK_CONTENTION`` for a lock failure, ``default`` for anything else."""
    return LOCK_CONTENTION if is_lock_contention(error) else default


def error_text(error: Mapping[str, Any] | None) -> str:
    """A logged error in one line for a message: the worker's summary (class, code, first
    line, SQL cut at a token boundary) when it logged one, else ``type: message``."""
    if not error:
        return "an error"
    summary = error.get("summary")
    if summary:
        return str(summary)
    return f"{error.get('type')}: {error.get('message')}"
