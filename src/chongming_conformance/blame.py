"""Pinning a failure of a many-clause check on the clause it is evidence against.

A state-machine run or a property declares many clauses; when it fails, the
failure usually says which one broke (only the lease differs after a save:
SAVE-KEEPS-LEASE). Checks attach an exception note ``chongming-blame: ID, ...``
and the plugin then reports FAIL for those clauses only, instead of for every
clause the check declares. No note means "blame everything it declares".
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields

from .clauses import CLAUSES
from .model import TaskSnapshot

__all__ = ["BLAME_NOTE", "blame", "same_snapshot"]

BLAME_NOTE = "chongming-blame: "


def blame(exc: BaseException, clause_ids: Iterable[str]) -> None:
    """Note on ``exc`` the clauses it is evidence against; the first (innermost) note wins."""
    if any(n.startswith(BLAME_NOTE) for n in getattr(exc, "__notes__", ())):
        return
    ids = [c for c in clause_ids if c in CLAUSES]
    if ids:
        exc.add_note(BLAME_NOTE + ", ".join(ids))


def same_snapshot(
    expected: TaskSnapshot | None,
    actual: TaskSnapshot | None,
    what: str,
    *,
    lease_clause: str | None = None,
    version_clause: str | None = None,
) -> None:
    """Assert equality; blame ``lease_clause`` if only the lease differs, ``version_clause``
    if only ``status_version`` does."""
    if actual == expected:
        return
    exc = AssertionError(f"{what}:\n  expected {expected!r}\n  got      {actual!r}")
    if expected is not None and actual is not None:
        differ = {
            f.name
            for f in fields(TaskSnapshot)
            if getattr(expected, f.name) != getattr(actual, f.name)
        }
        if lease_clause and differ <= {"lease_owner", "lease_until"}:
            blame(exc, (lease_clause,))
        elif version_clause and differ == {"status_version"}:
            blame(exc, (version_clause,))
    raise exc
