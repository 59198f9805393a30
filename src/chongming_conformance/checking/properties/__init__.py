"""Property checks: hypothesis searches for the store bugs no example thought of.

Subclass exactly like ``StoreContract``::

    from chongming_conformance.checking.properties import StoreProperties

    class TestMyStoreProperties(StoreProperties):
        def make_store(self):
            return MyStore(...)          # or a generator / context manager

Each ``test_*`` method runs one property over many generated examples; every
example gets a **fresh store** from ``make_store`` (opened and closed through
the seam, ``StoreSeam.opened_store()``), so examples cannot leak into
each other. That isolation has a price per example -- a new SQLite file, a
new Postgres schema -- which is why the kit's profiles keep example counts
modest (see ``chongming_conformance.checking.hypothesis_profiles``).

The ``@given`` test is built when the method runs, with the settings of
``hypothesis_profiles.active_settings()`` (or ``hypothesis_settings`` if a subclass sets
it), so ``--hypothesis-profile``, ``--hypothesis-seed`` and the kit's profiles
apply even though this module is imported before any of them is chosen.

What a model comparison accepts: wherever the contract allows several answers
(ties in ``created_at``) any valid answer passes; see
``chongming_conformance.oracle``.

``CodecProperties`` checks the kit's own codec and needs no store.
"""

from __future__ import annotations

import contextlib
import functools
import zlib
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from hypothesis import settings
from hypothesis import strategies as st

from ... import strategies as cst
from ...oracle import (
    Model,
    check_claim,
    check_prune,
    check_query,
    expected_counts,
    history_culprits,
)
from ...oracle.assertions import QUERY_CLAUSES
from ...oracle.blame import blame, blamed, same_snapshot
from ...oracle.confirm import confirming
from ...protocol import TaskStore
from ...protocol.clauses import checks
from ...protocol.errors import ConcurrencyConflict
from ...protocol.model import Command, TaskSnapshot, TaskStatus, Transition
from ...seam import StoreSeam
from ...strategies.single_field import (
    SAVED_FIELDS,
    case_of,
    look_alikes,
    one_field_changed,
    order_of,
    reads_after,
)
from ..cases import claim_cases, counting, mark, prune_cases, query_cases
from ..observe import present, read_task
from ._codec import ANY_SNAPSHOT as _ANY_SNAPSHOT
from ._codec import CodecProperties, _run, _same

__all__ = ["CodecProperties", "StoreProperties"]

# (transition, task index, version): small versions collide, so replays happen.
_APPENDS = st.lists(
    st.tuples(
        cst.transitions() | cst.transitions(full=True),
        st.integers(0, 2),
        st.integers(0, 6) | cst.versions(),
    ),
    max_size=12,
)
_T0 = datetime(2030, 1, 1, tzinfo=UTC)
_MAYBE_PROGRESS = st.none() | cst.progresses()
_MAYBE_TIME = st.none() | cst.aware_datetimes()
_MAYBE_TEXT = st.none() | cst.texts()


