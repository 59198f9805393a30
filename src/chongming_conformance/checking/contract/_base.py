"""What every group of the contract shares: the open store, its lifecycle, small helpers.

Each test gets one store in ``setup_method`` through the seam
(:class:`chongming_conformance.seam.StoreSeam`: ``make_store`` and the optional
``wrap_store`` / ``guard``) and ``teardown_method`` closes every store the test
opened: ``store.close()`` first, then the factory's teardown.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from ...oracle import FILTER_CLAUSES
from ...oracle.assertions import query_mismatch
from ...oracle.blame import (
    blame,
    blamed,
    records_culprit,
    same_snapshot,
    snapshot_culprit,
    touch_culprit,
)
from ...oracle.confirm import confirming
from ...protocol import TaskStore
from ...protocol.alphabet import describe
from ...protocol.errors import StoreError
from ...protocol.model import Command, TaskQuery, TaskSnapshot, Transition
from ...seam import StoreSeam
from ...strategies.samples import adversarial_values, snapshot

__all__ = ["LEASE", "LIMIT_ZERO_REFUSALS", "ContractBase"]

LEASE = 30.0  # seconds; the lease every claim in the contract asks for

#: How a store may refuse ``limit=0``, which the original guide leaves open and the controller
#: never passes (docs/backend-guide.md §10): StoreError, the protocol's own error, or
#: ValueError, Python's error for an argument of the right type with a value the callee does
#: not take. Not TypeError (0 is an int), not a raw driver error (ERRORS-ARE-STOREERROR).
LIMIT_ZERO_REFUSALS: tuple[type[Exception], ...] = (StoreError, ValueError)


def _diff(expected: object, actual: object) -> str:
    """Field-by-field difference of two dataclass instances, for assertion messages."""
    if actual is None or expected is None or type(expected) is not type(actual):
        return f"expected {expected!r}, got {actual!r}"
    lines = [
        f"  {f.name}: expected {getattr(expected, f.name)!r}, got {getattr(actual, f.name)!r}"
        for f in fields(expected)  # type: ignore[arg-type]
        if getattr(expected, f.name) != getattr(actual, f.name)
    ]
    return "fields differ:\n" + "\n".join(lines) if lines else "equal"


def _dropped_fields(
    expected: Sequence[object], got: Sequence[object], clause: str = "TRANSITION-ROUNDTRIP"
) -> str:
    """``clause`` (a round-trip clause) when the records pair up and every difference is a
    field the store gave back as None (a column it forgot), not another record's value;
    else ''."""
    if len(expected) != len(got):
        return ""
    pairs = [(e, g) for e, g in zip(expected, got, strict=True) if e != g]
    if pairs and all(
        getattr(g, f.name) is None
        for e, g in pairs
        for f in fields(e)  # type: ignore[arg-type]
        if getattr(e, f.name) != getattr(g, f.name)
    ):
        return clause
    return ""


def _history_culprit(
    expected: Sequence[Transition], got: Sequence[Transition], default: str
) -> str:
    """The clause a wrong ``history()`` answer shows broken when the test's subject is which
    rows it holds: the expected rows in another order, HISTORY-ORDERED; otherwise (rows
    compared in version order) what :func:`~chongming_conformance.oracle.blame.records_culprit`
    or a dropped field reads off the pairs, else ``default``."""
    ordered = sorted(got, key=lambda t: t.version)
    if list(got) != list(expected) and ordered == sorted(expected, key=lambda t: t.version):
        return "HISTORY-ORDERED"
    want = sorted(expected, key=lambda t: t.version)
    return records_culprit(want, ordered, "") or _dropped_fields(want, ordered) or default


def expect_on(clause: str, ok: bool, message: str) -> None:
    """``assert ok, message`` in a test that checks two clauses, blamed on ``clause``."""
    if not ok:
        exc = AssertionError(message)
        blame(exc, (clause,))
        raise exc


def _ids(tasks: Sequence[TaskSnapshot]) -> list[str]:
    return [t.task_id for t in tasks]


def _cmd_ids(commands: Sequence[Command]) -> list[str]:
    return [c.command_id for c in commands]


def _versions(rows: Sequence[Transition]) -> list[int]:
    return [t.version for t in rows]


class ContractBase(StoreSeam):
    """The store under test (``self.store``), opened per test, and the contract's helpers."""

    store: TaskStore
    _stack: contextlib.ExitStack
    _confirming: contextlib.AbstractContextManager[None] | None = None
    #: Set True in a subclass whose store holds NUL (U+0000) in text: the
    #: adversarial samples then include it. NUL is outside the text domain
    #: (PostgreSQL ``text`` cannot hold it), so the default leaves it out.
    text_holds_nul: bool = False

    # -- lifecycle -------------------------------------------------------------------------
    def open_store(self) -> TaskStore:
        """Open one more store via the seam; it is closed at teardown.

        ``setup_method`` opens ``self.store`` through this method, so a subclass
        written against the older API that overrides it still takes effect.
        """
        return self.open_into(self._stack)

    def setup_method(self, method: object = None) -> None:
        self._stack = contextlib.ExitStack()
        try:
            self.store = self.open_store()
        except BaseException:
            self.close_stack(self._stack)
            raise
        # A culprit guessed from the shape of a difference is checked on a fresh store
        # before it is blamed (confirm.py); undone first at teardown.
        self._confirming = confirming(self.opened_store)
        self._confirming.__enter__()

    def teardown_method(self, method: object = None) -> None:
        confirming_ = getattr(self, "_confirming", None)
        if confirming_ is not None:
            self._confirming = None
            confirming_.__exit__(None, None, None)
        self.close_stack(self._stack)

    # -- preconditions --------------------------------------------------------------------
    # A test proves one clause; the calls that set its scene rely on others. When one of
    # those calls misbehaves, the failure is evidence against *that* call's clause, not the
    # test's: these helpers check the scene as they set it and blame a broken step on its
    # own clause (blame.py), so the report shows the test's clause NOT VERIFIED with a
    # knock-on note and the broken clause FAIL -- never FAIL by association.
    def _given(self, *snaps: TaskSnapshot) -> None:
        """Create each task as a precondition, and check it reads back as created."""
        for s in snaps:
            blamed(("CREATE-THEN-GET",), functools.partial(self.store.create, s))
            got = blamed(("CREATE-THEN-GET",), functools.partial(self.store.get, s.task_id))
            same_snapshot(s, got, f"precondition: create({s.task_id!r}) then get()",
                          clause="CREATE-THEN-GET")

    def _given_saved(self, s: TaskSnapshot, *, expect_version: int) -> None:
        """A conditional save that must succeed as a precondition, checked by reading back.

        The stored lease is carried over by a save (SAVE-KEEPS-LEASE), so the read-back
        is compared with the lease taken from the row as it was before the save.
        """
        before = self._present(s.task_id)
        blamed(("SAVE-CAS",), functools.partial(self.store.save, s, expect_version=expect_version))
        want = replace(s, lease_owner=before.lease_owner, lease_until=before.lease_until)
        got = blamed(("CREATE-THEN-GET",), lambda: self.store.get(s.task_id))
        same_snapshot(want, got, f"precondition: save({s.task_id!r}, expect_version="
                      f"{expect_version}) then get()", lease_clause="SAVE-KEEPS-LEASE",
                      clause="SAVE-CAS")

    def _present(self, task_id: str) -> TaskSnapshot:
        """``get`` of a task the test created: there, or CREATE-THEN-GET is broken."""
        found = blamed(("CREATE-THEN-GET",), lambda: self.store.get(task_id))
        if found is None:
            exc = AssertionError(f"precondition: get({task_id!r}) is None for a created task")
            blame(exc, ("CREATE-THEN-GET",))
            raise exc
        return found

    def _absent(self, task_id: str) -> bool:
        """Is ``task_id`` absent? A ``get`` that raises instead of returning None is
        GET-MISSING-NONE's failure, not the calling test's."""
        return blamed(("GET-MISSING-NONE",), lambda: self.store.get(task_id)) is None

    def _all_tasks(self) -> list[TaskSnapshot]:
        """Every stored task, as a means to an end: ``query()`` and ``query(TaskQuery())``
        must agree (and not raise), or the failure is QUERY-ALL's."""
        got = blamed(("QUERY-ALL",), lambda: list(self.store.query()))
        explicit = blamed(("QUERY-ALL",), lambda: list(self.store.query(TaskQuery())))
        if _ids(got) != _ids(explicit):
            exc = AssertionError(
                f"query() returned {_ids(got)!r} but query(TaskQuery()) {_ids(explicit)!r}"
            )
            blame(exc, ("QUERY-ALL",))
            raise exc
        return got

    # -- helpers ------------------------------------------------------------------------------
    def _get(self, task_id: str) -> TaskSnapshot:
        found = self.store.get(task_id)
        assert found is not None, f"get({task_id!r}) returned None for a task that exists"
        return found

    def _assert_stored(self, expected: TaskSnapshot, why: str) -> None:
        """The stored task equals ``expected``. When only data fields differ (or only
        times), the culprit is the round trip (SNAPSHOT-FULL-ROUNDTRIP, TIME-UTC-ROUNDTRIP),
        whatever the test set out to prove; otherwise the test's own clause."""
        actual = self.store.get(expected.task_id)
        if actual == expected:
            return
        exc = AssertionError(f"{why}: {_diff(expected, actual)}")
        culprit = snapshot_culprit(expected, actual, "")
        if culprit:
            blame(exc, (culprit,))
        raise exc

    def _assert_history(self, task_id: str, expected: list[Transition], why: str) -> None:
        """``history(task_id)`` equals ``expected``; rows that differ in their times alone
        are TIME-UTC-ROUNDTRIP's failure (a truncated or re-zoned ``at``), the right rows
        in another order HISTORY-ORDERED's (which rows is the test's subject), not the
        test's."""
        got = list(self.store.history(task_id))
        if got == expected:
            return
        exc = AssertionError(f"{why}: history({task_id!r}) is {got!r}, expected {expected!r}")
        culprit = _history_culprit(expected, got, "")
        if culprit:
            blame(exc, (culprit,))
        raise exc

    def _assert_versions(self, rows: Sequence[Transition], expected: Sequence[int],
                         why: str) -> None:
        """The versions of ``rows`` (a ``history()`` answer) are ``expected``. Which rows
        is the calling test's subject; the right ones out of order are HISTORY-ORDERED's
        failure (a knock-on), not the test's."""
        got = _versions(rows)
        if got == list(expected):
            return
        if sorted(got) == sorted(expected):
            expect_on("HISTORY-ORDERED", False,
                      f"{why}: history versions {got}: the rows expected ({list(expected)}) "
                      "in another order -- history must be ascending by version")
        raise AssertionError(f"{why}: history versions {got}, expected {list(expected)}")

    def _touch(self, task_id: str, **named: Any) -> TaskSnapshot:
        """``touch(task_id, **named)``, then the task as stored.

        Fields the call did not name must not move; if one does (or the version does), the
        failure is the touch clause :func:`~chongming_conformance.oracle.blame.touch_culprit`
        names, checked before the calling test asserts what it set out to prove.
        """
        before = self._present(task_id)
        self.store.touch(task_id, **named)
        after = self._present(task_id)
        expected = before.evolve(**named) if named else before
        moved = {
            f.name for f in fields(TaskSnapshot)
            if f.name not in named and getattr(after, f.name) != getattr(expected, f.name)
        }
        if moved:
            exc = AssertionError(
                f"touch({task_id!r}, {', '.join(named) or 'nothing'}) also changed "
                f"{sorted(moved)}: {_diff(expected, after)}"
            )
            blame(exc, (touch_culprit(expected, after, named),))
            raise exc
        return after

    def _given_touched(self, task_id: str, **named: Any) -> None:
        """``touch`` as a precondition: the named fields are stored, nothing else moves."""
        after = blamed(("TOUCH-ONLY-NAMED-FIELDS",), lambda: self._touch(task_id, **named))
        expected = {k: v for k, v in named.items() if getattr(after, k) != v}
        if expected:
            exc = AssertionError(f"precondition: touch({task_id!r}) did not store {expected}")
            blame(exc, (touch_culprit(after.evolve(**named), after, named),))
            raise exc

    def _given_command(self, c: Command) -> None:
        """Submit ``c`` and claim it back (far in the future, so it stays leased), checking
        it comes back whole: a broken submit or claim is its own clause's failure."""
        blamed(("SUBMIT-THEN-CLAIM",), lambda: self.store.submit_command(c))
        now = datetime(2199, 1, 1, tzinfo=UTC)
        got = [x for x in blamed(("SUBMIT-THEN-CLAIM",), lambda: list(
            self.store.claim_commands(now=now, lease_seconds=LEASE, limit=1000)))
            if x.command_id == c.command_id]
        want = replace(c, lease_until=now + timedelta(seconds=LEASE))
        if got != [want]:
            exc = AssertionError(f"precondition: submit({c.command_id!r}) then claim: {got}")
            blame(exc, ("SUBMIT-THEN-CLAIM" if not got else
                        records_culprit([want], got, "COMMAND-ROUNDTRIP"),))
            raise exc

    def _given_appended(self, row: Transition) -> None:
        """Append ``row`` and read it back whole, or the failure is the history clause's."""
        blamed(("APPEND-IDEMPOTENT",), lambda: self.store.append(row))
        got = [t for t in blamed(("HISTORY-UNKNOWN-EMPTY",),
                                 lambda: list(self.store.history(row.task_id)))
               if t.version == row.version]
        if got != [row]:
            exc = AssertionError(f"precondition: append then history: {got}, expected {row}")
            blame(exc, (records_culprit([row], got, "TRANSITION-ROUNDTRIP"),))
            raise exc

    def _given_newest_first(self) -> None:
        """A test that uses ``newest_first`` for another clause first checks that the flag
        works at all: ``query(TaskQuery(newest_first=True))`` is newest first, or the
        failure is QUERY-ORDER-CREATED's."""
        got = blamed(("QUERY-ORDER-CREATED",),
                     lambda: list(self.store.query(TaskQuery(newest_first=True))))
        instants = [t.created_at for t in got]
        if any(a < b for a, b in itertools.pairwise(instants)):
            exc = AssertionError(
                f"precondition: query(newest_first=True) is not newest first: {_ids(got)}"
            )
            blame(exc, ("QUERY-ORDER-CREATED",))
            raise exc

    def _given_filter(self, expected: Sequence[str], **one: Any) -> None:
        """A test that relies on one query filter (with a limit, or with other filters)
        first checks it works alone: ``query(TaskQuery(**one))`` returns the tasks
        ``expected`` (in any order), or the failure is that filter's clause
        (``oracle.FILTER_CLAUSES``), a knock-on of the calling test."""
        (field_name, value), = one.items()
        clause = FILTER_CLAUSES[field_name]
        got = blamed((clause,), lambda: _ids(self.store.query(TaskQuery(**one))))
        if sorted(got) != sorted(expected):
            exc = AssertionError(
                f"precondition: query({field_name}={value!r}) returned {got}, expected "
                f"{sorted(expected)}: the filter alone does not work"
            )
            blame(exc, (clause,))
            raise exc

    def _claim(self, *, now: datetime, lease_seconds: float, **limit: int) -> list[Command]:
        """``claim_commands``; a returned command without its lease is SUBMIT-THEN-CLAIM's
        failure (the copy handed out carries ``lease_until``), whatever the test checks."""
        got = list(self.store.claim_commands(now=now, lease_seconds=lease_seconds, **limit))
        unleased = [c.command_id for c in got if c.lease_until is None]
        if unleased:
            exc = AssertionError(
                f"claim_commands(now={now.isoformat()}) returned {unleased!r} without "
                "lease_until: the claimed copy must carry its new lease"
            )
            blame(exc, ("SUBMIT-THEN-CLAIM",))
            raise exc
        return got

    def _create_all(self, *snaps: TaskSnapshot) -> None:
        self._given(*snaps)

    def _adversarial_values(self) -> tuple[str, ...]:
        """The fixed adversarial strings (``samples.adversarial_values``), NUL if claimed."""
        return adversarial_values(include_nul=self.text_holds_nul)

    def _create_adversarial(self) -> dict[str, str]:
        """One task per adversarial value as its name, only tag and run id; id -> value.

        The ids are plain (``a-00``...) so a failure shows which value broke.
        """
        made: dict[str, str] = {}
        for i, value in enumerate(self._adversarial_values()):
            task_id = f"a-{i:02d}"
            self.store.create(
                snapshot(task_id, name=value, tags=frozenset({value}), pipeline_run_id=value,
                         created=i)
            )
            made[task_id] = value
        return made

    def _create_with_id(self, task: TaskSnapshot, others: Sequence[str]) -> None:
        """``create(task)``, failing with the value if the store refuses a new id."""
        try:
            self.store.create(task)
        except Exception as exc:
            raise AssertionError(
                f"create() of the new id {describe(task.task_id)} raised "
                f"{type(exc).__name__}: {exc}; ids already stored: "
                f"{', '.join(describe(o) for o in others)} -- the store equates ids that "
                "differ (collation, PAD SPACE, normalisation?)"
            ) from exc

    def _query_ids(self, **filters: Any) -> list[str]:
        return _ids(self.store.query(TaskQuery(**filters)))

    def _assert_query(
        self, expected: Sequence[str], why: str, *, ordered: bool = True, **filters: Any
    ) -> None:
        """``query(TaskQuery(**filters))`` returns the ids ``expected``; else fail with values.

        The message names each wrongly included and each missing task with the
        field the filter reads (``'t-4' name='build ' (U+0020 SPACE)``).
        """
        q = TaskQuery(**filters)
        got = list(self.store.query(q))
        if _ids(got) == list(expected) or (not ordered and sorted(_ids(got)) == sorted(expected)):
            return
        stored = {t.task_id: t for t in self.store.query()}
        want = [stored.get(i) or self.store.get(i) for i in expected]
        shown = [t for t in want if t is not None]
        call = "query(" + ", ".join(f"{k}={v!r}" for k, v in filters.items()) + ")"
        message = query_mismatch(f"{why}: {call}", got, shown, q, ordered=ordered)
        raise AssertionError(message or f"{why}: {call} returned {_ids(got)!r}")
