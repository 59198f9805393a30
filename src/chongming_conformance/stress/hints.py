"""A scenario's anomalies, read together: when they share one cause, name it.

A verdict reports symptoms one by one -- "worker 2 did not see what worker 0
wrote in round 3", forty times. An author porting a store to a new engine
then has to guess that forty symptoms are one mistake: PEP 249 drivers start
with autocommit off, so every worker sees its own writes and none sees the
others'. :func:`common_cause` looks at the anomalies as a whole and, when
they fit one known pattern, returns a one-line hint naming the likely cause;
otherwise ``None``, so a hint is never a guess dressed up as a finding.

It reads only what the verdicts already record (``Anomaly.kind`` and the
``worker`` / ``writer`` / ``error`` evidence), so it needs no change in the
scenarios. ``ScenarioResult.report`` can append ``hint: ...`` when it returns
a string.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .contention import error_text
from .harness import Anomaly

__all__ = ["ERROR_KINDS", "KIND_HINTS", "VISIBILITY_KINDS", "common_cause"]

#: Kinds that mean "a process did not see a write another process made".
VISIBILITY_KINDS: frozenset[str] = frozenset({"stale-read", "lost-write"})
#: Kinds that record an exception a store call raised.
ERROR_KINDS: frozenset[str] = frozenset({"unexpected-error", "lock-contention"})

_UNCOMMITTED = (
    "every anomaly is a process not seeing what another process wrote: writes that are "
    "never committed (PEP 249 drivers start with autocommit off -- each connection sees "
    "its own writes and nobody else's), a transaction or snapshot held open across calls "
    "(REPEATABLE READ), or a per-process cache"
)

#: Anomaly kind -> the usual cause when every anomaly of a scenario is of that kind.
KIND_HINTS: Mapping[str, str] = {
    "lost-update": (
        "save() is not atomic: the version check and the write are two steps; make them one "
        "conditional write (SQL: one conditional UPDATE ... WHERE status_version = expect, "
        "testing the matched row count; a key-value store: a compare-and-set on the record's "
        "revision)"
    ),
    "no-winner": (
        "every conditional save was refused although one should win: the row count counts "
        "rows changed, not matched (MySQL/MariaDB without CLIENT.FOUND_ROWS), or the version "
        "was read from a stale snapshot"
    ),
    "double-hold": (
        "the claim is not atomic: pick and lease in one step (SQL: one statement, or SELECT "
        "... FOR UPDATE SKIP LOCKED then UPDATE in one transaction; a key-value store: lease "
        "each command with a compare-and-set that requires it unleased or expired)"
    ),
    "torn-read": (
        "a read saw half a write: write every field of a task in one step (one statement or "
        "transaction; in a key-value store, one record), and read it in one"
    ),
    "rows-per-version": (
        "concurrent replays of append() both inserted: make (task_id, version) unique and "
        "the insert conditional (SQL: INSERT ... ON CONFLICT DO NOTHING / INSERT IGNORE; a "
        "key-value store: create the key for that version only if it is absent)"
    ),
}


def _workers(anomalies: Sequence[Anomaly]) -> set[Any]:
    return {a.evidence.get("worker") for a in anomalies} - {None}


def _others_writes_unseen(anomalies: Sequence[Anomaly]) -> bool:
    """Every anomaly is a visibility one, and those naming a writer name another process."""
    if not all(a.kind in VISIBILITY_KINDS for a in anomalies):
        return False
    pairs = [(a.evidence.get("worker"), a.evidence.get("writer")) for a in anomalies]
    crossed = [(w, writer) for w, writer in pairs if w is not None and writer is not None]
    return bool(crossed) and all(w != writer for w, writer in crossed)


def _one_error(anomalies: Sequence[Anomaly]) -> str | None:
    """The error every anomaly raised, when they are all errors of one type."""
    if not all(a.kind in ERROR_KINDS for a in anomalies):
        return None
    errors = [a.evidence.get("error") or {} for a in anomalies]
    types = {e.get("type") for e in errors}
    if len(types) != 1 or None in types:
        return None
    return error_text(errors[0])


def common_cause(anomalies: Sequence[Anomaly]) -> str | None:
    """A hint at the one cause all of ``anomalies`` share, or ``None`` if they share none.

    Needs at least two anomalies: one symptom is its own explanation.
    """
    if len(anomalies) < 2:
        return None
    if _others_writes_unseen(anomalies):
        return _UNCOMMITTED
    error = _one_error(anomalies)
    if error is not None:
        return (
            f"all {len(anomalies)} anomalies are the same error ({error}); fix it first, "
            "the other symptoms may follow from it"
        )
    kinds = {a.kind for a in anomalies}
    if len(kinds) == 1:
        (kind,) = kinds
        if kind in KIND_HINTS:
            workers = sorted(_workers(anomalies), key=str)
            seen = f" across workers {workers}" if len(workers) > 1 else ""
            return f"all {len(anomalies)} anomalies are {kind!r}{seen}: {KIND_HINTS[kind]}"
    return None
