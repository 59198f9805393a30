"""create, get and save: one task at a time, conditional writes refused whole."""

from __future__ import annotations

from ...oracle.assertions import expect_raises as _raises
from ...protocol.alphabet import CONFUSABLE_PAIRS, describe
from ...protocol.clauses import checks
from ...protocol.errors import ConcurrencyConflict, StoreError
from ...protocol.model import (
    TaskSnapshot,
    TaskStatus,
)
from ...strategies.samples import (
    at,
    snapshot,
)
from ._base import ContractBase, _diff

__all__ = ["TaskContract"]


class TaskContract(ContractBase):
    """The create / get / save clauses of ``StoreContract``."""

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
        self._given(original)
        impostor = snapshot("t-1", name="impostor", status=TaskStatus.PENDING, version=1)
        _raises(StoreError, lambda: self.store.create(impostor), "create() of an existing id")
        self._assert_stored(original, "a refused create() must not change the stored task")
        assert len(self._all_tasks()) == 1, "a refused create() added a row"

    @checks("GET-MISSING-NONE")
    def test_get_missing_none__empty_and_populated_store(self) -> None:
        assert self.store.get("nope") is None, "get() of an unknown id on an empty store"
        self._given(snapshot("t-1"))
        assert self.store.get("nope") is None, "get() of an unknown id"
        assert self.store.get("t-") is None, "get() must match the id exactly, not a prefix"

    @checks("CREATE-THEN-GET")
    def test_create_then_get__adversarial_ids_are_distinct(self) -> None:
        values = self._adversarial_values()
        for i, value in enumerate(values):
            self._create_with_id(snapshot(value, name=f"n-{i}", created=i), values[:i])
        for i, value in enumerate(values):
            got = self.store.get(value)
            if got is not None and got.task_id == value:
                made = snapshot(value, name=f"n-{i}", created=i)
                self._assert_stored(made, "get() after create()")
            assert got == snapshot(value, name=f"n-{i}", created=i), (
                f"get({describe(value)}) returned "
                f"{None if got is None else (describe(got.task_id), got.name)!r}, "
                f"expected the task created as n-{i}"
            )

    @checks("GET-MISSING-NONE")
    def test_get_missing_none__confusable_id_is_missing(self) -> None:
        kept = list(dict.fromkeys(left for left, _, _ in CONFUSABLE_PAIRS))
        for i, stored in enumerate(kept):
            self._create_with_id(snapshot(stored, created=i), kept[:i])
        for left, right, why in CONFUSABLE_PAIRS:
            got = self.store.get(right)
            assert got is None, (
                f"get({describe(right)}) returned the task {describe(got.task_id)}; "
                f"only {describe(left)} is stored ({why})"
            )

    # ========================================================================================
    # save
    # ========================================================================================
    @checks("SAVE-CAS")
    def test_save_cas__matching_version_is_written(self) -> None:
        self._given(snapshot("t-1", version=1))
        v2 = snapshot("t-1", version=2, status=TaskStatus.RUNNING, started_at=at(1))
        self.store.save(v2, expect_version=1)
        # Compared whole and blamed here: a save whose version matches writes the snapshot
        # it was given, every field of it (a partial UPDATE breaks this clause itself).
        got = self.store.get("t-1")
        assert got == v2, f"get() after save(expect_version=stored): {_diff(v2, got)}"
        v3 = v2.evolve(status_version=3, status=TaskStatus.SUCCEEDED, finished_at=at(2))
        self.store.save(v3, expect_version=2)
        got = self.store.get("t-1")
        assert got == v3, f"second save in a row: {_diff(v3, got)}"

    @checks("SAVE-CONFLICT-RAISES")
    def test_save_conflict_raises__stale_version_conflict_changes_nothing(self) -> None:
        self._given(snapshot("t-1", version=1))
        v2 = snapshot("t-1", version=2, status=TaskStatus.RUNNING)
        self._given_saved(v2, expect_version=1)
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
        self._given(original)
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
        self._given(snapshot("t-1", version=2))
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
        self._given(snapshot("t-1", version=1))
        # Two writers both read version 1. A saves first; B must be told, not retried.
        writer_a = snapshot("t-1", version=2, name="writer-a", status=TaskStatus.RUNNING)
        writer_b = snapshot("t-1", version=2, name="writer-b", status=TaskStatus.CANCELLED)
        self._given_saved(writer_a, expect_version=1)
        _raises(
            ConcurrencyConflict,
            lambda: self.store.save(writer_b, expect_version=1),
            "the second writer's save()",
        )
        self._assert_stored(writer_a, "the first writer's snapshot must survive the conflict")

    @checks("SAVE-VERSION-SKIP")
    def test_save_version_skip__gaps_are_accepted(self) -> None:
        self._given(snapshot("t-1", version=1))
        # A plain save (+1) first: one that loses fields is SAVE-CAS's failure, not the skip's.
        self._given_saved(snapshot("t-1", version=2, name="at-2"), expect_version=1)
        path = [(2, 4), (4, 5), (5, 19), (19, 1000)]
        for expect, new in path:
            s = snapshot("t-1", version=new, name=f"at-{new}")
            self.store.save(s, expect_version=expect)
            self._assert_stored(s, f"save() jumping from version {expect} to {new}")

    @checks("SAVE-VERSION-SKIP")
    def test_save_version_skip__from_zero(self) -> None:
        self._given(snapshot("t-0", version=0))
        self._given_saved(snapshot("t-0", version=1, name="plain"), expect_version=0)
        self._given(snapshot("t-1", version=0))
        s = snapshot("t-1", version=3)
        self.store.save(s, expect_version=0)
        self._assert_stored(s, "save() from version 0 to 3")

    @checks("SAVE-KEEPS-LEASE")
    def test_save_keeps_lease__lease_from_create_survives(self) -> None:
        leased = snapshot("t-1", version=1, lease_owner="sup-1", lease_until=at(300))
        self._given(leased)
        in_memory = snapshot("t-1", version=2, status=TaskStatus.RUNNING)  # lease None
        self.store.save(in_memory, expect_version=1)
        got = self._get("t-1")
        assert (got.lease_owner, got.lease_until) == ("sup-1", at(300)), (
            f"save() clobbered the lease: now {got.lease_owner!r}, {got.lease_until!r}"
        )
        assert got.status is TaskStatus.RUNNING and got.status_version == 2, "save() not applied"

    @checks("SAVE-KEEPS-LEASE")
    def test_save_keeps_lease__lease_from_touch_survives(self) -> None:
        self._given(snapshot("t-1", version=1))
        self._given_touched("t-1", lease_owner="sup-2", lease_until=at(120))
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
        assert self._absent("ghost"), "save() of a missing task created it"
        assert self._all_tasks() == [], "save() of a missing task added a row"

    # ========================================================================================
    # a save that changes one field, then the reads it affects
    # ========================================================================================
    # A caller changes one or two fields per save and keeps the rest. A store that keeps a
    # derived copy of a field (tag rows carrying created_at for ordering, a name or run-id
    # index) and refreshes it only when "its" field changes answers these reads from the
    # stale copy. The scene's save goes through _given_saved, so a save that loses fields is
    # SAVE-CAS's failure; what each test proves is the read.
    def _one_field_scene(self, **changed: object) -> None:
        """Three tasks alike but for created_at; ``t-0`` then saved with only ``changed``."""
        alike = {"name": "job", "status": TaskStatus.RUNNING, "tags": frozenset({"x"}),
                 "bucket": 1, "pipeline_run_id": "run"}
        self._given(*(snapshot(f"t-{i}", created=i, **alike) for i in range(3)))  # type: ignore[arg-type]
        base = self._present("t-0")
        self._given_saved(base.evolve(status_version=2, **changed), expect_version=1)

    @checks("QUERY-ORDER-CREATED")
    def test_query_order_created__after_a_save_changing_only_created_at(self) -> None:
        self._one_field_scene(created_at=at(5))
        self._given_newest_first()
        for filters in ({}, {"tag": "x"}, {"statuses": {TaskStatus.RUNNING}}, {"buckets": {1}},
                        {"pipeline_run_id": "run"}, {"name": "job"}, {"name_prefix": "jo"}):
            self._assert_query(["t-1", "t-2", "t-0"], "t-0 moved last by a save changing only "
                               "its created_at (a derived copy kept the old one?)", **filters)
            self._assert_query(["t-0", "t-2", "t-1"], "newest first after that save",
                               newest_first=True, **filters)

    @checks("QUERY-NAME-EXACT")
    def test_query_name_exact__after_a_save_changing_only_the_name(self) -> None:
        self._one_field_scene(name="renamed")
        self._assert_query(["t-0"], "the new name, after a save changing only it", name="renamed")
        self._assert_query(["t-1", "t-2"], "the old name no longer matches t-0", name="job")

    @checks("QUERY-TAG-EXACT")
    def test_query_tag_exact__after_a_save_changing_only_the_tags(self) -> None:
        self._one_field_scene(tags=frozenset({"y"}))
        self._assert_query(["t-0"], "the new tag, after a save changing only the tags", tag="y")
        self._assert_query(["t-1", "t-2"], "the old tag no longer matches t-0", tag="x")

    @checks("QUERY-BUCKETS")
    def test_query_buckets__after_a_save_changing_only_the_bucket(self) -> None:
        self._one_field_scene(bucket=2)
        self._assert_query(["t-0"], "the new bucket, after a save changing only it",
                           buckets={2})
        self._assert_query(["t-1", "t-2"], "the old bucket no longer holds t-0", buckets={1})

    @checks("QUERY-PIPELINE")
    def test_query_pipeline__after_a_save_changing_only_the_run_id(self) -> None:
        self._one_field_scene(pipeline_run_id="run-2")
        self._assert_query(["t-0"], "the new run id, after a save changing only it",
                           pipeline_run_id="run-2")
        self._assert_query(["t-1", "t-2"], "the old run id no longer matches t-0",
                           pipeline_run_id="run")

    @checks("QUERY-STATUSES")
    def test_query_statuses__after_a_save_changing_only_the_status(self) -> None:
        self._one_field_scene(status=TaskStatus.SUCCEEDED)
        self._assert_query(["t-0"], "the new status, after a save changing only it",
                           statuses={TaskStatus.SUCCEEDED})
        self._assert_query(["t-1", "t-2"], "the old status no longer matches t-0",
                           statuses={TaskStatus.RUNNING})
