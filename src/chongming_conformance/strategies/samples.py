"""Deterministic sample records for the contract suite and for authors' own tests.

Example-based checks want readable, fixed data; hypothesis strategies (in
``chongming_conformance.strategies``) want generated data. This module is the
former. Times are offsets in seconds from a fixed instant ``T0`` so a test can
say ``at(30)`` instead of spelling out datetimes, and ``full_snapshot`` sets
every optional field with the values that catch silent losses: non-UTC and
non-whole-hour offsets, microseconds, unicode, tags that collide as substrings,
and free text holding every character of the adversarial alphabet
(:mod:`chongming_conformance.protocol.alphabet`). :func:`adversarial_values` gives the
contract one small, fixed set of strings that covers every class of that
alphabet, so a store mishandling a single control character fails every run,
not only when generation happens to draw it.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from ..protocol.alphabet import CONFUSABLE_PAIRS, ESCAPED_CHARACTERS, LITERAL_ESCAPES, NUL
from ..protocol.model import (
    Command,
    CommandKind,
    Failure,
    Progress,
    TaskSnapshot,
    TaskStatus,
    Transition,
)

__all__ = [
    "ADVERSARIAL_TEXT",
    "ID_LENGTH",
    "KATHMANDU",
    "NAME_LENGTH",
    "ST_JOHNS",
    "T0",
    "TEXT_LENGTH",
    "adversarial_values",
    "at",
    "command",
    "confusable_id_twins",
    "full_command",
    "full_snapshot",
    "full_transition",
    "long_text",
    "snapshot",
    "transition",
]

#: The fixed instant every sample is relative to (has microseconds on purpose).
T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
#: +05:45 -- a non-whole-hour offset east of UTC.
KATHMANDU = timezone(timedelta(hours=5, minutes=45), "+05:45")
#: -03:30 -- a non-whole-hour offset west of UTC.
ST_JOHNS = timezone(-timedelta(hours=3, minutes=30), "-03:30")


#: Every character of the adversarial alphabet in one string (NUL excluded), for free text.
ADVERSARIAL_TEXT = "".join(ESCAPED_CHARACTERS)

#: How many strings the escaped characters are dealt into (see adversarial_values).
_GROUPS = 6


def adversarial_values(*, include_nul: bool = False) -> tuple[str, ...]:
    """Distinct strings covering the whole adversarial alphabet, deterministic and few.

    * every character of :data:`~chongming_conformance.protocol.alphabet.ESCAPED_CHARACTERS`
      (all C0 controls, DEL, U+2028/U+2029, lone combining marks, quotes,
      backslash, spaces, 4-byte characters), dealt round-robin into a handful of
      strings ``"v" + chars`` -- a store that encodes even one of them
      differently for storage and for comparison misses the string holding it;
    * both sides of every :data:`~chongming_conformance.protocol.alphabet.CONFUSABLE_PAIRS`
      pair (PAD SPACE, case folding, ß/SS, Turkish İ, NFC/NFD, full width) -- a
      store comparing text instead of code points returns one for the other;
    * escape sequences spelled literally (``"\\u000b"``), which a store comparing
      escaped text may confuse with the control itself.

    ``include_nul=True`` adds NUL (outside the text domain) inside a string and
    at the end of one (``"build\x00"`` next to ``"build"``: C-string truncation).
    About thirty values: a few extra tasks per contract test, not hundreds.
    """
    groups = ["v" + "".join(ESCAPED_CHARACTERS[i::_GROUPS]) for i in range(_GROUPS)]
    pairs = [text for left, right, _ in CONFUSABLE_PAIRS for text in (left, right)]
    nul = [f"v{NUL}w", f"build{NUL}"] if include_nul else []
    return tuple(dict.fromkeys([*groups, *pairs, *LITERAL_ESCAPES, *nul]))


#: Ids a pattern match confuses, as (target, twin): the target's ``_``/``%`` match the twin's
#: characters when the id is bound into a LIKE pattern, a case-insensitive collation folds
#: one onto the other, or the target is a prefix of the twin (``LIKE id || '%'``).
_PATTERN_TWINS: tuple[tuple[str, str], ...] = (
    ("done_1", "doneX1"),
    ("done%", "done-x"),
    ("DONE-C", "done-c"),
    ("done-2", "done-20"),
)


def confusable_id_twins() -> tuple[tuple[str, str], ...]:
    """(target, twin) id pairs: an operation by ``target`` must leave ``twin`` alone.

    A store that deletes, completes or filters *by id* with a pattern (``LIKE``), a
    case-insensitive or accent-insensitive collation, trimmed or normalised text, or a
    prefix reaches the twin too. The pairs: LIKE wildcards, case and prefix
    (:data:`_PATTERN_TWINS`), then both sides of every
    :data:`~chongming_conformance.protocol.alphabet.CONFUSABLE_PAIRS` pair. Targets repeat (one
    target has several twins); no twin is also a target.
    """
    twins = (*_PATTERN_TWINS, *((left, right) for left, right, _ in CONFUSABLE_PAIRS))
    assert not {t for t, _ in twins} & {w for _, w in twins}
    return twins


#: The lengths the kit tests (docs/backend-guide.md §7: LENGTH-IDS / LENGTH-TEXT, and their
#: -CAPACITY SHOULDs: most are recommended, the controller's own text is required), in
#: characters (code points), 4-byte ones included: ids, tags, run ids, lease owners and
#: issuers (keys and indexed columns: 255 fits every engine's index limit in utf8mb4) ...
ID_LENGTH = 255
#: ... task names (indexed for prefix queries in some stores; 1,024 characters hold any name
#: a controller makes, and an index may cover a prefix of them) ...
NAME_LENGTH = 1024
#: ... and free text: progress messages, failure type, message and detail (a traceback),
#: transition reasons, command outcomes. 8,192 4-byte characters are 32 KiB: within a
#: MySQL TEXT column (64 KiB), far within PostgreSQL text.
TEXT_LENGTH = 8192

#: The characters long samples are made of: 1-, 2-, 3- and 4-byte UTF-8 in turn, so a
#: column sized in bytes (or in UTF-16 units) overflows where one sized in characters does not.
_WIDTHS = ("a", "\u00e9", "\u4e2d", "\U0001f600")


def long_text(length: int, *, tail: str = "") -> str:
    """Exactly ``length`` characters, every UTF-8 width in turn, ending in ``tail``.

    Two samples that differ only in ``tail`` share every character but the last ones: a
    store that truncates them makes them equal.
    """
    body = "".join(_WIDTHS[i % len(_WIDTHS)] for i in range(length - len(tail)))
    return body + tail


def at(seconds: float, tz: tzinfo = UTC) -> datetime:
    """The instant ``T0 + seconds``, expressed in ``tz``."""
    return (T0 + timedelta(seconds=seconds)).astimezone(tz)


def snapshot(
    task_id: str = "task-1",
    *,
    name: str = "job",
    status: TaskStatus = TaskStatus.PENDING,
    version: int = 1,
    created: float = 0.0,
    **changes: object,
) -> TaskSnapshot:
    """A minimal snapshot (optional fields unset) created at ``at(created)``."""
    base = TaskSnapshot(
        task_id=task_id,
        name=name,
        status=status,
        status_version=version,
        created_at=at(created),
        updated_at=at(created),
    )
    return base.evolve(**changes) if changes else base


def full_snapshot(task_id: str = "task-full", **changes: object) -> TaskSnapshot:
    """A snapshot with every optional field set, in mixed offsets, with unicode."""
    base = TaskSnapshot(
        task_id=task_id,
        name="训练 模型 — naïve ☃ 𝔘𝔫𝔦",
        status=TaskStatus.FAILED,
        status_version=7,
        created_at=at(1.000001, KATHMANDU),
        updated_at=at(2.5, ST_JOHNS),
        started_at=at(1.25, KATHMANDU),
        finished_at=at(2.499999, ST_JOHNS),
        tags=frozenset({"io", "ios", "gpu:a100", "标签", 'q"uote'}),
        bucket=17,
        pipeline_run_id="run-Ω-42",
        progress=Progress(done=41, total=100, message="step 41/100 — ½ done"),
        failure=Failure(
            error_type="ValueError",
            message="bad input: «x»",
            detail="Trace…\n  line 1 " + ADVERSARIAL_TEXT,
        ),
        heartbeat_at=at(2.25, KATHMANDU),
        lease_owner="supervisor-β",
        lease_until=at(60.000123, ST_JOHNS),
    )
    return base.evolve(**changes) if changes else base


def transition(
    task_id: str = "task-1",
    version: int = 1,
    *,
    to: TaskStatus = TaskStatus.RUNNING,
    from_: TaskStatus | None = TaskStatus.PENDING,
    when: float = 0.0,
    reason: str | None = None,
) -> Transition:
    """A transition of ``task_id`` to ``version`` at ``at(when)``."""
    return Transition(
        task_id=task_id,
        version=version,
        from_status=from_,
        to_status=to,
        at=at(when),
        reason=reason,
    )


def full_transition(task_id: str = "task-full", version: int = 3) -> Transition:
    """A transition with every field set, a non-UTC offset and unicode."""
    return Transition(
        task_id=task_id,
        version=version,
        from_status=TaskStatus.RUNNING,
        to_status=TaskStatus.CANCELLED,
        at=at(3.000007, KATHMANDU),
        reason="stopped by «operator» ☃ " + ADVERSARIAL_TEXT,
    )


def command(
    command_id: str = "cmd-1",
    task_id: str = "task-1",
    *,
    created: float = 0.0,
    kind: CommandKind = CommandKind.STOP,
    issued_by: str = "controller-a",
) -> Command:
    """An unleased, unfinished command created at ``at(created)``."""
    return Command(
        command_id=command_id,
        task_id=task_id,
        kind=kind,
        issued_by=issued_by,
        created_at=at(created),
    )


def full_command(command_id: str = "cmd-full", task_id: str = "task-full") -> Command:
    """A command with every submit-time field set, a non-UTC offset and unicode."""
    return replace(
        command(
            command_id,
            task_id,
            kind=CommandKind.RETRY,
            issued_by="worker-β ☃ " + ADVERSARIAL_TEXT,
        ),
        created_at=at(4.000009, ST_JOHNS),
    )
