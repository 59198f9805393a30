"""The state machine's task rules: create, save, get, query, append, history, touch.

One job: each rule calls one task or history method of the store, checks the answer against
the model (``oracle``) and adopts it. Split out of :mod:`chongming_conformance.checking.stateful` by
the protocol's seam: these rules touch task snapshots and their history, the ones in
``_command_rules`` the command queue. The rule bodies are unchanged; hypothesis orders rules
by name, not by class, so the split changes no draw. Private: use
:class:`chongming_conformance.checking.stateful.StoreStateMachine`.
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta, tzinfo
from functools import partial

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from ... import strategies as cst
from ...oracle import check_query, history_culprits
from ...oracle.assertions import QUERY_CLAUSES
from ...oracle.assertions import expect_raises as _raises
from ...oracle.blame import blame, blamed, same_snapshot, touch_culprit
from ...protocol.errors import ConcurrencyConflict, StoreError
from ...protocol.model import Progress, TaskQuery, TaskSnapshot, TaskStatus, Transition
from ...strategies.single_field import (
    SAVED_FIELDS,
    case_of,
    one_field_changed,
    order_of,
    reads_after,
)
from ..cases import mark, query_cases
from ..observe import read_task
from ._inputs import _GAPS, _IDS, _MAX_VERSION, _SNAPSHOT_FIELDS, _STEPS_US
from ._state import MachineState, _blamed, _same

__all__ = ["TaskRules"]

# The bundle the rules below draw task ids from, by the name they use in the class body.
tasks = MachineState.tasks


class TaskRules(MachineState):
    """The rules over task snapshots and history; the command rules build on them."""

    # -- task snapshots -------------------------------------------------------------
    @precondition(lambda self: not self.closed)
    @rule(
        target=tasks,
        snapshot=cst.snapshots(**_SNAPSHOT_FIELDS) | cst.snapshots(full=True, **_SNAPSHOT_FIELDS),
    )
    @_blamed(
        "CREATE-THEN-GET",
        "CREATE-DUPLICATE-RAISES",
        "SNAPSHOT-FULL-ROUNDTRIP",
        "TIME-UTC-ROUNDTRIP",
    )
    def create(self, snapshot: TaskSnapshot) -> str:
        before = self.model.tasks.get(snapshot.task_id)
        if self.model.create(snapshot):
            self.created.add(snapshot.task_id)
            blamed(("CREATE-THEN-GET",), partial(self.store.create, snapshot))
            same_snapshot(
                snapshot, read_task(self.store, snapshot.task_id, exists=True),
                "get() after create()", clause="CREATE-THEN-GET",
            )
        else:
            dup = ("CREATE-DUPLICATE-RAISES",)
            blamed(dup, lambda: _raises(
                StoreError, lambda: self.store.create(snapshot), "create() of an existing id"
            ))
            blamed(dup, lambda: _same(
                before, read_task(self.store, snapshot.task_id, exists=True),
                "get() after a refused create()",
            ))
        return snapshot.task_id

    @precondition(lambda self: not self.closed)
    @rule(
        task_id=tasks,
        delta=st.sampled_from((-1, 0, 1)),
        gap=_GAPS,
        status=cst.statuses(),
        lease_owner=st.none() | cst.texts(max_size=4),
        full=st.booleans(),
        data=st.data(),
    )
    @_blamed(
        "SAVE-CAS",
        "SAVE-CONFLICT-RAISES",
        "SAVE-VERSION-SKIP",
        "SAVE-KEEPS-LEASE",
        "SAVE-MISSING-RAISES",
        "SNAPSHOT-FULL-ROUNDTRIP",
        "TIME-UTC-ROUNDTRIP",
    )
    def save(
        self,
        task_id: str,
        delta: int,
        gap: int,
        status: TaskStatus,
        lease_owner: str | None,
        full: bool,
        data: st.DataObject,
    ) -> None:
        held = self.model.version_of(task_id)
        base = replace(data.draw(cst.snapshots(full=full), label="snapshot"), task_id=task_id)
        if held is None:  # pruned: the task is gone
            # The new version rises above expect_version in every save the machine makes: a
            # store may refuse one that does not (left open by the guide).
            new = replace(base, status=status,
                          status_version=min(base.status_version, _MAX_VERSION) + 1)
            missing = ("SAVE-MISSING-RAISES",)
            blamed(missing, lambda: _raises(
                ConcurrencyConflict,
                lambda: self.store.save(new, expect_version=new.status_version - 1),
                f"save() of missing task {task_id!r}",
            ))
            blamed(missing, lambda: _same(
                None, read_task(self.store, task_id, exists=False), "get() after it"
            ))
            return
        expect = held + delta if held + delta >= 0 else held + 1
        new = replace(base, status=status, status_version=max(held, expect) + gap,
                      lease_owner=lease_owner)
        before = self.model.tasks[task_id]
        if self.model.save(new, expect):
            # A valid save refused: a version skip (gap > 1) is its own clause.
            refused = "SAVE-VERSION-SKIP" if new.status_version != expect + 1 else "SAVE-CAS"
            blamed((refused,), partial(self.store.save, new, expect_version=expect))
            same_snapshot(
                self.model.tasks[task_id],
                read_task(self.store, task_id, exists=True),
                "get() after save()",
                lease_clause="SAVE-KEEPS-LEASE",
                clause="SAVE-CAS",
            )
        else:
            what = f"save(expect_version={expect}) over stored v{held}"
            # Nothing raised: no version check at all, or a hidden re-read-and-retry.
            conflict = ("SAVE-CONFLICT-RAISES", "SAVE-NO-AUTO-RETRY")
            blamed(conflict, lambda: _raises(
                ConcurrencyConflict, lambda: self.store.save(new, expect_version=expect), what
            ))
            blamed(conflict, lambda: _same(
                before, read_task(self.store, task_id, exists=True), f"get() after refused {what}"
            ))

    @precondition(lambda self: not self.closed)
    @rule(task_id=tasks, donor=cst.snapshots(full=True) | cst.snapshots())
    @_blamed("SAVE-CAS", "SAVE-KEEPS-LEASE", *QUERY_CLAUSES, "SNAPSHOT-FULL-ROUNDTRIP",
             "TIME-UTC-ROUNDTRIP")
    def save_one_field(self, task_id: str, donor: TaskSnapshot) -> None:
        """What a caller sends: saves that each change one field of the stored snapshot and
        keep the rest, each followed by every query that field can affect
        (``single_field.py``; counts() is the invariant's after every step). Every field
        in turn, from a start taken from the donor's id (crc32, the same in every
        process): fewer fields per step left some unchanged in a whole ci run, depending on
        which draws the run made."""
        start = zlib.crc32(donor.task_id.encode("utf-8", "surrogatepass"))
        for _ in range(len(SAVED_FIELDS)):
            turn = self.one_field_turn
            field = SAVED_FIELDS[(start + turn) % len(SAVED_FIELDS)]
            self.one_field_turn += 1
            held = self.model.version_of(task_id)
            if held is None or held >= _MAX_VERSION:
                return  # pruned (the save rule covers a missing task), or no room to rise
            current = self.model.tasks[task_id]
            new = one_field_changed(current, field, donor, held + 1)
            if new is None:
                continue  # the donor holds the same value
            mark([case_of(field)])
            self.model.save(new, held)
            blamed(("SAVE-CAS",), partial(self.store.save, new, expect_version=held))
            same_snapshot(self.model.tasks[task_id],
                          read_task(self.store, task_id, exists=True),
                          f"get() after a save changing only {field}",
                          lease_clause="SAVE-KEEPS-LEASE", clause="SAVE-CAS")
            for q in reads_after(current, new, newest_first=order_of(turn)):
                check_query(self.store.query(q), self.model.tasks.values(), q)

    @precondition(lambda self: not self.closed)
    @rule(task_id=tasks | _IDS)
    @_blamed("GET-MISSING-NONE", "CREATE-THEN-GET", "PRUNE-TERMINAL-ONLY", "PRUNE-OLDEST-FIRST",
             "SNAPSHOT-FULL-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def get(self, task_id: str) -> None:
        expected = self.model.tasks.get(task_id)
        got = read_task(self.store, task_id, exists=expected is not None)
        if expected is None and got is not None:
            # Never created: get() invents a task; created, then pruned: prune kept it.
            culprit = "PRUNE-OLDEST-FIRST" if task_id in self.created else "GET-MISSING-NONE"
            blamed((culprit,), lambda: _same(None, got, f"get({task_id!r})"))
        same_snapshot(expected, got, f"get({task_id!r})", clause="CREATE-THEN-GET")

    @precondition(lambda self: not self.closed)
    @rule(q=cst.queries(), data=st.data(), aimed=st.booleans())
    @_blamed(*QUERY_CLAUSES, "SNAPSHOT-FULL-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def query(self, q: TaskQuery, data: st.DataObject, aimed: bool) -> None:
        tasks = list(self.model.tasks.values())
        if aimed and tasks:  # a query built from what the store holds (cst.queries_for)
            q = data.draw(cst.queries_for(tasks), label="aimed query")
        mark(query_cases(q, tasks))
        check_query(self.store.query(q), self.model.tasks.values(), q)
        check_query(self.store.query(), self.model.tasks.values(), None)

    # -- history ---------------------------------------------------------------------
    @precondition(lambda self: not self.closed and bool(self.model.tasks))
    @rule(data=st.data(), version=st.integers(0, 4), to_status=cst.statuses())
    @_blamed("APPEND-IDEMPOTENT")
    def append(self, data: st.DataObject, version: int, to_status: TaskStatus) -> None:
        # Only for a task that exists: an append for a task never created (or pruned) is
        # left open by the guide -- a foreign key from history to tasks refuses it.
        task_id = data.draw(st.sampled_from(sorted(self.model.tasks)), label="task_id")
        # A replay of an existing (task_id, version) carries the same content, as
        # crash recovery does; differing content is APPEND-FIRST-WINS, a SHOULD the
        # contract checks on its own.
        row = self.model.history.get((task_id, version)) or Transition(
            task_id, version, None, to_status, self.now(UTC)
        )
        self.store.append(row)
        self.model.append(row)

    @precondition(lambda self: not self.closed)
    @rule(task_id=tasks | _IDS, since=st.integers(0, 5))
    @_blamed(
        "APPEND-IDEMPOTENT",
        "HISTORY-ORDERED",
        "HISTORY-SINCE",
        "HISTORY-PER-TASK",
        "HISTORY-UNKNOWN-EMPTY",
        "TRANSITION-ROUNDTRIP",
        "TIME-UTC-ROUNDTRIP",
        "PRUNE-HISTORY",
    )
    def history(self, task_id: str, since: int) -> None:
        want = self.model.history_of(task_id, since)
        got = blamed(
            ("HISTORY-UNKNOWN-EMPTY",) if not want else (),
            lambda: list(self.store.history(task_id, since_version=since)),
        )
        try:
            _same(want, got, f"history({task_id!r}, since_version={since})")
        except AssertionError as exc:
            pruned = task_id not in self.model.tasks and task_id in self.created
            blame(exc, history_culprits(want, got, since=since, pruned=pruned))
            raise

    # -- touch -----------------------------------------------------------------------
    @precondition(lambda self: not self.closed)
    @rule(
        task_id=tasks | _IDS,
        progress=st.none() | cst.progresses(),
        beat=st.none() | cst.aware_datetimes(),
        owner=st.none() | cst.texts(max_size=4),
        until_us=st.none() | st.sampled_from(_STEPS_US),
        zone=cst.offsets(),
    )
    @_blamed(
        "TOUCH-NO-VERSION",
        "TOUCH-ONLY-NAMED-FIELDS",
        "TOUCH-MISSING-IGNORED",
        "TOUCH-LEASE",
        "TOUCH-SIGNALS-SEPARATE",
    )
    def touch(
        self,
        task_id: str,
        progress: Progress | None,
        beat: datetime | None,
        owner: str | None,
        until_us: int | None,
        zone: tzinfo,
    ) -> None:
        until = None if until_us is None else self.now(zone) + timedelta(microseconds=until_us)
        blamed(
            ("TOUCH-MISSING-IGNORED",) if task_id not in self.model.tasks else (),
            lambda: self.store.touch(
                task_id, progress=progress, heartbeat_at=beat, lease_owner=owner,
                lease_until=until,
            ),
        )
        self.model.touch(
            task_id, progress=progress, heartbeat_at=beat, lease_owner=owner, lease_until=until
        )
        expected = self.model.tasks.get(task_id)
        got = read_task(self.store, task_id, exists=expected is not None)
        named = {
            name for name, value in (("progress", progress), ("heartbeat_at", beat),
                                     ("lease_owner", owner), ("lease_until", until))
            if value is not None
        }
        blamed((touch_culprit(expected, got, named),),
               lambda: _same(expected, got, "get() after touch()"))
