"""StoreContract: the single-connection contract every TaskStore must pass.

Subclass it, implement ``make_store()``, and pytest collects the tests::

    from chongming_conformance.contract import StoreContract

    class TestMyStore(StoreContract):
        def make_store(self):
            return MyStore(...)          # or a generator / context manager

No pytest import is needed (plain ``assert``), so the contract is a
specification first and a test file second. Each test is named after the
clause it checks (``test_<clause>__<what>``) and declares it with
``@checks``; the catalogue is in ``chongming_conformance.clauses``.

Every conditional write has a ``_conflict`` twin: it provokes the refusal and
then re-reads the store to prove nothing changed. Every store the contract
opens is closed by ``teardown_method``.

What this cannot see: anything across processes. See the stress harness.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from datetime import UTC, timedelta
from typing import Any

from ._checks import expect_raises as _raises
from .clauses import checks
from .errors import ConcurrencyConflict, StoreError
from .factory import enter_store, protocol_mismatches
from .model import (
    Command,
    CommandKind,
    Progress,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from .protocol import PROTOCOL_METHODS, TaskStore
from .samples import (
    KATHMANDU,
    ST_JOHNS,
    at,
    command,
    full_command,
    full_snapshot,
    full_transition,
    snapshot,
    transition,
)

__all__ = ["StoreContract"]

LEASE = 30.0  # seconds; the lease every claim in the contract asks for


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


def _ids(tasks: Sequence[TaskSnapshot]) -> list[str]:
    return [t.task_id for t in tasks]


def _cmd_ids(commands: Sequence[Command]) -> list[str]:
    return [c.command_id for c in commands]


def _versions(rows: Sequence[Transition]) -> list[int]:
    return [t.version for t in rows]


class StoreContract:
    """Base class: implement ``make_store()``; every ``test_*`` method is one check."""

    store: TaskStore
    _stack: contextlib.ExitStack

    # -- the one method a subclass provides ---------------------------------------------
    def make_store(self) -> Any:
        """Return a fresh, isolated, empty store (or a generator/context manager of one)."""
        raise NotImplementedError(f"{type(self).__name__} must implement make_store()")

    # -- lifecycle -------------------------------------------------------------------------
    def open_store(self) -> TaskStore:
        """Open one more store via ``make_store``; it is closed at teardown."""
        return enter_store(self.make_store, self._stack, origin=f"{type(self).__name__}.make_store")

    def setup_method(self, method: object = None) -> None:
        self._stack = contextlib.ExitStack()
        try:
            self.store = self.open_store()
        except BaseException:
            self._stack.close()
            raise

    def teardown_method(self, method: object = None) -> None:
        self._stack.close()

    # -- helpers ------------------------------------------------------------------------------
    def _get(self, task_id: str) -> TaskSnapshot:
        found = self.store.get(task_id)
        assert found is not None, f"get({task_id!r}) returned None for a task that exists"
        return found

    def _assert_stored(self, expected: TaskSnapshot, why: str) -> None:
        actual = self.store.get(expected.task_id)
        assert actual == expected, f"{why}: {_diff(expected, actual)}"

    def _create_all(self, *snaps: TaskSnapshot) -> None:
        for s in snaps:
            self.store.create(s)

    def _query_ids(self, **filters: Any) -> list[str]:
        return _ids(self.store.query(TaskQuery(**filters)))

    # ========================================================================================
    # structure
    # ========================================================================================
    @checks("PROTOCOL-METHODS")
    def test_protocol_methods__store_is_structurally_a_taskstore(self) -> None:
        target = getattr(self.store, "__chongming_target__", self.store)
        assert isinstance(target, TaskStore), "isinstance(store, TaskStore) is False"
        problems = protocol_mismatches(target)
        assert not problems, "store differs from the protocol: " + "; ".join(problems)
        for name in PROTOCOL_METHODS:
            assert callable(getattr(target, name)), f"{name} is not callable"

    # ========================================================================================
    # create / get
    # ========================================================================================
    @checks("CREATE-THEN-GET")
    def test_create_then_get__returns_what_was_created(self) -> None:
        s = snapshot("t-1", name="first")
        self.store.create(s)
        self._assert_stored(s, "get() after create()")

    @checks("CREATE-DUPLICATE-RAISES")
    def test_create_duplicate_raises__conflict_leaves_original(self) -> None:
        original = snapshot("t-1", name="original", status=TaskStatus.RUNNING, version=5)
        self.store.create(original)
        impostor = snapshot("t-1", name="impostor", status=TaskStatus.PENDING, version=1)
        _raises(StoreError, lambda: self.store.create(impostor), "create() of an existing id")
        self._assert_stored(original, "a refused create() must not change the stored task")
        assert len(self.store.query()) == 1, "a refused create() added a row"

    @checks("GET-MISSING-NONE")
    def test_get_missing_none__empty_and_populated_store(self) -> None:
        assert self.store.get("nope") is None, "get() of an unknown id on an empty store"
        self.store.create(snapshot("t-1"))
        assert self.store.get("nope") is None, "get() of an unknown id"
        assert self.store.get("t-") is None, "get() must match the id exactly, not a prefix"

    # ========================================================================================
    # save
    # ========================================================================================
    @checks("SAVE-CAS")
    def test_save_cas__matching_version_is_written(self) -> None:
        self.store.create(snapshot("t-1", version=1))
        v2 = snapshot("t-1", version=2, status=TaskStatus.RUNNING, started_at=at(1))
        self.store.save(v2, expect_version=1)
        self._assert_stored(v2, "get() after save(expect_version=stored)")
        v3 = v2.evolve(status_version=3, status=TaskStatus.SUCCEEDED, finished_at=at(2))
        self.store.save(v3, expect_version=2)
        self._assert_stored(v3, "second save in a row")

    @checks("SAVE-CONFLICT-RAISES")
    def test_save_conflict_raises__stale_version_conflict_changes_nothing(self) -> None:
        self.store.create(snapshot("t-1", version=1))
        v2 = snapshot("t-1", version=2, status=TaskStatus.RUNNING)
        self.store.save(v2, expect_version=1)
        stale = snapshot("t-1", version=3, name="stale", status=TaskStatus.FAILED)
        _raises(
            ConcurrencyConflict,
            lambda: self.store.save(stale, expect_version=1),
            "save() with expect_version below the stored version",
        )
        self._assert_stored(v2, "a refused save() must not change the stored task")

    @checks("SAVE-CONFLICT-RAISES")
    def test_save_conflict_raises__future_version_conflict_changes_nothing(self) -> None:
        original = snapshot("t-1", version=4)
        self.store.create(original)
        for expect in (5, 6, 100):
            ahead = snapshot("t-1", version=expect + 1, name="ahead", status=TaskStatus.FAILED)

            def save_ahead(ahead: TaskSnapshot = ahead, expect: int = expect) -> None:
                self.store.save(ahead, expect_version=expect)

            _raises(
                ConcurrencyConflict,
                save_ahead,
                f"save() with expect_version={expect} above the stored version 4",
            )
        self._assert_stored(original, "a refused save() must not change the stored task")

    @checks("SAVE-CONFLICT-DETAILS")
    def test_save_conflict_details__task_expected_actual(self) -> None:
        self.store.create(snapshot("t-1", version=2))
        exc = _raises(
            ConcurrencyConflict,
            lambda: self.store.save(snapshot("t-1", version=9), expect_version=8),
            "save() with a wrong expect_version",
        )
        assert exc.task_id == "t-1", f"conflict.task_id is {exc.task_id!r}"
        assert exc.expected == 8, f"conflict.expected is {exc.expected!r}, the caller passed 8"
        assert exc.actual == 2, f"conflict.actual is {exc.actual!r}, the store holds 2"
        missing = _raises(
            ConcurrencyConflict,
            lambda: self.store.save(snapshot("ghost", version=2), expect_version=1),
            "save() of a missing task",
        )
        assert missing.actual is None, f"conflict.actual for a missing task is {missing.actual!r}"

    @checks("SAVE-NO-AUTO-RETRY")
    def test_save_no_auto_retry__second_writer_is_refused_not_merged(self) -> None:
        self.store.create(snapshot("t-1", version=1))
        # Two writers both read version 1. A saves first; B must be told, not retried.
        writer_a = snapshot("t-1", version=2, name="writer-a", status=TaskStatus.RUNNING)
        writer_b = snapshot("t-1", version=2, name="writer-b", status=TaskStatus.CANCELLED)
        self.store.save(writer_a, expect_version=1)
        _raises(
            ConcurrencyConflict,
            lambda: self.store.save(writer_b, expect_version=1),
            "the second writer's save()",
        )
        self._assert_stored(writer_a, "the first writer's snapshot must survive the conflict")

    @checks("SAVE-VERSION-SKIP")
    def test_save_version_skip__gaps_are_accepted(self) -> None:
        self.store.create(snapshot("t-1", version=2))
        path = [(2, 4), (4, 5), (5, 19), (19, 1000)]
        for expect, new in path:
            s = snapshot("t-1", version=new, name=f"at-{new}")
            self.store.save(s, expect_version=expect)
            self._assert_stored(s, f"save() jumping from version {expect} to {new}")

    @checks("SAVE-VERSION-SKIP")
    def test_save_version_skip__from_zero(self) -> None:
        self.store.create(snapshot("t-1", version=0))
        s = snapshot("t-1", version=3)
        self.store.save(s, expect_version=0)
        self._assert_stored(s, "save() from version 0 to 3")

    @checks("SAVE-KEEPS-LEASE")
    def test_save_keeps_lease__lease_from_create_survives(self) -> None:
        leased = snapshot("t-1", version=1, lease_owner="sup-1", lease_until=at(300))
        self.store.create(leased)
        in_memory = snapshot("t-1", version=2, status=TaskStatus.RUNNING)  # lease None
        self.store.save(in_memory, expect_version=1)
        got = self._get("t-1")
        assert (got.lease_owner, got.lease_until) == ("sup-1", at(300)), (
            f"save() clobbered the lease: now {got.lease_owner!r}, {got.lease_until!r}"
        )
        assert got.status is TaskStatus.RUNNING and got.status_version == 2, "save() not applied"

    @checks("SAVE-KEEPS-LEASE")
    def test_save_keeps_lease__lease_from_touch_survives(self) -> None:
        self.store.create(snapshot("t-1", version=1))
        self.store.touch("t-1", lease_owner="sup-2", lease_until=at(120))
        # The snapshot carries an older, different lease: it must still be ignored.
        old = snapshot("t-1", version=2, lease_owner="sup-old", lease_until=at(5))
        self.store.save(old, expect_version=1)
        got = self._get("t-1")
        assert (got.lease_owner, got.lease_until) == ("sup-2", at(120)), (
            f"save() wrote the snapshot's lease: now {got.lease_owner!r}, {got.lease_until!r}"
        )

    @checks("SAVE-MISSING-RAISES")
    def test_save_missing_raises__and_creates_nothing(self) -> None:
        ghost = snapshot("ghost", version=2)
        _raises(
            ConcurrencyConflict,
            lambda: self.store.save(ghost, expect_version=1),
            "save() of a task that does not exist",
        )
        assert self.store.get("ghost") is None, "save() of a missing task created it"
        assert list(self.store.query()) == [], "save() of a missing task added a row"

    # ========================================================================================
    # query
    # ========================================================================================
    @checks("QUERY-ALL")
    def test_query_all__empty_store(self) -> None:
        assert list(self.store.query()) == [], "query() on an empty store"
        assert list(self.store.query(TaskQuery())) == [], "query(TaskQuery()) on an empty store"

    @checks("QUERY-ALL")
    def test_query_all__none_means_no_filter(self) -> None:
        snaps = [snapshot(f"t-{i}", created=i) for i in range(3)]
        self._create_all(*snaps)
        expected = ["t-0", "t-1", "t-2"]
        assert _ids(self.store.query()) == expected, "query()"
        assert _ids(self.store.query(None)) == expected, "query(None)"
        assert _ids(self.store.query(TaskQuery())) == expected, "query(TaskQuery())"
        assert list(self.store.query()) == snaps, "query() must return full snapshots"

    @checks("QUERY-ORDER-CREATED")
    def test_query_order_created__ascending_and_newest_first(self) -> None:
        self._create_all(*(snapshot(f"t-{i}", created=i) for i in (3, 0, 4, 1, 2)))
        asc = ["t-0", "t-1", "t-2", "t-3", "t-4"]
        assert self._query_ids() == asc, "ascending by created_at"
        assert self._query_ids(newest_first=True) == asc[::-1], "newest_first descending"

    @checks("QUERY-TIES-COMPLETE")
    def test_query_ties_complete__equal_created_at_all_returned(self) -> None:
        self._create_all(
            snapshot("z-tie", created=5),
            snapshot("a-tie", created=5),
            snapshot("m-tie", created=5),
            snapshot("first", created=1),
            snapshot("last", created=9),
        )
        got = self._query_ids()
        assert len(got) == 5, f"expected 5 tasks, got {got}"
        assert got[0] == "first" and got[-1] == "last", f"order around ties is wrong: {got}"
        assert set(got[1:4]) == {"z-tie", "a-tie", "m-tie"}, f"tied tasks missing: {got}"
        limited = self._query_ids(limit=3)
        assert limited[0] == "first" and set(limited[1:]) < {"z-tie", "a-tie", "m-tie"}, (
            f"limit=3 must give 'first' then two of the tied tasks, got {limited}"
        )

    @checks("QUERY-STATUSES")
    def test_query_statuses__exact_membership(self) -> None:
        statuses = [TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.FAILED, TaskStatus.RUNNING]
        for i, status in enumerate(statuses):
            self.store.create(snapshot(f"t-{i}", status=status, created=i))
        assert self._query_ids(statuses={TaskStatus.RUNNING}) == ["t-1", "t-3"]
        assert self._query_ids(statuses={TaskStatus.RUNNING, TaskStatus.FAILED}) == [
            "t-1",
            "t-2",
            "t-3",
        ]
        assert self._query_ids(statuses={TaskStatus.LOST}) == [], "no task is LOST"

    @checks("QUERY-NAME-EXACT")
    def test_query_name_exact__no_prefix_or_case_folding(self) -> None:
        for i, name in enumerate(["build", "build-2", "Build", "rebuild", "build "]):
            self.store.create(snapshot(f"t-{i}", name=name, created=i))
        assert self._query_ids(name="build") == ["t-0"], "name must match exactly"
        assert self._query_ids(name="BUILD") == [], "name match is case-sensitive"

    @checks("QUERY-NAME-PREFIX-LITERAL")
    def test_query_name_prefix_literal__wildcards_match_themselves(self) -> None:
        names = [
            "50%_done",
            "50x_done",
            "50%Xdone",
            "a\\b",
            "a\\\\b",
            "axb",
            "Report",
            "report-1",
            "",
        ]
        for i, name in enumerate(names):
            self.store.create(snapshot(f"t-{i}", name=name, created=i))

        def by_prefix(prefix: str) -> list[str]:
            return [names[int(t[2:])] for t in self._query_ids(name_prefix=prefix)]

        assert by_prefix("50%_") == ["50%_done"], "'%' and '_' must be literal"
        assert by_prefix("50%") == ["50%_done", "50%Xdone"], "'%' must be literal"
        assert by_prefix("50_") == [], "'_' must not match one character"
        assert by_prefix("a\\") == ["a\\b", "a\\\\b"], "'\\' must be literal"
        assert by_prefix("a\\\\") == ["a\\\\b"], "'\\\\' must be literal"
        assert by_prefix("rep") == ["report-1"], "name_prefix is case-sensitive"
        assert by_prefix("report-1") == ["report-1"], "a full name is its own prefix"
        assert by_prefix("") == names, "the empty prefix matches every name, even ''"

    @checks("QUERY-TAG-EXACT")
    def test_query_tag_exact__no_substring_matches(self) -> None:
        tag_sets = [
            {"io"},
            {"ios"},
            {"bio"},
            {"i"},
            {"IO"},
            {"io,", "x"},
            {"a,", ",b"},
            {'say "hi"'},
            {"[x]"},
            {"io", "gpu"},
        ]
        for i, tags in enumerate(tag_sets):
            self.store.create(snapshot(f"t-{i}", tags=frozenset(tags), created=i))
        assert self._query_ids(tag="io") == ["t-0", "t-9"], "'io' must not match ios/bio/IO/io,"
        assert self._query_ids(tag="i") == ["t-3"], "'i' must not match a longer tag"
        assert self._query_ids(tag="IO") == ["t-4"], "tag match is case-sensitive"
        assert self._query_ids(tag=",") == [], "',' is no task's tag (JSON separators!)"
        assert self._query_ids(tag='","') == [], "a quoted separator is no task's tag"
        assert self._query_ids(tag='say "hi"') == ["t-7"], "tags with quotes"
        assert self._query_ids(tag="[x]") == ["t-8"], "tags with brackets"
        assert self._query_ids(tag="io,") == ["t-5"], "tags with a comma"
        assert self._query_ids(tag="") == [], "the empty tag is no task's tag"

    @checks("QUERY-BUCKETS")
    def test_query_buckets__membership_zero_and_none(self) -> None:
        for i, bucket in enumerate([0, 1, 2, None, 1, 10]):
            self.store.create(snapshot(f"t-{i}", bucket=bucket, created=i))
        assert self._query_ids(buckets={1, 2}) == ["t-1", "t-2", "t-4"]
        assert self._query_ids(buckets={0}) == ["t-0"], "bucket 0 is a bucket (falsy trap)"
        assert self._query_ids(buckets={3}) == [], "no task in bucket 3"
        assert "t-3" not in self._query_ids(buckets={0, 1, 2, 10}), "bucket None never matches"

    @checks("QUERY-PIPELINE")
    def test_query_pipeline__exact_run_id(self) -> None:
        for i, run in enumerate(["run-1", "run-10", None, "run-1", "RUN-1"]):
            self.store.create(snapshot(f"t-{i}", pipeline_run_id=run, created=i))
        assert self._query_ids(pipeline_run_id="run-1") == ["t-0", "t-3"]
        assert self._query_ids(pipeline_run_id="run-") == [], "no prefix matching"

    @checks("QUERY-LIMIT")
    def test_query_limit__first_n_in_requested_order(self) -> None:
        self._create_all(*(snapshot(f"t-{i}", created=i) for i in (2, 4, 0, 3, 1)))
        assert self._query_ids(limit=2) == ["t-0", "t-1"], "limit takes the oldest first"
        assert self._query_ids(limit=2, newest_first=True) == ["t-4", "t-3"], (
            "with newest_first, limit takes the newest"
        )
        assert self._query_ids(limit=1) == ["t-0"]
        assert self._query_ids(limit=99) == ["t-0", "t-1", "t-2", "t-3", "t-4"]

    @checks("QUERY-LIMIT")
    def test_query_limit__zero_returns_nothing(self) -> None:
        self._create_all(snapshot("t-0"), snapshot("t-1", created=1))
        assert self._query_ids(limit=0) == [], "limit=0 must return no task"

    @checks("QUERY-FILTERS-COMBINE")
    def test_query_filters_combine__all_filters_anded(self) -> None:
        rows = [
            ("t-0", TaskStatus.RUNNING, "etl-a", {"io"}, 1, "run-1"),
            ("t-1", TaskStatus.RUNNING, "etl-b", {"io"}, 2, "run-1"),
            ("t-2", TaskStatus.FAILED, "etl-c", {"io"}, 1, "run-1"),
            ("t-3", TaskStatus.RUNNING, "web-a", {"io"}, 1, "run-1"),
            ("t-4", TaskStatus.RUNNING, "etl-d", {"ios"}, 1, "run-1"),
            ("t-5", TaskStatus.RUNNING, "etl-e", {"io"}, 1, "run-2"),
            ("t-6", TaskStatus.RUNNING, "etl-f", {"io", "x"}, 1, "run-1"),
        ]
        for i, (tid, status, name, tags, bucket, run) in enumerate(rows):
            self.store.create(
                snapshot(
                    tid,
                    status=status,
                    name=name,
                    tags=frozenset(tags),
                    bucket=bucket,
                    pipeline_run_id=run,
                    created=i,
                )
            )
        got = self._query_ids(
            statuses={TaskStatus.RUNNING},
            name_prefix="etl-",
            tag="io",
            buckets={1},
            pipeline_run_id="run-1",
        )
        assert got == ["t-0", "t-6"], f"combined filters: {got}"
        assert self._query_ids(name="etl-a", statuses={TaskStatus.FAILED}) == [], "AND, not OR"
        assert self._query_ids(tag="io", buckets={1}, newest_first=True, limit=2) == [
            "t-6",
            "t-5",
        ]

    @checks("QUERY-EMPTY-SET-MATCHES-NOTHING")
    def test_query_empty_set_matches_nothing__statuses_and_buckets(self) -> None:
        self._create_all(snapshot("t-0", bucket=1), snapshot("t-1", created=1))
        assert self._query_ids(statuses=frozenset()) == [], "statuses=frozenset() matches none"
        assert self._query_ids(buckets=frozenset()) == [], "buckets=frozenset() matches none"
        assert self._query_ids(statuses=None, buckets=None) == ["t-0", "t-1"], "None = no filter"

    # ========================================================================================
    # counts
    # ========================================================================================
    @checks("COUNTS-ALL-KEYS")
    def test_counts_all_keys__empty_store_all_zero(self) -> None:
        got = dict(self.store.counts())
        assert got == dict.fromkeys(TaskStatus, 0), f"counts() of an empty store: {got}"

    @checks("COUNTS-PER-STATUS", "COUNTS-ALL-KEYS")
    def test_counts_per_status__tracks_creates_and_saves(self) -> None:
        for i, status in enumerate(
            [TaskStatus.RUNNING, TaskStatus.RUNNING, TaskStatus.FAILED, TaskStatus.PENDING]
        ):
            self.store.create(snapshot(f"t-{i}", status=status, created=i))
        expected = dict.fromkeys(TaskStatus, 0)
        expected.update({TaskStatus.RUNNING: 2, TaskStatus.FAILED: 1, TaskStatus.PENDING: 1})
        assert dict(self.store.counts()) == expected, "counts() after creates"
        self.store.save(snapshot("t-0", status=TaskStatus.SUCCEEDED, version=2), expect_version=1)
        expected[TaskStatus.RUNNING] = 1
        expected[TaskStatus.SUCCEEDED] = 1
        got = dict(self.store.counts())
        assert got == expected, f"counts() after a save changed a status: {got}"
        assert all(isinstance(k, TaskStatus) for k in got), "counts() keys must be TaskStatus"

    # ========================================================================================
    # append / history
    # ========================================================================================
    @checks("APPEND-IDEMPOTENT")
    def test_append_idempotent__replay_leaves_one_row(self) -> None:
        rows = [transition("t-1", v, when=v) for v in (1, 2, 3)]
        for row in rows:
            self.store.append(row)
        for row in rows:  # crash recovery replays the whole buffer
            self.store.append(row)
        self.store.append(rows[1])
        got = list(self.store.history("t-1"))
        assert got == rows, f"history after replays has {len(got)} rows: {_versions(got)}"

    @checks("APPEND-FIRST-WINS")
    def test_append_first_wins__conflicting_replay_keeps_first(self) -> None:
        first = transition("t-1", 1, reason="first")
        self.store.append(first)
        self.store.append(transition("t-1", 1, to=TaskStatus.FAILED, reason="second"))
        got = list(self.store.history("t-1"))
        assert got == [first], f"a replay replaced the first row: {got}"

    @checks("HISTORY-ORDERED")
    def test_history_ordered__ascending_whatever_append_order(self) -> None:
        for v in (7, 2, 4, 1):
            self.store.append(transition("t-1", v, when=v))
        assert _versions(self.store.history("t-1")) == [1, 2, 4, 7]

    @checks("HISTORY-SINCE")
    def test_history_since__strictly_greater(self) -> None:
        for v in (1, 2, 4, 7):
            self.store.append(transition("t-1", v, when=v))
        assert _versions(self.store.history("t-1")) == [1, 2, 4, 7], "default since_version=0"
        assert _versions(self.store.history("t-1", since_version=0)) == [1, 2, 4, 7]
        assert _versions(self.store.history("t-1", since_version=2)) == [4, 7], "> not >="
        assert _versions(self.store.history("t-1", since_version=3)) == [4, 7], "gap"
        assert _versions(self.store.history("t-1", since_version=7)) == [], "nothing newer"
        assert _versions(self.store.history("t-1", since_version=99)) == []

    @checks("HISTORY-PER-TASK")
    def test_history_per_task__only_that_task(self) -> None:
        for v in (1, 2, 3):
            self.store.append(transition("t-1", v, when=v))
            self.store.append(transition("t-10", v, when=v, reason="other"))
        got = list(self.store.history("t-1"))
        assert {t.task_id for t in got} == {"t-1"}, f"history('t-1') leaked {got}"
        assert _versions(got) == [1, 2, 3]

    @checks("HISTORY-UNKNOWN-EMPTY")
    def test_history_unknown_empty__no_error(self) -> None:
        assert list(self.store.history("nope")) == [], "history() of an unknown task"
        self.store.create(snapshot("t-1"))
        assert list(self.store.history("t-1")) == [], "history() of a task with no transitions"

    @checks("TRANSITION-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_transition_roundtrip__every_field(self) -> None:
        full = full_transition("t-1", 3)
        first = Transition("t-1", 1, None, TaskStatus.PENDING, at(0, ST_JOHNS), None)
        self.store.append(full)
        self.store.append(first)
        got = list(self.store.history("t-1"))
        assert got == [first, full], f"transitions changed: {got}"
        for row in got:
            assert row.at.utcoffset() is not None, "history() returned a naive datetime"
            assert isinstance(row.to_status, TaskStatus), "to_status must be a TaskStatus"
        assert got[1].at.microsecond == full.at.microsecond, "microseconds lost"

    # ========================================================================================
    # touch
    # ========================================================================================
    @checks("TOUCH-NO-VERSION")
    def test_touch_no_version__version_unchanged_and_save_still_matches(self) -> None:
        self.store.create(snapshot("t-1", version=3, status=TaskStatus.RUNNING))
        for i in range(5):
            self.store.touch("t-1", progress=Progress(done=i), heartbeat_at=at(i))
        self.store.touch("t-1", lease_owner="sup", lease_until=at(90))
        assert self._get("t-1").status_version == 3, "touch() changed status_version"
        nxt = snapshot("t-1", version=4, status=TaskStatus.SUCCEEDED)
        self.store.save(nxt, expect_version=3)  # must not conflict because of the touches
        assert self._get("t-1").status_version == 4

    @checks("TOUCH-ONLY-NAMED-FIELDS")
    def test_touch_only_named_fields__each_argument_alone(self) -> None:
        original = full_snapshot("t-1")
        self.store.create(original)
        self.store.touch("t-1")
        self._assert_stored(original, "touch() with every argument None must change nothing")
        p = Progress(done=99, total=None, message=None)
        self.store.touch("t-1", progress=p)
        expected = original.evolve(progress=p)
        self._assert_stored(expected, "touch(progress=...) alone")
        self.store.touch("t-1", heartbeat_at=at(500))
        expected = expected.evolve(heartbeat_at=at(500))
        self._assert_stored(expected, "touch(heartbeat_at=...) alone")
        self.store.touch("t-1", lease_owner="other")
        expected = expected.evolve(lease_owner="other")
        self._assert_stored(expected, "touch(lease_owner=...) alone")
        self.store.touch("t-1", lease_until=at(900))
        expected = expected.evolve(lease_until=at(900))
        self._assert_stored(expected, "touch(lease_until=...) alone")

    @checks("TOUCH-MISSING-IGNORED")
    def test_touch_missing_ignored__no_error_no_row(self) -> None:
        self.store.touch(
            "ghost",
            progress=Progress(done=1),
            heartbeat_at=at(1),
            lease_owner="sup",
            lease_until=at(30),
        )
        self.store.touch("ghost")
        assert self.store.get("ghost") is None, "touch() of a missing task created it"
        assert list(self.store.query()) == [], "touch() of a missing task added a row"

    @checks("TOUCH-LEASE")
    def test_touch_lease__stored_and_renewed(self) -> None:
        self.store.create(snapshot("t-1"))
        self.store.touch("t-1", lease_owner="sup-1", lease_until=at(30, KATHMANDU))
        got = self._get("t-1")
        assert (got.lease_owner, got.lease_until) == ("sup-1", at(30)), "touch() lease"
        self.store.touch("t-1", lease_until=at(60))  # renewal by the same owner
        got = self._get("t-1")
        assert (got.lease_owner, got.lease_until) == ("sup-1", at(60)), "lease renewal"

    @checks("TOUCH-SIGNALS-SEPARATE")
    def test_touch_signals_separate__heartbeat_and_lease_independent(self) -> None:
        self.store.create(snapshot("t-1"))
        self.store.touch("t-1", heartbeat_at=at(10))
        got = self._get("t-1")
        assert got.heartbeat_at == at(10), "heartbeat_at not stored verbatim"
        assert (got.lease_owner, got.lease_until) == (None, None), "a heartbeat created a lease"
        self.store.touch("t-1", lease_owner="sup", lease_until=at(40))
        got = self._get("t-1")
        assert got.heartbeat_at == at(10), "renewing the lease moved the heartbeat"
        self.store.touch("t-1", heartbeat_at=at(11))
        got = self._get("t-1")
        assert got.lease_until == at(40), "a heartbeat moved the lease"
        assert got.heartbeat_at == at(11)

    # ========================================================================================
    # commands
    # ========================================================================================
    @checks("SUBMIT-THEN-CLAIM")
    def test_submit_then_claim__leased_copy_returned(self) -> None:
        c = command("c-1", "t-1")
        self.store.submit_command(c)
        now = at(100)
        got = list(self.store.claim_commands(now=now, lease_seconds=LEASE))
        expected = replace(c, lease_until=now + timedelta(seconds=LEASE))
        assert got == [expected], f"claim_commands() returned {got}"
        assert got[0].finished_at is None, "a claimed command is not finished"

    @checks("COMMAND-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_command_roundtrip__every_field(self) -> None:
        c = full_command("c-1", "t-1")
        self.store.submit_command(c)
        now = at(50, KATHMANDU)
        got = list(self.store.claim_commands(now=now, lease_seconds=12.5))
        assert len(got) == 1, f"expected the command back, got {got}"
        assert got[0] == replace(c, lease_until=now + timedelta(seconds=12.5)), _diff(
            replace(c, lease_until=now + timedelta(seconds=12.5)), got[0]
        )
        assert isinstance(got[0].kind, CommandKind), "kind must be a CommandKind"
        assert got[0].created_at.utcoffset() is not None, "naive created_at"

    @checks("SUBMIT-DUPLICATE-RAISES")
    def test_submit_duplicate_raises__conflict_leaves_original(self) -> None:
        original = command("c-1", "t-1", kind=CommandKind.STOP, issued_by="first")
        self.store.submit_command(original)
        impostor = command("c-1", "t-2", kind=CommandKind.RETRY, issued_by="second", created=5)
        _raises(StoreError, lambda: self.store.submit_command(impostor), "duplicate command_id")
        now = at(10)
        got = list(self.store.claim_commands(now=now, lease_seconds=LEASE))
        assert got == [replace(original, lease_until=now + timedelta(seconds=LEASE))], (
            f"a refused submit changed the stored command: {got}"
        )

    @checks("CLAIM-LEASE-EXCLUSIVE")
    def test_claim_lease_exclusive__conflict_leased_command_not_reclaimed(self) -> None:
        self.store.submit_command(command("c-1"))
        first = self.store.claim_commands(now=at(0), lease_seconds=LEASE)
        assert _cmd_ids(first) == ["c-1"], "the first claim"
        for when in (0, 1, 15, 29.999999):
            again = self.store.claim_commands(now=at(when), lease_seconds=LEASE)
            assert list(again) == [], f"claimed again at +{when}s inside the lease: {again}"
        # The refused claims must not have extended the lease: it still ends at +30s.
        after = self.store.claim_commands(now=at(30), lease_seconds=LEASE)
        assert _cmd_ids(after) == ["c-1"], "a refused claim moved the lease"

    @checks("CLAIM-LEASE-BOUNDARY", "TIME-INSTANT-ORDER")
    def test_claim_lease_boundary__expires_exactly_at_lease_until(self) -> None:
        self.store.submit_command(command("c-1"))
        assert _cmd_ids(self.store.claim_commands(now=at(0), lease_seconds=LEASE)) == ["c-1"]
        just_before = at(LEASE - 0.000001, ST_JOHNS)
        assert list(self.store.claim_commands(now=just_before, lease_seconds=LEASE)) == [], (
            "claimable a microsecond before lease_until"
        )
        boundary = at(LEASE, KATHMANDU)
        got = self.store.claim_commands(now=boundary, lease_seconds=LEASE)
        assert _cmd_ids(got) == ["c-1"], "not claimable at now == lease_until"

    @checks("CLAIM-EXPIRED-RECLAIM")
    def test_claim_expired_reclaim__new_lease_after_expiry(self) -> None:
        self.store.submit_command(command("c-1"))
        self.store.claim_commands(now=at(0), lease_seconds=LEASE)
        again = list(self.store.claim_commands(now=at(45), lease_seconds=LEASE))
        assert _cmd_ids(again) == ["c-1"], "an expired lease must be claimable"
        assert again[0].lease_until == at(45 + LEASE), "the re-claim sets a new lease"
        assert list(self.store.claim_commands(now=at(60), lease_seconds=LEASE)) == [], (
            "the new lease must hold"
        )

    @checks("CLAIM-ORDER", "TIME-INSTANT-ORDER")
    def test_claim_order__oldest_first_by_instant(self) -> None:
        # Wall-clock text order differs from instant order across these offsets.
        self.store.submit_command(replace(command("c-late"), created_at=at(120, ST_JOHNS)))
        self.store.submit_command(replace(command("c-early"), created_at=at(60, KATHMANDU)))
        self.store.submit_command(replace(command("c-mid"), created_at=at(90)))
        one = self.store.claim_commands(now=at(200), lease_seconds=LEASE, limit=1)
        assert _cmd_ids(one) == ["c-early"], f"limit=1 must take the oldest: {_cmd_ids(one)}"
        rest = self.store.claim_commands(now=at(200), lease_seconds=LEASE)
        assert _cmd_ids(rest) == ["c-mid", "c-late"], f"created_at order: {_cmd_ids(rest)}"

    @checks("CLAIM-LIMIT")
    def test_claim_limit__only_limit_are_leased(self) -> None:
        for i in range(5):
            self.store.submit_command(command(f"c-{i}", created=i))
        first = self.store.claim_commands(now=at(10), lease_seconds=LEASE, limit=2)
        assert _cmd_ids(first) == ["c-0", "c-1"], f"limit=2: {_cmd_ids(first)}"
        rest = self.store.claim_commands(now=at(10), lease_seconds=LEASE, limit=50)
        assert _cmd_ids(rest) == ["c-2", "c-3", "c-4"], "commands beyond the limit were leased"

    @checks("CLAIM-LIMIT")
    def test_claim_limit__zero_leases_nothing(self) -> None:
        self.store.submit_command(command("c-0"))
        assert list(self.store.claim_commands(now=at(1), lease_seconds=LEASE, limit=0)) == []
        got = self.store.claim_commands(now=at(1), lease_seconds=LEASE)
        assert _cmd_ids(got) == ["c-0"], "limit=0 leased the command"

    @checks("COMPLETE-NEVER-RECLAIMED")
    def test_complete_never_reclaimed__claimed_then_completed(self) -> None:
        self.store.submit_command(command("c-1"))
        self.store.submit_command(command("c-2", created=1))
        self.store.claim_commands(now=at(0), lease_seconds=LEASE)
        self.store.complete_command("c-1", now=at(1), outcome="stopped")
        for when in (31, 3600, 10**6):
            got = self.store.claim_commands(now=at(when), lease_seconds=LEASE)
            assert "c-1" not in _cmd_ids(got), f"a completed command was claimed at +{when}s"

    @checks("COMPLETE-NEVER-RECLAIMED")
    def test_complete_never_reclaimed__completed_without_claim(self) -> None:
        self.store.submit_command(command("c-1"))
        self.store.complete_command("c-1", now=at(1), outcome="already-terminal")
        assert list(self.store.claim_commands(now=at(2), lease_seconds=LEASE)) == []

    @checks("COMPLETE-IDEMPOTENT")
    def test_complete_idempotent__twice_and_unknown(self) -> None:
        self.store.submit_command(command("c-1"))
        self.store.submit_command(command("c-2", created=1))
        self.store.complete_command("c-1", now=at(1), outcome="stopped")
        self.store.complete_command("c-1", now=at(2), outcome="again")
        self.store.complete_command("nope", now=at(3))
        got = self.store.claim_commands(now=at(4), lease_seconds=LEASE)
        assert _cmd_ids(got) == ["c-2"], f"other commands must be unaffected: {_cmd_ids(got)}"

    @checks("RELEASE-NOT-COMPLETE")
    def test_release_not_complete__claimable_at_once(self) -> None:
        self.store.submit_command(command("c-1"))
        self.store.claim_commands(now=at(0), lease_seconds=LEASE)
        self.store.release_command("c-1", now=at(1))
        got = list(self.store.claim_commands(now=at(1), lease_seconds=LEASE))
        assert _cmd_ids(got) == ["c-1"], "a released command must be claimable immediately"
        assert got[0].finished_at is None, "release must not finish the command"
        assert got[0].lease_until == at(1 + LEASE)

    @checks("RELEASE-FINISHED-NOOP")
    def test_release_finished_noop__completed_stays_completed(self) -> None:
        self.store.submit_command(command("c-1"))
        self.store.claim_commands(now=at(0), lease_seconds=LEASE)
        self.store.complete_command("c-1", now=at(1))
        self.store.release_command("c-1", now=at(2))
        self.store.release_command("nope", now=at(2))
        assert list(self.store.claim_commands(now=at(3), lease_seconds=LEASE)) == [], (
            "releasing a completed command made it claimable"
        )

    @checks("RELEASE-FINISHED-NOOP")
    def test_release_finished_noop__unclaimed_command_untouched(self) -> None:
        self.store.submit_command(command("c-1"))
        self.store.release_command("c-1", now=at(0))
        assert _cmd_ids(self.store.claim_commands(now=at(0), lease_seconds=LEASE)) == ["c-1"]

    # ========================================================================================
    # prune
    # ========================================================================================
    def _prune_fixture(self) -> None:
        """Old non-terminal tasks, then five terminal ones inserted out of order."""
        self.store.create(snapshot("old-pending", status=TaskStatus.PENDING, created=-100))
        self.store.create(snapshot("old-running", status=TaskStatus.RUNNING, created=-50))
        terminal = [
            TaskStatus.SUCCEEDED,
            TaskStatus.FAILED,
            TaskStatus.CANCELLED,
            TaskStatus.LOST,
            TaskStatus.SUCCEEDED,
        ]
        for i in (3, 0, 4, 1, 2):
            self.store.create(snapshot(f"done-{i}", status=terminal[i], created=i))
        for tid in ("old-running", "done-0", "done-3"):
            self.store.append(transition(tid, 1))
            self.store.append(transition(tid, 2, to=TaskStatus.SUCCEEDED))

    @checks("PRUNE-TERMINAL-ONLY")
    def test_prune_terminal_only__non_terminal_survive(self) -> None:
        self._prune_fixture()
        self.store.prune(keep_terminal=0)
        left = set(self._query_ids())
        assert left == {"old-pending", "old-running"}, f"after prune(keep_terminal=0): {left}"

    @checks("PRUNE-OLDEST-FIRST")
    def test_prune_oldest_first__keeps_newest_and_counts(self) -> None:
        self._prune_fixture()
        dropped = self.store.prune(keep_terminal=2)
        assert dropped == 3, f"prune() returned {dropped}, it should drop 3"
        left = self._query_ids()
        assert left == ["old-pending", "old-running", "done-3", "done-4"], f"left: {left}"
        assert self.store.prune(keep_terminal=2) == 0, "a second prune has nothing to drop"
        assert self.store.prune(keep_terminal=10) == 0, "keep more than exist"

    @checks("PRUNE-HISTORY")
    def test_prune_history__dropped_with_task_others_kept(self) -> None:
        self._prune_fixture()
        self.store.prune(keep_terminal=1)  # keeps done-4 only
        assert list(self.store.history("done-0")) == [], "history of a pruned task survived"
        assert list(self.store.history("done-3")) == [], "history of a pruned task survived"
        assert _versions(self.store.history("old-running")) == [1, 2], "unrelated history lost"

    @checks("PRUNE-COMMANDS")
    def test_prune_commands__pruned_tasks_commands_dropped(self) -> None:
        self._prune_fixture()
        self.store.submit_command(command("c-pruned", "done-0"))
        self.store.submit_command(command("c-kept", "old-running", created=1))
        self.store.prune(keep_terminal=0)
        got = _cmd_ids(self.store.claim_commands(now=at(10), lease_seconds=LEASE))
        assert got == ["c-kept"], f"after prune, claimable commands are {got}"

    # ========================================================================================
    # round-trip and time
    # ========================================================================================
    @checks("SNAPSHOT-FULL-ROUNDTRIP", "TIME-UTC-ROUNDTRIP")
    def test_snapshot_full_roundtrip__create_get_every_field(self) -> None:
        full = full_snapshot("t-1")
        self.store.create(full)
        got = self._get("t-1")
        assert got == full, f"full snapshot changed: {_diff(full, got)}"
        assert isinstance(got.tags, frozenset), f"tags came back as {type(got.tags).__name__}"
        assert isinstance(got.status, TaskStatus), "status must be a TaskStatus"
        for name in ("created_at", "updated_at", "started_at", "finished_at", "heartbeat_at"):
            value = getattr(got, name)
            assert value.utcoffset() is not None, f"{name} came back naive"
            assert value.microsecond == getattr(full, name).astimezone(UTC).microsecond, (
                f"{name} lost microseconds"
            )

    @checks("SNAPSHOT-FULL-ROUNDTRIP")
    def test_snapshot_full_roundtrip__save_get_every_field(self) -> None:
        self.store.create(snapshot("t-1", version=1))
        full = full_snapshot("t-1", status_version=2, lease_owner=None, lease_until=None)
        self.store.save(full, expect_version=1)
        self._assert_stored(full, "full snapshot through save()")
        back = snapshot("t-1", version=3)  # every optional field None again
        self.store.save(back, expect_version=2)
        self._assert_stored(back, "None must stay None after save()")

    @checks("SNAPSHOT-FULL-ROUNDTRIP")
    def test_snapshot_full_roundtrip__empty_and_edge_values(self) -> None:
        edge = snapshot(
            "t-1",
            name="",
            version=0,
            tags=frozenset({""}),
            bucket=0,
            pipeline_run_id="",
            progress=Progress(done=0, total=0, message=""),
        )
        plain = snapshot("t-2", created=1)
        self._create_all(edge, plain)
        self._assert_stored(edge, "empty strings, zeros and the empty tag")
        got = self._get("t-2")
        assert got.tags == frozenset() and isinstance(got.tags, frozenset), "no tags"
        assert got.progress is None and got.failure is None, "None must stay None"

    @checks("TIME-INSTANT-ORDER")
    def test_time_instant_order__query_orders_by_instant_not_text(self) -> None:
        # 'east' is earlier as an instant but later as wall-clock text.
        self.store.create(snapshot("west", created_at=at(3600, ST_JOHNS)))
        self.store.create(snapshot("east", created_at=at(1800, KATHMANDU)))
        self.store.create(snapshot("utc", created_at=at(2700)))
        assert self._query_ids() == ["east", "utc", "west"], "query() must order by instant"
        assert self._query_ids(newest_first=True) == ["west", "utc", "east"]

    # ========================================================================================
    # close
    # ========================================================================================
    @checks("CLOSE-IDEMPOTENT")
    def test_close_idempotent__twice_no_error(self) -> None:
        self.store.create(snapshot("t-1"))
        self.store.close()
        self.store.close()

    @checks("CLOSE-THEN-STOREERROR")
    def test_close_then_storeerror__every_method(self) -> None:
        self.store.create(snapshot("t-1"))
        self.store.submit_command(command("c-1"))
        self.store.close()
        now = at(0)
        calls: dict[str, Callable[[], object]] = {
            "create": lambda: self.store.create(snapshot("t-2")),
            "save": lambda: self.store.save(snapshot("t-1", version=2), expect_version=1),
            "get": lambda: self.store.get("t-1"),
            "query": lambda: self.store.query(),
            "counts": lambda: self.store.counts(),
            "append": lambda: self.store.append(transition("t-1", 1)),
            "history": lambda: self.store.history("t-1"),
            "touch": lambda: self.store.touch("t-1", heartbeat_at=now),
            "submit_command": lambda: self.store.submit_command(command("c-2")),
            "claim_commands": lambda: self.store.claim_commands(now=now, lease_seconds=LEASE),
            "complete_command": lambda: self.store.complete_command("c-1", now=now),
            "release_command": lambda: self.store.release_command("c-1", now=now),
            "prune": lambda: self.store.prune(keep_terminal=0),
        }
        assert set(calls) | {"close"} == set(PROTOCOL_METHODS), "contract misses a method"
        wrong = []
        for name, call in calls.items():
            try:
                call()
            except StoreError:
                continue
            except Exception as exc:
                wrong.append(f"{name}() raised {type(exc).__name__}: {exc}")
            else:
                wrong.append(f"{name}() succeeded")
        assert not wrong, "after close() every method must raise StoreError: " + "; ".join(wrong)

    @checks("CLOSE-THEN-STOREERROR")
    def test_close_then_storeerror__closing_one_store_spares_another(self) -> None:
        other = self.open_store()
        self.store.close()
        other.create(snapshot("t-1"))
        assert other.get("t-1") is not None, "closing one store broke another instance"

