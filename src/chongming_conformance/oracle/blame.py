"""Pinning a failure of a many-clause check on the clause it is evidence against.

A state-machine run or a property declares many clauses; when it fails, the
failure usually says which one broke (only the lease differs after a save:
SAVE-KEEPS-LEASE). Checks attach an exception note ``chongming-blame: ID, ...``
and the plugin then reports FAIL for those clauses only, instead of for every
clause the check declares. No note means "blame everything it declares".

This module is the one owner of the note's format: :func:`blame` writes it,
:func:`parse_blames` reads it back out of a failure's text.

A culprit read off the shape of a difference (only datetimes differ:
TIME-UTC-ROUNDTRIP) is a guess; the culprit functions here confirm it on a fresh
store first (:mod:`chongming_conformance.oracle.confirm`) and return :data:`UNCONFIRMED`
when that fails, which :func:`blame` records as "blamed on nothing": the check's
clauses are then NOT VERIFIED, never FAIL by guesswork.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from datetime import datetime
from typing import TypeVar

from ..protocol.clauses import CLAUSES
from ..protocol.errors import StoreError
from ..protocol.model import Command, TaskSnapshot, Transition
from .confirm import (
    UNCONFIRMED,
    Probe,
    command_times_change,
    confirmed,
    decide,
    snapshot_fields_change,
    snapshot_times_change,
    transition_times_change,
    write_refused,
)
from .messages import refusal

_RECORDS = (TaskSnapshot, Transition, Command)

__all__ = [
    "BLAME_NOTE",
    "UNCONFIRMED",
    "blame",
    "blamed",
    "blamed_write",
    "failure_blames",
    "leaf_failures",
    "notes_blame",
    "parse_blames",
    "record_culprit",
    "records_culprit",
    "same_snapshot",
    "snapshot_culprit",
    "touch_culprit",
]

BLAME_NOTE = "chongming-blame: "

T = TypeVar("T")

# A note on a line of its own, as Python prints exception notes; pytest puts
# "E   " (any number of spaces) in front of each line of a failure.
_NOTE_LINE = re.compile(r"^(?:E\s+)?" + re.escape(BLAME_NOTE) + r"(.*)$", re.MULTILINE)


def blame(exc: BaseException, clause_ids: Iterable[str]) -> None:
    """Note on ``exc`` the clauses it is evidence against; the first (innermost) note wins.

    :data:`UNCONFIRMED` among ``clause_ids`` notes that the failure is blamed on nothing,
    which also keeps any outer blame off it.
    """
    if any(n.startswith(BLAME_NOTE) for n in getattr(exc, "__notes__", ())):
        return
    given = list(clause_ids)
    if UNCONFIRMED in given:
        exc.add_note(BLAME_NOTE + UNCONFIRMED)
        return
    ids = [c for c in given if c in CLAUSES]
    if ids:
        exc.add_note(BLAME_NOTE + ", ".join(ids))


def blamed(clause_ids: Iterable[str], call: Callable[[], T]) -> T:
    """Run ``call``; any exception it raises is blamed on ``clause_ids`` (then re-raised).

    A ``functools.partial`` writing records (``partial(store.create, snapshot)``) that
    raises ``StoreError`` is read as :func:`blamed_write` reads it: a refusal of an
    out-of-the-ordinary value is reported as that, on the value's own clause."""
    records = [a for a in getattr(call, "args", ()) if isinstance(a, _RECORDS)]
    if records:
        return blamed_write(clause_ids, call, *records)
    try:
        return call()
    except Exception as exc:
        blame(exc, clause_ids)
        raise


def blamed_write(clause_ids: Iterable[str], call: Callable[[], T], *records: object) -> T:
    """Run ``call``, a write of ``records``. If the store refuses it with ``StoreError``
    and some of their values are out of the ordinary (a datetime past 2038-01-19, an id
    longer than the controller's, a long text: ``messages.unusual_values``), the failure
    is a refusal of the input, naming those values, blamed on the clauses owning their
    fidelity (TIME-UTC-ROUNDTRIP, LENGTH-IDS-CAPACITY; LENGTH-TEXT for the text the controller
    writes, LENGTH-TEXT-CAPACITY for any other) -- not on ``clause_ids``, the write's own,
    which an ordinary input would have met. Anything else is blamed on
    ``clause_ids``.

    The value is only a suspect: the same records are written to a fresh store first
    (``confirm.write_refused``). Refused there too, the values are blamed; taken there,
    the refusal was the write's own (an id the store mangled into one it already had) and
    ``clause_ids`` are; a probe that could not run blames nothing (UNCONFIRMED)."""
    try:
        return call()
    except StoreError as exc:
        found = refusal(exc, _described(records), *records)
        verdict = None if found is None else confirmed(write_refused(*records))
        if found is None or verdict is False:
            blame(exc, clause_ids)
            raise
        owners, text = found
        failure = AssertionError(text)
        blame(failure, owners if verdict else (UNCONFIRMED,))
        raise failure from exc
    except Exception as exc:
        blame(exc, clause_ids)
        raise


