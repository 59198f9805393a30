"""The Controller's own pieces, on the in-memory store, with a manual clock.

What these pin that the store-facing checks do not: the bucket hash is stable
across processes, the read-only boundary, the side path never versions, the
write-through buffer's handling of lost replies and real conflicts, reconcile's
lease boundary, and that close() leaves the store alone.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest

from chongming_conformance import (
    Progress,
    StoreError,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from chongming_conformance.checking.controller import FaultyStore
from chongming_conformance.controller import (
    BucketPolicy,
    Controller,
    ControllerClosed,
    ManualClock,
    PolicyMismatch,
    TaskContext,
    assert_policies_agree,
)
from chongming_conformance.protocol import TaskStore
from reference_stores.memory import InMemoryTaskStore

S = TaskStatus
LEASE = 30.0
WAIT = 20.0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def store() -> InMemoryTaskStore:
    return InMemoryTaskStore()


def make(store: TaskStore, clock: ManualClock, owner: str = "me") -> Controller:
    return Controller(store, owner=owner, command_poll_interval=3600.0, command_lease=LEASE,
                      clock=clock, join_timeout=5.0)


def gated() -> tuple[threading.Event, threading.Event, object]:
    started, release = threading.Event(), threading.Event()

    def work(ctx: TaskContext) -> None:
        ctx.checkpoint(done=0, total=2)
        started.set()
        release.wait(WAIT)
        ctx.checkpoint(done=2, total=2)

    return started, release, work


# -- BucketPolicy ------------------------------------------------------------------------
def test_bucket_hash_is_pinned_and_in_range() -> None:
    p = BucketPolicy(16)
    assert [p.bucket_for(k) for k in ["abc", "task-1", "", "中文"]] == [9, 3, 4, 10]
    assert BucketPolicy(1000).bucket_for("abc") == 721
    assert all(p.bucket_for(f"k{i}") in p.buckets() for i in range(200))
    assert BucketPolicy(1).bucket_for("anything") == 0


def test_bucket_hash_is_the_same_in_another_process_with_another_hash_seed() -> None:
    code = ("from chongming_conformance.controller import BucketPolicy;"
            "print([BucketPolicy(16).bucket_for(f'k{i}') for i in range(50)])")
    here = str([BucketPolicy(16).bucket_for(f"k{i}") for i in range(50)])
    for seed in ("1", "12345"):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, check=True, timeout=60)
        assert out.stdout.strip() == here


def test_bucket_policy_refuses_nonsense_and_deployments_must_agree() -> None:
    for bad in (0, -1):
        with pytest.raises(ValueError):
            BucketPolicy(bad)
    with pytest.raises(TypeError):
        BucketPolicy(True)
    assert_policies_agree([BucketPolicy(16), BucketPolicy(16)])
    with pytest.raises(PolicyMismatch, match=r"mod-16.*mod-32"):
        assert_policies_agree([BucketPolicy(16), BucketPolicy(32)])


# -- clock ---------------------------------------------------------------------------------
def test_manual_clock_moves_only_forward_and_is_aware() -> None:
    c = ManualClock(datetime(2030, 1, 1, tzinfo=UTC))
    assert c.advance(1.5) == datetime(2030, 1, 1, 0, 0, 1, 500000, tzinfo=UTC) == c()
    with pytest.raises(ValueError):
        c.advance(-1)
    with pytest.raises(ValueError):
        ManualClock(datetime(2030, 1, 1))


# -- wiring ----------------------------------------------------------------------------------
def test_a_non_store_is_refused() -> None:
    with pytest.raises(TypeError, match="not a TaskStore"):
        Controller(object(), owner="x")  # type: ignore[arg-type]


def test_read_only_client_never_polls_until_it_submits(store: InMemoryTaskStore,
                                                       clock: ManualClock) -> None:
    c = make(store, clock)
    try:
        c.stats()
        c.list_tasks()
        c.bucket_counts()
        c.reconcile()
        assert c.stop("someone-elses-task") is not None
        assert not c.polling
        task_id = c.submit(lambda ctx: None, name="first")
        assert c.polling
        c.wait(task_id, WAIT)
    finally:
        c.close()


def test_side_path_touches_progress_heartbeat_and_lease_without_versioning(
    store: InMemoryTaskStore, clock: ManualClock
) -> None:
    c = make(store, clock)
    started, release, work = gated()
    try:
        task_id = c.submit(work, name="t")
        assert started.wait(WAIT)
        before = store.get(task_id)
        assert before is not None and before.status is S.RUNNING
        clock.advance(5)
        c.poll_once()
        after = store.get(task_id)
        assert after is not None
        assert after.status_version == before.status_version
        assert after.progress == Progress(0, 2)
        assert after.heartbeat_at == clock() - timedelta(seconds=5)  # the checkpoint's time
        assert (after.lease_owner, after.lease_until) == ("me", clock() + timedelta(seconds=LEASE))
    finally:
        release.set()
        c.close()


def test_close_leaves_the_store_open_and_refuses_new_work(store: InMemoryTaskStore,
                                                          clock: ManualClock) -> None:
    c = make(store, clock)
    started, release, work = gated()
    task_id = c.submit(work, name="t")
    assert started.wait(WAIT)
    release.set()
    c.close()
    c.close()  # idempotent
    snap = store.get(task_id)  # the store is still usable: the controller does not own it
    assert snap is not None and snap.status.is_terminal
    with pytest.raises(ControllerClosed):
        c.submit(lambda ctx: None, name="late")


def test_close_stops_held_tasks(store: InMemoryTaskStore, clock: ManualClock) -> None:
    c = make(store, clock)
    started = threading.Event()

    def forever(ctx: TaskContext) -> None:
        started.set()
        for _ in range(100_000):
            ctx.checkpoint()
            threading.Event().wait(0.001)

    task_id = c.submit(forever, name="t")
    assert started.wait(WAIT)
    c.close()
    snap = store.get(task_id)
    assert snap is not None and snap.status is S.CANCELLED


# -- commands --------------------------------------------------------------------------------
def test_command_for_a_task_nobody_here_holds_is_released(store: InMemoryTaskStore,
                                                          clock: ManualClock) -> None:
    poller, stopper = make(store, clock, "poller"), make(store, clock, "stopper")
    try:
        poller.wait(poller.submit(lambda ctx: None, name="own"), WAIT)
        command_id = stopper.stop("not-here")
        poller.poll_once()
        assert poller.released == [command_id]
        again = store.claim_commands(now=clock(), lease_seconds=1.0)
        assert [c.command_id for c in again] == [command_id], "release must not finish it"
    finally:
        poller.close()
        stopper.close()


def test_stop_of_a_task_that_already_ended_is_completed_already_terminal(
    store: InMemoryTaskStore, clock: ManualClock
) -> None:
    holder, stopper = make(store, clock, "holder"), make(store, clock, "stopper")
    try:
        task_id = holder.submit(lambda ctx: None, name="quick")
        holder.wait(task_id, WAIT)
        command_id = stopper.stop(task_id)
        holder.poll_once()
        assert holder.completed == [(command_id, "already-terminal")]
    finally:
        holder.close()
        stopper.close()


# -- write-through -------------------------------------------------------------------------
def test_a_save_whose_reply_was_lost_is_recognised_not_a_conflict(
    store: InMemoryTaskStore, clock: ManualClock
) -> None:
    faulty = FaultyStore(store)
    c = make(faulty, clock)  # type: ignore[arg-type]
    started, release, work = gated()
    try:
        faulty.set_faults(lose_reply={"save"})
        task_id = c.submit(work, name="t")
        assert started.wait(WAIT)
        faulty.set_faults()
        release.set()
        c.wait(task_id, WAIT)
        assert c.flush()
        assert c.write_errors == ()
        snap = store.get(task_id)
        assert snap is not None and (snap.status, snap.status_version) == (S.SUCCEEDED, 3)
        assert [t.version for t in store.history(task_id)] == [1, 2, 3]
    finally:
        release.set()
        c.close()


def test_a_second_writer_is_reported_and_never_overwritten(store: InMemoryTaskStore,
                                                           clock: ManualClock) -> None:
    c = make(store, clock)
    started, release, work = gated()
    try:
        task_id = c.submit(work, name="t")
        assert started.wait(WAIT)
        running = store.get(task_id)
        assert running is not None
        intruder = running.evolve(status=S.FAILED, status_version=running.status_version + 1)
        store.save(intruder, expect_version=running.status_version)
        release.set()
        c.wait(task_id, WAIT)
        assert not c.flush()
        assert c.write_errors and "second writer" in c.write_errors[0]
        snap = store.get(task_id)
        assert snap is not None and snap.status is S.FAILED, "the other writer's row survives"
    finally:
        release.set()
        c.close()


def test_create_outage_means_nothing_runs(store: InMemoryTaskStore, clock: ManualClock) -> None:
    faulty = FaultyStore(store)
    faulty.set_faults(fail={"create"})
    c = make(faulty, clock)  # type: ignore[arg-type]
    try:
        with pytest.raises(StoreError):
            c.submit(lambda ctx: None, name="t")
        assert c.held() == frozenset() and not c.polling
    finally:
        c.close()


# -- reconcile ------------------------------------------------------------------------------
def _orphan(task_id: str, now: datetime, lease_until: datetime | None,
            status: TaskStatus = S.RUNNING) -> TaskSnapshot:
    return TaskSnapshot(task_id=task_id, name=task_id, status=status, status_version=2,
                        created_at=now, updated_at=now, lease_owner="gone",
                        lease_until=lease_until)


def test_reconcile_lease_boundary_and_terminal_tasks(store: InMemoryTaskStore,
                                                     clock: ManualClock) -> None:
    now = clock()
    store.create(_orphan("at-boundary", now, now))  # [renewal, lease_until): expired now
    store.create(_orphan("no-lease", now, None))
    store.create(_orphan("a-microsecond-left", now, now + timedelta(microseconds=1)))
    store.create(_orphan("done", now, None, status=S.SUCCEEDED))
    store.create(_orphan("pending", now, now - timedelta(seconds=1), status=S.PENDING))
    c = make(store, clock)
    try:
        assert sorted(c.reconcile()) == ["at-boundary", "no-lease", "pending"]
        for task_id in ("at-boundary", "no-lease", "pending"):
            snap = store.get(task_id)
            assert snap is not None and (snap.status, snap.status_version) == (S.LOST, 3)
            [row] = store.history(task_id)
            assert row == Transition(task_id, 3, row.from_status, S.LOST, now, row.reason)
            assert row.reason is not None and "gone" in row.reason
        kept = store.get("a-microsecond-left")
        assert kept is not None and kept.status is S.RUNNING
        done = store.get("done")
        assert done is not None and done.status is S.SUCCEEDED
        assert c.reconcile() == []  # nothing left to judge
    finally:
        c.close()


def test_reconcile_never_judges_a_task_whose_own_transitions_are_buffered(
    store: InMemoryTaskStore, clock: ManualClock
) -> None:
    faulty = FaultyStore(store)
    c = make(faulty, clock)  # type: ignore[arg-type]
    try:
        faulty.set_faults(fail={"save", "append", "touch"})
        task_id = c.submit(lambda ctx: None, name="ended-during-an-outage")
        assert c.wait(task_id, WAIT).status is S.SUCCEEDED
        clock.advance(LEASE * 2)  # its lease (from create) has long expired
        faulty.set_faults()
        assert c.reconcile() == []
        assert c.flush()
        snap = store.get(task_id)
        assert snap is not None and snap.status is S.SUCCEEDED
        assert c.write_errors == ()
    finally:
        c.close()