def _steps_within(lease: float) -> list[int]:
    """Clock steps (µs) that probe a lease of ``lease`` seconds: inside it but past its
    whole seconds, exactly at its end, a microsecond after, and a long way after."""
    us = round(lease * 1_000_000)
    whole = int(lease) * 1_000_000
    return sorted({(whole + us) // 2 if whole < us else us // 2, us, us + 1, 60 * 1_000_000})


def _conflict(call: Callable[[], object], what: str) -> ConcurrencyConflict:
    try:
        call()
    except ConcurrencyConflict as exc:
        return exc
    except Exception as exc:
        raise AssertionError(
            f"{what}: expected ConcurrencyConflict, got {type(exc).__name__}: {exc}"
        ) from exc
    raise AssertionError(f"{what}: expected ConcurrencyConflict, the save went through")


def _create_given(store: TaskStore, task: TaskSnapshot) -> None:
    """Create ``task`` as a precondition and check it reads back as created: a store that
    alters a task on create fails CREATE-THEN-GET (or the round-trip clause the
    difference shows), not the query or prune clause the property set out to prove."""
    blamed(("CREATE-THEN-GET",), functools.partial(store.create, task))
    same_snapshot(
        task, read_task(store, task.task_id, exists=True), "get() after create()",
        clause="CREATE-THEN-GET",
    )


#: A refused save that was not refused: no version check, or a hidden retry.
_CONFLICT = ("SAVE-CONFLICT-RAISES", "SAVE-NO-AUTO-RETRY")


def _save_clause(version: int, expect: int) -> str:
    """The clause a refused *valid* save breaks: a skip past expect + 1 is its own clause."""
    return "SAVE-VERSION-SKIP" if version != expect + 1 else "SAVE-CAS"


def _same_history(store: TaskStore, model: Model, task_id: str, since: int) -> None:
    """history(task_id, since) equals the model's, blamed on the clause a difference breaks."""
    want = model.history_of(task_id, since)
    got = blamed(
        ("HISTORY-UNKNOWN-EMPTY",) if not want else (),
        lambda: list(store.history(task_id, since_version=since)),
    )
    try:
        _same(want, got, f"history({task_id!r}, since_version={since})")
    except AssertionError as exc:
        blame(exc, history_culprits(want, got, since=since, pruned=False))
        raise


class StoreProperties(StoreSeam):
    """Property checks for one store; subclass and implement ``make_store()``.

    Stores are opened through the seam every single-connection base shares
    (:class:`chongming_conformance.seam.StoreSeam`: ``make_store`` plus the
    optional ``wrap_store`` / ``guard``), one per example via ``opened_store()``.
    Set ``hypothesis_settings`` on the subclass to pin settings (e.g. a fixed
    ``max_examples``); by default the active profile decides.
    """

    hypothesis_settings: ClassVar[settings | None] = None

    def run_property(
        self, test: Callable[..., None], *, check: str | None = None, **strategies: Any
    ) -> None:
        """Run ``test`` under hypothesis with this class's settings (for subclasses' own).

        A culprit guessed from the shape of a difference is checked on a fresh store
        before it is blamed (confirm.py); with ``check`` named, the input cases its
        examples meet are counted (cases.py).
        """
        with contextlib.ExitStack() as stack:
            stack.enter_context(confirming(self.opened_store))
            if check is not None:
                stack.enter_context(counting(check))
            _run(test, self.hypothesis_settings, **strategies)

    # -- round-trips ----------------------------------------------------------------
    @checks(
        "CREATE-THEN-GET",
        "SNAPSHOT-FULL-ROUNDTRIP",
        "TIME-UTC-ROUNDTRIP",
        "SAVE-CAS",
        "SAVE-KEEPS-LEASE",
    )
    def test_snapshot_roundtrip(self) -> None:
        """create/get and save/get return every field unchanged; save carries the lease."""

        def prop(first: TaskSnapshot, second: TaskSnapshot) -> None:
            # The save's version rises above expect_version (a store may refuse one that
            # does not: left open by the guide), by a gap of any size.
            first = replace(first, status_version=min(first.status_version, cst.INT64_MAX - 1))
            room = cst.INT64_MAX - first.status_version
            second = replace(second, task_id=first.task_id,
                             status_version=first.status_version + 1
                             + second.status_version % room)
            with self.opened_store() as store:
                blamed(("CREATE-THEN-GET",), functools.partial(store.create, first))
                same_snapshot(
                    first, store.get(first.task_id), "get() after create()",
                    clause="CREATE-THEN-GET",
                )
                blamed(
                    (_save_clause(second.status_version, first.status_version),),
                    functools.partial(store.save, second, expect_version=first.status_version),
                )
                expected = replace(
                    second, lease_owner=first.lease_owner, lease_until=first.lease_until
                )
                same_snapshot(
                    expected,
                    store.get(first.task_id),
                    "get() after save() (lease kept)",
                    lease_clause="SAVE-KEEPS-LEASE",
                    clause="SAVE-CAS",
                )

        self.run_property(prop, first=_ANY_SNAPSHOT, second=_ANY_SNAPSHOT)

    @checks(
        "TRANSITION-ROUNDTRIP",
        "APPEND-IDEMPOTENT",
        "HISTORY-ORDERED",
        "HISTORY-SINCE",
        "HISTORY-PER-TASK",
        "HISTORY-UNKNOWN-EMPTY",
        "TIME-UTC-ROUNDTRIP",
    )
    def test_history_matches_model(self) -> None:
        """Appends in any order, replayed, over several tasks: history() equals the model."""

        def prop(ids: list[str], data: st.DataObject) -> None:
            # One row per (task_id, version): a replay carries the same content, as crash
            # recovery does (a replay with other content is APPEND-FIRST-WINS, a SHOULD
            # the contract checks on its own).
            firsts: dict[tuple[str, int], Transition] = {}
            for row, i, version in data.draw(_APPENDS, label="appends"):
                row = replace(row, task_id=ids[i % len(ids)], version=version)
                firsts.setdefault((row.task_id, row.version), row)
            rows = list(firsts.values())
            # Replays: the same rows again (crash recovery), in another order.
            replays = data.draw(st.permutations(rows), label="replays")
            model = Model()
            with self.opened_store() as store:
                # Every task exists first: an append for a task that does not is left open
                # by the guide (a foreign key from history to tasks refuses it).
                for task_id in ids:
                    _create_given(store, TaskSnapshot(task_id, "history", TaskStatus.PENDING,
                                                      0, _T0, _T0))
                for row in [*rows, *replays[: data.draw(st.integers(0, len(rows)))]]:
                    blamed(("APPEND-IDEMPOTENT",), functools.partial(store.append, row))
                    model.append(row)
                for task_id in ids:
                    for since in {0, *(v for (t, v) in model.history if t == task_id)}:
                        _same_history(store, model, task_id, since)
                unknown = "".join(ids) + "-never-appended"
                _same_history(store, model, unknown, 0)

        self.run_property(
            prop, ids=st.lists(cst.task_ids(), min_size=1, max_size=3, unique=True),
            data=st.data(),
        )

    @checks(
        "SUBMIT-THEN-CLAIM",
        "COMMAND-ROUNDTRIP",
        "CLAIM-ORDER",
        "CLAIM-LIMIT",
        "CLAIM-LEASE-EXCLUSIVE",
        "CLAIM-LEASE-PRECISE",
        "CLAIM-EXPIRED-RECLAIM",
        "TIME-INSTANT-ORDER",
        "TIME-UTC-ROUNDTRIP",
    )
    def test_claim_matches_model(self) -> None:
        """Submitted commands come back intact from claims, oldest first, limit obeyed, and
        the clock moves in between: leases (fractional ones too) hold exactly as long as
        asked, and end then."""

        def prop(commands: list[Command], now: datetime, data: st.DataObject) -> None:
            model = Model()
            lease = data.draw(cst.lease_seconds(), label="lease")
            with self.opened_store() as store:
                for command in commands:
                    store.submit_command(command)
                    model.submit(command)
                for step in range(data.draw(st.integers(1, 4), label="claims")):
                    if step:
                        # The clock moves by a share of the last lease: inside it past its
                        # whole seconds (1.25 s of 1.5), exactly at its end, just after.
                        now += timedelta(microseconds=data.draw(
                            st.sampled_from(_steps_within(lease)), label="step"))
                        lease = data.draw(cst.lease_seconds(), label="lease")
                    limit = data.draw(cst.limits(), label="limit")
                    mark(claim_cases(lease, now, model.leases.values()))
                    claimed = list(
                        store.claim_commands(now=now, lease_seconds=lease, limit=limit)
                    )
                    check_claim(
                        claimed, model.commands.values(), now=now, lease_seconds=lease,
                        limit=limit, last_ops=model.last_ops, leases=model.leases,
                    )
                    model.adopt_claim(claimed, now=now, lease_seconds=lease)

        self.run_property(
            prop, check="test_claim_matches_model",
            commands=cst.command_lists(), now=cst.aware_datetimes(max_year=2199), data=st.data()
        )

    # -- optimistic concurrency ---------------------------------------------------------
    @checks(
        "SAVE-VERSION-SKIP",
        "SAVE-CAS",
        "SAVE-CONFLICT-RAISES",
        "SAVE-MISSING-RAISES",
        "SAVE-NO-AUTO-RETRY",
    )
    def test_version_skip(self) -> None:
        """Along any increasing version path: only expect == stored succeeds, gaps allowed."""

        def prop(path: list[int], base: TaskSnapshot, data: st.DataObject) -> None:
            def at_version(version: int) -> TaskSnapshot:
                status = data.draw(cst.statuses(), label=f"status v{version}")
                return replace(base, task_id="skip", status=status, status_version=version)

            with self.opened_store() as store:
                first = at_version(path[0])
                missing = ("SAVE-MISSING-RAISES",)
                ghost = at_version(path[1])  # rising: path is strictly increasing
                blamed(missing, lambda: _conflict(
                    lambda: store.save(ghost, expect_version=path[0]), "save() of a missing task"
                ))
                blamed(missing, lambda: _same(
                    None, read_task(store, "skip", exists=False), "get() after it"
                ))
                _create_given(store, first)
                stored = first
                for version in path[1:]:
                    new = at_version(version)
                    held = stored.status_version
                    wrong = {held - 1, held + 1, version, data.draw(cst.versions(), label="other")}
                    for expect in sorted(w for w in wrong if w != held and 0 <= w < cst.INT64_MAX):
                        # Rising above this expect_version too: only the mismatch is wrong.
                        attempt = replace(new, status_version=max(version, expect + 1))
                        what = (f"save(v{attempt.status_version}, expect_version={expect}) "
                                f"over v{held}")
                        blamed(_CONFLICT, functools.partial(
                            _conflict,
                            functools.partial(store.save, attempt, expect_version=expect),
                            what,
                        ))
                        blamed(_CONFLICT, functools.partial(
                            _same, stored, read_task(store, "skip", exists=True),
                            f"get() after refused {what}"
                        ))
                    blamed(
                        (_save_clause(version, held),),
                        functools.partial(store.save, new, expect_version=held),
                    )
                    stored = replace(
                        new, lease_owner=stored.lease_owner, lease_until=stored.lease_until
                    )
                    same_snapshot(
                        stored, read_task(store, "skip", exists=True),
                        f"get() after save v{held} -> v{version}",
                        clause="SAVE-CAS",
                    )

        self.run_property(prop, path=cst.version_paths(), base=_ANY_SNAPSHOT, data=st.data())

    # -- touch ------------------------------------------------------------------------------
    @checks(
        "TOUCH-NO-VERSION",
        "TOUCH-ONLY-NAMED-FIELDS",
        "TOUCH-MISSING-IGNORED",
        "TOUCH-LEASE",
        "TOUCH-SIGNALS-SEPARATE",
        "SAVE-KEEPS-LEASE",
    )
    def test_touch_interleaved_with_saves(self) -> None:
        """Any interleaving of touch and save: version moves only by save, last lease kept."""

        def prop(first: TaskSnapshot, data: st.DataObject) -> None:
            model = Model()
            task_id = first.task_id
            with self.opened_store() as store:
                _create_given(store, first)
                model.create(first)
                for step in range(data.draw(st.integers(1, 8), label="steps")):
                    kind = data.draw(st.sampled_from(("touch", "save", "touch-missing")))
                    if kind == "save":
                        held = model.version_of(task_id)
                        assert held is not None
                        gap = data.draw(st.sampled_from((1, 2, 1000)), label="gap")
                        if held + gap > cst.INT64_MAX:
                            continue  # no room to rise: a non-rising save is left open
                        new = replace(
                            data.draw(_ANY_SNAPSHOT, label="save"),
                            task_id=task_id,
                            status_version=min(held + gap, cst.INT64_MAX),
                        )
                        blamed(
                            (_save_clause(new.status_version, held),),
                            functools.partial(store.save, new, expect_version=held),
                        )
                        model.save(new, held)
                    else:
                        progress = data.draw(_MAYBE_PROGRESS, label="progress")
                        beat = data.draw(_MAYBE_TIME, label="heartbeat_at")
                        owner = data.draw(_MAYBE_TEXT, label="lease_owner")
                        until = data.draw(_MAYBE_TIME, label="lease_until")
                        target = task_id if kind == "touch" else task_id + "-missing"
                        blamed(
                            ("TOUCH-MISSING-IGNORED",) if kind != "touch" else (),
                            functools.partial(
                                store.touch,
                                target,
                                progress=progress,
                                heartbeat_at=beat,
                                lease_owner=owner,
                                lease_until=until,
                            ),
                        )
                        model.touch(
                            target,
                            progress=progress,
                            heartbeat_at=beat,
                            lease_owner=owner,
                            lease_until=until,
                        )
                        blamed(("TOUCH-MISSING-IGNORED",), functools.partial(
                            _same, None, read_task(store, task_id + "-missing", exists=False),
                            "get() after touch() of a missing task",
                        ))
                    same_snapshot(
                        model.tasks[task_id],
                        read_task(store, task_id, exists=True),
                        f"get() after step {step} ({kind})",
                        lease_clause="SAVE-KEEPS-LEASE" if kind == "save" else None,
                        version_clause="TOUCH-NO-VERSION" if kind != "save" else None,
                    )

        self.run_property(prop, first=_ANY_SNAPSHOT, data=st.data())

    # -- query and counts -----------------------------------------------------------------
    @checks(*QUERY_CLAUSES)
    def test_query_matches_model(self) -> None:
        """Random tasks, random TaskQuery: the result is a valid answer of the model."""

        def prop(tasks: list[TaskSnapshot], data: st.DataObject) -> None:
            # Half the queries are aimed at these tasks (their names, prefixes, tags...,
            # limits below the match count), half drawn from the fixed pools.
            queries = data.draw(st.lists(cst.queries_for(tasks) | cst.queries(),
                                         min_size=2, max_size=10), label="queries")
            with self.opened_store() as store:
                for task in tasks:
                    _create_given(store, task)
                check_query(store.query(), tasks, None)
                check_query(store.query(None), tasks, None)
                for q in queries:
                    mark(query_cases(q, tasks))
                    check_query(store.query(q), tasks, q)

        self.run_property(prop, check="test_query_matches_model",
                          tasks=cst.snapshot_lists(min_size=1), data=st.data())

    @checks("SAVE-CAS", "SAVE-KEEPS-LEASE", "COUNTS-PER-STATUS", "COUNTS-ALL-KEYS", *QUERY_CLAUSES,
            "SNAPSHOT-FULL-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_single_field_save(self) -> None:
        """A save that changes one field and keeps the rest -- what a caller sends -- then
        get(), every query that field can affect, and counts() agree with the model
        (single_field.py: a derived copy refreshed only when "its" field changes)."""

        def prop(tasks: list[TaskSnapshot], donors: list[TaskSnapshot]) -> None:
            held = min(tasks[0].status_version, cst.INT64_MAX - len(SAVED_FIELDS))
            tasks[0] = current = replace(tasks[0], status_version=held)
            model = {t.task_id: t for t in tasks}
            with self.opened_store() as store:
                for task in tasks:
                    _create_given(store, task)
                # Each field in turn, on the same task: one save changes it alone; the
                # reads after it in one order, alternating (single_field.order_of) from a
                # parity the example's first id gives.
                flip = zlib.crc32(tasks[0].task_id.encode("utf-8", "surrogatepass")) & 1
                for turn, (field, donor) in enumerate(zip(SAVED_FIELDS, donors, strict=True),
                                                      start=flip):
                    new = one_field_changed(current, field, donor, held + 1)
                    if new is None:
                        continue  # the donor holds the same value: no change to make
                    mark([case_of(field)])
                    blamed(("SAVE-CAS",), functools.partial(store.save, new, expect_version=held))
                    model[new.task_id] = new
                    same_snapshot(new, read_task(store, new.task_id, exists=True),
                                  f"get() after a save changing only {field}",
                                  lease_clause="SAVE-KEEPS-LEASE", clause="SAVE-CAS")
                    for q in reads_after(current, new, newest_first=order_of(turn)):
                        check_query(store.query(q), model.values(), q)
                    want, got = expected_counts(model.values()), dict(store.counts())
                    only_zeros = all(want[k] == 0 for k in set(want) - set(got)) and all(
                        got[k] == want.get(k) for k in got)
                    blamed(("COUNTS-ALL-KEYS" if only_zeros else "COUNTS-PER-STATUS",),
                           functools.partial(_same, want, got,
                                             f"counts() after a save changing only {field}"))
                    current, held = new, held + 1

        fields = len(SAVED_FIELDS)
        self.run_property(prop, check="test_single_field_save",
                          tasks=cst.snapshot_lists(min_size=2, max_size=6),
                          donors=st.lists(_ANY_SNAPSHOT, min_size=fields, max_size=fields))

    @checks("COUNTS-PER-STATUS", "COUNTS-ALL-KEYS")
    def test_counts_match_model(self) -> None:
        """counts() equals the model's, every status present, after creates and saves."""

        def prop(tasks: list[TaskSnapshot], moves: list[tuple[int, TaskStatus]]) -> None:
            model = Model()
            with self.opened_store() as store:
                _same(expected_counts([]), dict(store.counts()), "counts() of an empty store")
                for task in tasks:
                    _create_given(store, task)
                    model.create(task)
                for index, status in moves if tasks else ():
                    current = model.tasks[tasks[index % len(tasks)].task_id]
                    held = current.status_version
                    if held >= cst.INT64_MAX:
                        continue  # no room to rise: a non-rising save is left open
                    new = replace(current, status=status,
                                  status_version=min(held + 1, cst.INT64_MAX))
                    store.save(new, expect_version=held)
                    model.save(new, held)
                want, got = expected_counts(model.tasks.values()), dict(store.counts())
                # Only statuses with no task missing: COUNTS-ALL-KEYS; a wrong number: PER-STATUS.
                only_zeros = all(want[k] == 0 for k in set(want) - set(got)) and all(
                    got[k] == want.get(k) for k in got
                )
                blamed(
                    ("COUNTS-ALL-KEYS" if only_zeros else "COUNTS-PER-STATUS",),
                    functools.partial(_same, want, got, "counts()"),
                )

        self.run_property(
            prop,
            tasks=cst.snapshot_lists(),
            moves=st.lists(st.tuples(st.integers(0, 100), cst.statuses()), max_size=5),
        )

    # -- prune ---------------------------------------------------------------------------------
    @checks("PRUNE-TERMINAL-ONLY", "PRUNE-OLDEST-FIRST", "PRUNE-HISTORY", "HISTORY-PER-TASK")
    def test_prune_matches_model(self) -> None:
        """prune(k) drops only terminal tasks, the oldest, with their history; returns the count."""

        def prop(tasks: list[TaskSnapshot], keep: int, twins: bool) -> None:
            if twins:
                tasks = [*tasks, *look_alikes(tasks)]
            # From 0 to every terminal task: a keep above the terminal count prunes nothing,
            # and drawn from 0-9 over at most 8 tasks it mostly was.
            keep %= sum(t.status.is_terminal for t in tasks) + 1
            model = Model()
            with self.opened_store() as store:
                for task in tasks:
                    _create_given(store, task)
                    model.create(task)
                    row = Transition(task.task_id, 1, None, task.status, task.updated_at)
                    store.append(row)
                    model.append(row)
                mark(prune_cases(tasks, keep))
                returned = store.prune(keep_terminal=keep)
                left = present(store, model.tasks)
                dropped = set(model.tasks) - left
                check_prune(dropped, returned, model.tasks, keep)
                model.adopt_prune(dropped)
                for task in tasks:
                    _same(model.tasks.get(task.task_id),
                          read_task(store, task.task_id, exists=task.task_id in model.tasks),
                          f"get({task.task_id!r}) after prune")
                    rows = list(store.history(task.task_id))
                    # Another task's rows in it: history() filters by a pattern or prefix
                    # (HISTORY-PER-TASK), whatever the prune did.
                    owner = ("HISTORY-PER-TASK" if any(r.task_id != task.task_id for r in rows)
                             else "PRUNE-HISTORY")
                    blamed((owner,), functools.partial(
                        _same, model.history_of(task.task_id), rows,
                        f"history({task.task_id!r}) after prune",
                    ))

        self.run_property(
            prop,
            check="test_prune_matches_model",
            tasks=cst.snapshot_lists(max_size=8),
            keep=st.integers(0, 9),
            twins=st.booleans(),
        )