def _described(records: Sequence[object]) -> str:
    names = {TaskSnapshot: "the snapshot", Transition: "the transition", Command: "the command"}
    return " and ".join(names.get(type(r), type(r).__name__) for r in records)


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
            if clause_id.strip() in CLAUSES:  # not "none (...)": see UNCONFIRMED
                named[clause_id.strip()] = None
    return tuple(named)


def _differing(expected: object, actual: object) -> set[str]:
    return {
        f.name
        for f in fields(expected)  # type: ignore[arg-type]
        if getattr(expected, f.name) != getattr(actual, f.name)
    }


def _times_only(expected: object, actual: object, differ: set[str]) -> bool:
    """Every differing field holds a datetime on both sides: a time encoding bug."""
    return bool(differ) and all(
        isinstance(getattr(expected, n), datetime) and isinstance(getattr(actual, n), datetime)
        for n in differ
    )


def _times_probe(expected: object) -> Probe | None:
    """The re-check of a time guess: ``expected`` written to a fresh store and read back."""
    if isinstance(expected, TaskSnapshot):
        return snapshot_times_change(expected)
    if isinstance(expected, Transition):
        return transition_times_change(expected)
    if isinstance(expected, Command):
        return command_times_change(expected)
    return None


def _times_culprit(expected: object, default: str) -> str:
    probe = _times_probe(expected)
    return UNCONFIRMED if probe is None else decide(probe, "TIME-UTC-ROUNDTRIP", default)


def record_culprit(expected: object, actual: object, default: str) -> str:
    """The clause a read-back record (task, transition or command) that differs from what
    was written shows broken: TIME-UTC-ROUNDTRIP when only datetimes differ (a time
    stored in another zone, or truncated) and a fresh store confirms it, ``default`` when the
    fresh store refutes it (the round trip is fine, so this call changed the record),
    :data:`UNCONFIRMED` when the re-check could not run; else ``default``."""
    if expected is None or actual is None or type(expected) is not type(actual):
        return default
    differ = _differing(expected, actual)
    if _times_only(expected, actual, differ):
        return _times_culprit(expected, default)
    return default


def records_culprit(
    expected: Sequence[object], actual: Sequence[object], default: str
) -> str:
    """:func:`record_culprit` for two lists read back (history, a claim): TIME-UTC-ROUNDTRIP
    only when they pair up one to one and every pair differs in datetimes alone."""
    if len(expected) != len(actual):
        return default
    pairs = [(e, a) for e, a in zip(expected, actual, strict=True) if e != a]
    if pairs and all(type(e) is type(a) and _times_only(e, a, _differing(e, a))
                     for e, a in pairs):
        return _times_culprit(pairs[0][0], default)
    return default


def snapshot_culprit(
    expected: TaskSnapshot | None, actual: TaskSnapshot | None, default: str
) -> str:
    """The clause a read-back that differs from what was written shows broken.

    Only datetimes differ: TIME-UTC-ROUNDTRIP; other data fields (not the version, not
    the lease): SNAPSHOT-FULL-ROUNDTRIP -- each only when the same snapshot, created in a
    fresh store, comes back with the same kind of difference; when it comes back intact,
    the call under test changed it: ``default``, as for a missing row, a wrong version or
    a wrong status (:data:`UNCONFIRMED` when the re-check could not run).
    """
    if expected is None or actual is None:
        return default
    differ = _differing(expected, actual)
    if _times_only(expected, actual, differ):
        return decide(snapshot_times_change(expected), "TIME-UTC-ROUNDTRIP", default)
    if differ and not differ & {"status", "status_version", "lease_owner", "lease_until"}:
        return decide(snapshot_fields_change(expected), "SNAPSHOT-FULL-ROUNDTRIP", default)
    return default


_LEASE = frozenset({"lease_owner", "lease_until"})
_TOUCHABLE = frozenset({"progress", "heartbeat_at", *_LEASE})


def touch_culprit(
    expected: TaskSnapshot | None, actual: TaskSnapshot | None, named: Iterable[str]
) -> str:
    """The touch clause a read-back after ``touch(**named)`` shows broken.

    A row for a task that does not exist: TOUCH-MISSING-IGNORED; only the version
    moved: TOUCH-NO-VERSION; a heartbeat that moved the lease or a lease that moved the
    heartbeat: TOUCH-SIGNALS-SEPARATE; a named lease field stored wrong: TOUCH-LEASE;
    anything else (a field that was not named changed, a named one stored wrong):
    TOUCH-ONLY-NAMED-FIELDS.
    """
    if expected is None:
        return "TOUCH-MISSING-IGNORED"
    if actual is None:
        return "TOUCH-ONLY-NAMED-FIELDS"
    given = set(named)
    differ = _differing(expected, actual)
    if differ == {"status_version"}:
        return "TOUCH-NO-VERSION"
    unnamed = differ - given
    if unnamed and unnamed <= _LEASE and "heartbeat_at" in given:
        return "TOUCH-SIGNALS-SEPARATE"
    if unnamed == {"heartbeat_at"} and given & _LEASE:
        return "TOUCH-SIGNALS-SEPARATE"
    if not unnamed and differ and differ <= _LEASE:
        return "TOUCH-LEASE"
    return "TOUCH-ONLY-NAMED-FIELDS"


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
