"""Pinning a failure of a many-clause check on the clause it is evidence against.

A state-machine run or a property declares many clauses; when it fails, the
failure usually says which one broke (only the lease differs after a save:
SAVE-KEEPS-LEASE). Checks attach an exception note ``chongming-blame: ID, ...``
and the plugin then reports FAIL for those clauses only, instead of for every
clause the check declares. No note means "blame everything it declares".

This module is the one owner of the note's format: :func:`blame` writes it,
:func:`parse_blames` reads it back out of a failure's text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import fields
from typing import TypeVar

from .clauses import CLAUSES
from .model import TaskSnapshot

__all__ = [
    "BLAME_NOTE",
    "blame",
    "blamed",
    "failure_blames",
    "leaf_failures",
    "notes_blame",
    "parse_blames",
    "same_snapshot",
    "snapshot_culprit",
]

BLAME_NOTE = "chongming-blame: "

T = TypeVar("T")

# A note on a line of its own, as Python prints exception notes; pytest puts
# "E   " (any number of spaces) in front of each line of a failure.
_NOTE_LINE = re.compile(r"^(?:E\s+)?" + re.escape(BLAME_NOTE) + r"(.*)$", re.MULTILINE)


def blame(exc: BaseException, clause_ids: Iterable[str]) -> None:
    """Note on ``exc`` the clauses it is evidence against; the first (innermost) note wins."""
    if any(n.startswith(BLAME_NOTE) for n in getattr(exc, "__notes__", ())):
        return
    ids = [c for c in clause_ids if c in CLAUSES]
    if ids:
        exc.add_note(BLAME_NOTE + ", ".join(ids))


def blamed(clause_ids: Iterable[str], call: Callable[[], T]) -> T:
    """Run ``call``; any exception it raises is blamed on ``clause_ids`` (then re-raised)."""
    try:
        return call()
    except Exception as exc:
        blame(exc, clause_ids)
        raise


def notes_blame(exc: BaseException) -> tuple[str, ...]:
    """The clauses the blame notes on ``exc`` itself (or, failing that, on the exceptions it
    was raised from) name; ``()`` when none does."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        ids = parse_blames("\n".join(getattr(current, "__notes__", ())))
        if ids:
            return ids
        current = current.__cause__ or current.__context__
    return ()


def leaf_failures(exc: BaseException) -> list[BaseException]:
    """The distinct failures inside ``exc``: the leaves of nested exception groups.

    Hypothesis reports several distinct failures of one test as one
    ``ExceptionGroup``; each leaf carries its own blame note.
    """
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in leaf_failures(sub)]
    return [exc]


def failure_blames(exc: BaseException) -> tuple[tuple[str, ...], int]:
    """(every clause any leaf failure of ``exc`` is blamed on, number of leaves blamed on none).

    A group's own note counts for leaves that carry none.
    """
    group_note = notes_blame(exc) if isinstance(exc, BaseExceptionGroup) else ()
    named: dict[str, None] = {}
    unattributed = 0
    for leaf in leaf_failures(exc):
        ids = notes_blame(leaf) or group_note
        if not ids:
            unattributed += 1
        named.update(dict.fromkeys(ids))
    return tuple(named), unattributed


def parse_blames(text: str) -> tuple[str, ...]:
    """The clause IDs the blame notes in a failure's ``text`` name: the inverse of :func:`blame`.

    In first-seen order, without repeats; ``()`` when the text has no note.
    Whether a named clause is one the failing test declares is the reader's
    question (the report ignores notes naming none of them).
    """
    named: dict[str, None] = {}
    for match in _NOTE_LINE.finditer(text):
        for clause_id in match.group(1).split(","):
            if clause_id.strip():
                named[clause_id.strip()] = None
    return tuple(named)


_TIME_FIELDS = frozenset({"created_at", "updated_at", "heartbeat_at", "lease_until"})


def snapshot_culprit(
    expected: TaskSnapshot | None, actual: TaskSnapshot | None, default: str
) -> str:
    """The clause a read-back that differs from what was written shows broken.

    Only times differ: TIME-UTC-ROUNDTRIP; other data fields (not the version, not
    the lease): SNAPSHOT-FULL-ROUNDTRIP; otherwise (missing row, wrong version, wrong
    status) the operation's own clause ``default``.
    """
    if expected is None or actual is None:
        return default
    differ = {
        f.name for f in fields(TaskSnapshot) if getattr(expected, f.name) != getattr(actual, f.name)
    }
    if differ and differ <= _TIME_FIELDS:
        return "TIME-UTC-ROUNDTRIP"
    if differ and not differ & {"status", "status_version", "lease_owner", "lease_until"}:
        return "SNAPSHOT-FULL-ROUNDTRIP"
    return default


def same_snapshot(
    expected: TaskSnapshot | None,
    actual: TaskSnapshot | None,
    what: str,
    *,
    lease_clause: str | None = None,
    version_clause: str | None = None,
    clause: str | None = None,
) -> None:
    """Assert equality; blame ``lease_clause`` if only the lease differs, ``version_clause``
    if only ``status_version`` does, else (given ``clause``) :func:`snapshot_culprit`."""
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
    if clause:
        blame(exc, (snapshot_culprit(expected, actual, clause),))
    raise exc
