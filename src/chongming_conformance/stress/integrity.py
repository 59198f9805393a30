"""Optional store-specific integrity hooks for ``run_scenario(..., integrity=...)``.

The harness itself only checks what the protocol can see (a fresh connection
reads everything back, counts add up). A backend that can say more about its
own on-disk state plugs it in here; SQLite's is provided because the reference
store and most hand-written stores use it.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["sqlite_integrity", "sqlite_opener_integrity"]


def sqlite_integrity(path: str | os.PathLike[str]) -> list[str]:
    """``PRAGMA integrity_check`` of the SQLite file at ``path`` ('[]' when it says ok)."""
    conn = sqlite3.connect(os.fspath(path), timeout=30.0)
    try:
        rows = conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        conn.close()
    found = [str(r[0]) for r in rows]
    return [] if found == ["ok"] else [f"PRAGMA integrity_check: {p}" for p in found]


def sqlite_opener_integrity(opener: Callable[[], Any]) -> Sequence[str]:
    """Integrity hook for an opener ``functools.partial(Store, path, ...)`` on a SQLite file."""
    if not isinstance(opener, functools.partial) or not opener.args:
        return [f"cannot find the SQLite path in opener {opener!r} (expected "
                "functools.partial(Store, path, ...))"]
    return sqlite_integrity(opener.args[0])
