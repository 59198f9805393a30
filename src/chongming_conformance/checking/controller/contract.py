"""``ControllerContract``: does the store work under the workload of its real consumer?

A store can pass every single-call clause and still fail the moment a
controller runs on it: a lease clobbered by a whole-row save, a version jump
refused, a stop request completed by the wrong poller. These checks run the
reference :class:`~chongming_conformance.controller.Controller` on the store
and look for exactly the failures a deployment would see.

Subclass it like ``StoreContract``::

    class TestMyStoreUnderAController(ControllerContract):
        def make_store(self):
            return MyStore(...)

        def make_shared_store(self):          # optional: enables the XP-CTRL-* checks
            yield functools.partial(MyStore, path)

Every in-process check uses a :class:`ManualClock` and drives the controller
one ``poll_once()`` at a time (its poll thread's interval is an hour), so the
outcome never depends on how fast the machine is. Waits for worker threads are
bounded (``WAIT`` seconds) and fail with what was awaited; nothing asserts on
elapsed time. No pytest import: plain ``assert``.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from ...controller import Controller, ManualClock, TaskContext
from ...oracle.blame import blame
from ...oracle.confirm import confirmed, confirming, touch_moves_version
from ...protocol import TaskStore
from ...protocol.clauses import checks
from ...protocol.model import Progress, TaskQuery, TaskSnapshot, TaskStatus, Transition
from ...seam import StoreSeam
from .crossprocess import DEADLINE, run_cross_process
from .faults import FaultyStore
from .preflight import explain

__all__ = ["ControllerContract"]

#: Seconds any wait for a worker thread may take before the check fails (never reached
#: by a working store; it only turns a hang into a failure).
WAIT = 20.0
#: The supervisor / command lease every in-process check uses (manual-clock seconds).
LEASE = 30.0
#: Poll thread interval of in-process controllers: never fires during a check.
NEVER = 3600.0

S = TaskStatus


def _wait_event(event: threading.Event, what: str) -> None:
    assert event.wait(WAIT), f"gave up after {WAIT:g} s waiting for {what}"


def _counts(stats: dict[S, int]) -> dict[str, int]:
    return {status.value: n for status, n in stats.items() if n}


def _chain(rows: list[Transition]) -> list[tuple[int, S | None, S]]:
    return [(t.version, t.from_status, t.to_status) for t in rows]


class ControllerContract(StoreSeam):
    """Base class: the seam's ``make_store()`` (and optionally ``make_shared_store()``).

    Stores are opened through :class:`~chongming_conformance.seam.StoreSeam`, like
    every other single-connection base, so ``wrap_store`` and ``guard`` apply here too.
    """

    store: TaskStore
    _stack: contextlib.ExitStack
    #: Seconds one cross-process scenario may take before it fails (it never hangs).
    cross_process_deadline: float = DEADLINE

    def make_shared_store(self) -> Any:
        """Set up one shared location; return/yield a picklable opener (XP-CTRL-* only)."""
        raise NotImplementedError(
            f"{type(self).__name__} must implement make_shared_store() for the cross-process "
            "controller checks"
        )

    # -- lifecycle -------------------------------------------------------------------------
    def setup_method(self, method: object = None) -> None:
        self._stack = contextlib.ExitStack()
        try:
            self.store = self.open_into(self._stack)
        except BaseException:
            self._stack.close()
            raise

    def teardown_method(self, method: object = None) -> None:
        # Controllers registered on the stack after the store close first.
        self.close_stack(self._stack)

    def controller(self, owner: str, clock: ManualClock, store: TaskStore | None = None,
                   ) -> Controller:
        """A controller on the check's store, closed (before the store) at teardown."""
        c = Controller(store if store is not None else self.store, owner=owner,
                       command_poll_interval=NEVER, command_lease=LEASE, clock=clock,
                       join_timeout=5.0)
        self._stack.callback(c.close)
        return c

    def _stored(self, task_id: str) -> TaskSnapshot:
        found = self.store.get(task_id)
        assert found is not None, f"get({task_id!r}) returned None for a submitted task"
        return found

    def _assert_stored_status(self, task_id: str, status: S, *writers: Controller) -> None:
        """The task is stored with ``status``. When it is not and a writer's save
        conflicted (``write_errors``) with no second writer in the check, the conflict may
        be the store's own doing: a ``touch`` (the writer's heartbeat) that moves the
        version makes its next status save stale. A fresh store shows whether touch does
        that (confirm.py); if so the failure is TOUCH-NO-VERSION's (a knock-on), else the
        check's own."""
        stored = self._stored(task_id)
        if stored.status is status:
            return
        errors = [e for w in writers for e in w.write_errors]
        exc = AssertionError(
            f"{task_id!r} is stored {stored.status.value} (v{stored.status_version}), not "
            f"{status.value}; the controllers' writes: {'; '.join(errors) or 'no conflict'}")
        if errors:
            with confirming(lambda: contextlib.closing(self.open_fresh_store())):
                verdict = confirmed(touch_moves_version())
            if verdict:
                exc.add_note("knock-on: on a fresh store, touch() moves status_version, so "
                             "the controller's own status save conflicted with its heartbeat")
                blame(exc, ("TOUCH-NO-VERSION",))
        raise exc

    def _gate(self) -> tuple[threading.Event, threading.Event, Callable[[TaskContext], None]]:
        """A task that checkpoints once, says it started, and runs until released.

        Teardown releases it (before the controllers close), so a failing check
        does not leave tasks for ``close()`` to wait on.
        """
        started, release = threading.Event(), threading.Event()
        self._stack.callback(release.set)

        def work(ctx: TaskContext) -> None:
            ctx.checkpoint(done=0, total=1, message="started")
            started.set()
            release.wait(WAIT)
            ctx.checkpoint(done=1, total=1, message="finished")

        return started, release, work

    # ========================================================================================
    # in one process
    # ========================================================================================
    @checks("CTRL-PLUGS-IN")
    def test_ctrl_plugs_in__tasks_succeed_and_reads_agree(self) -> None:
        clock = ManualClock()
        c = self.controller("plug-in", clock)
        policy = c.bucket_policy

        def work(ctx: TaskContext) -> None:
            ctx.checkpoint(done=1, total=2, message="half")
            ctx.checkpoint(done=2, total=2, message="done")

        keys = [f"key-{i}" for i in range(4)]
        ids = []
        for i, key in enumerate(keys):
            ids.append(c.submit(work, name=f"job-{i}", tags=("ctrl", f"n{i}"), key=key,
                                pipeline_run_id="run-a" if i < 2 else "run-b"))
            c.wait(ids[-1], WAIT)
            clock.advance(1.0)
        assert c.flush(), f"transitions still buffered: {c.write_errors}"
        for key, task_id in zip(keys, ids, strict=True):
            stored = self._stored(task_id)
            final = c.local_snapshot(task_id)
            assert final is not None
            assert stored.status is S.SUCCEEDED, f"stored status {stored.status}, not SUCCEEDED"
            assert stored.status_version == 3, f"stored version {stored.status_version}, not 3"
            expected = final.evolve(lease_owner=stored.lease_owner, lease_until=stored.lease_until)
            assert stored == expected, f"stored {stored!r}\n != final {expected!r}"
            assert stored.progress == Progress(2, 2, "done"), stored.progress
            assert stored.bucket == policy.bucket_for(key), "bucket is not the policy's bucket"
            rows = list(self.store.history(task_id))
            assert rows == list(c.transitions(task_id)), (
                f"history differs from the transitions applied:\n{rows}\n"
                f"{list(c.transitions(task_id))}"
            )
            assert _chain(rows) == [(1, None, S.PENDING), (2, S.PENDING, S.RUNNING),
                                    (3, S.RUNNING, S.SUCCEEDED)], _chain(rows)
        listed = [t.task_id for t in c.list_tasks(TaskQuery(tag="ctrl"))]
        assert listed == ids, f"list_tasks(tag) gave {listed}, submitted {ids}"
        run_a = [t.task_id for t in c.list_tasks(TaskQuery(pipeline_run_id="run-a"))]
        assert run_a == ids[:2], f"list_tasks(pipeline_run_id) gave {run_a}"
        stats = c.stats()
        assert stats[S.SUCCEEDED] == 4 and sum(stats.values()) == 4, (
            f"stats() after 4 tasks succeeded: {_counts(stats)}")
        expected_buckets = {b: 0 for b in policy.buckets()}
        for key in keys:
            expected_buckets[policy.bucket_for(key)] += 1
        assert c.bucket_counts() == expected_buckets, (c.bucket_counts(), expected_buckets)
        mine = {policy.bucket_for(keys[0]), policy.bucket_for(keys[1])}
        in_mine = {t.task_id for t in c.tasks_in_buckets(mine)}
        wanted = {tid for key, tid in zip(keys, ids, strict=True)
                  if policy.bucket_for(key) in mine}
        assert in_mine == wanted, f"tasks_in_buckets({sorted(mine)}) gave {in_mine}"

    @checks("CTRL-PLUGS-IN")
    def test_ctrl_plugs_in__failure_and_local_stop_are_stored(self) -> None:
        clock = ManualClock()
        c = self.controller("plug-in", clock)

        def boom(ctx: TaskContext) -> None:
            raise ValueError("no such input")

        failed = c.submit(boom, name="fails")
        c.wait(failed, WAIT)
        started, release, work = self._gate()
        stopped = c.submit(work, name="stopped")
        _wait_event(started, "the task to start")
        assert c.stop(stopped) is None, "stop() of a held task must act locally"
        release.set()
        c.wait(stopped, WAIT)
        assert c.flush(), f"transitions still buffered: {c.write_errors}"
        got = self._stored(failed)
        assert got.status is S.FAILED and got.failure is not None, got
        assert got.failure.error_type == "ValueError", got.failure
        assert _chain(list(self.store.history(failed)))[-1] == (3, S.RUNNING, S.FAILED)
        got = self._stored(stopped)
        assert got.status is S.CANCELLED, f"stopped task is {got.status}"
        assert _chain(list(self.store.history(stopped)))[-1] == (3, S.RUNNING, S.CANCELLED)
        stats = c.stats()
        assert stats[S.FAILED] == 1 and stats[S.CANCELLED] == 1, (
            f"stats() after one failed and one cancelled task: {_counts(stats)}")

    @checks("CTRL-OUTAGE-RECOVERY")
    def test_ctrl_outage_recovery__buffered_transitions_land_with_a_version_jump(self) -> None:
        clock = ManualClock()
        faulty = FaultyStore(self.store)
        c = self.controller("outage", clock, store=faulty)
        faulty.set_faults(fail={"save", "append", "touch"})
        started, release, work = self._gate()
        task_id = c.submit(work, name="through-an-outage")
        _wait_event(started, "the task to start during the outage")
        c.poll_once()  # the side path fails too; nothing must stop the task
        local = c.local_snapshot(task_id)
        assert local is not None and local.status is S.RUNNING, local
        release.set()
        final = c.wait(task_id, WAIT)
        assert final.status is S.SUCCEEDED, f"the task ended {final.status} during the outage"
        stored = self._stored(task_id)
        assert (stored.status, stored.status_version) == (S.PENDING, 1), (
            "a write reached the store during the injected outage", stored)
        assert [t.version for t in c.buffered(task_id)] == [1, 2, 3]
        # Recovery; the first append commits but its reply is lost, so it is sent again.
        faulty.set_faults(lose_reply={"append"})
        c.poll_once()
        faulty.set_faults()
        c.poll_once()
        stored = self._stored(task_id)
        assert (stored.status, stored.status_version) == (S.SUCCEEDED, 3), (
            f"after the outage the store holds {stored.status.value} v{stored.status_version}, "
            f"not succeeded v3; the controller's writes: "
            f"{'; '.join(c.write_errors) or 'no conflict recorded'}")
        assert c.buffered(task_id) == (), (
            f"transitions still buffered after the outage: {c.buffered(task_id)}")
        assert ("append", "reply-lost") in faulty.calls, (
            "the lost-reply append never happened (the check did not stage a replay)")
        assert (1, 3) in faulty.saves, f"no save jumped 1 -> 3: {faulty.saves}"
        assert stored.progress == Progress(1, 1, "finished"), stored.progress
        rows = list(self.store.history(task_id))
        assert _chain(rows) == [(1, None, S.PENDING), (2, S.PENDING, S.RUNNING),
                                (3, S.RUNNING, S.SUCCEEDED)], (
            f"history after the outage is not exactly v1..v3: {_chain(rows)}")

    @checks("CTRL-RESTART-RECOVERY")
    def test_ctrl_restart_recovery__expired_lease_lost_live_lease_spared(self) -> None:
        clock = ManualClock()
        t0 = clock()
        # What a SIGKILLed process leaves behind: RUNNING, its lease expired a second ago
        # -- and a heartbeat from just now, which must not save it.
        orphan = TaskSnapshot(
            task_id="orphan", name="orphan", status=S.RUNNING, status_version=2,
            created_at=t0 - timedelta(seconds=60), updated_at=t0 - timedelta(seconds=60),
            started_at=t0 - timedelta(seconds=60), heartbeat_at=t0, lease_owner="dead",
            lease_until=t0 - timedelta(seconds=1))
        self.store.create(orphan)
        for v, (a, b) in enumerate([(None, S.PENDING), (S.PENDING, S.RUNNING)], start=1):
            self.store.append(Transition("orphan", v, a, b, t0 - timedelta(seconds=60)))
        supervisor = self.controller("supervisor", clock)
        # A CPU-bound task: one heartbeat, then silence; the side path renews its lease.
        quiet_started, quiet_release, quiet = self._gate()
        quiet_id = supervisor.submit(quiet, name="cpu-bound")
        _wait_event(quiet_started, "the CPU-bound task to start")
        supervisor.poll_once()
        # A task that has just started: its lease is the one create wrote, and its
        # RUNNING save came after it (a save that writes the lease clobbers it).
        fresh_started, fresh_release, fresh = self._gate()
        fresh_id = supervisor.submit(fresh, name="just-started")
        _wait_event(fresh_started, "the second task to start")
        clock.advance(LEASE / 2)  # every heartbeat is now stale; every lease still live
        restarted = self.controller("restarted", clock)
        lost = restarted.reconcile()
        for task_id in (quiet_id, fresh_id):
            snap = self._stored(task_id)
            assert task_id not in lost and snap.status is S.RUNNING, (
                f"reconcile() marked a live task LOST ({snap.name}: lease "
                f"{snap.lease_owner!r} until {snap.lease_until}, heartbeat {snap.heartbeat_at}, "
                f"now {clock()}); a live lease must protect it whatever its heartbeat")
        assert lost == ["orphan"], f"reconcile() marked {lost}, expected exactly ['orphan']"
        got = self._stored("orphan")
        assert (got.status, got.status_version) == (S.LOST, 3), got
        assert _chain(list(self.store.history("orphan")))[-1] == (3, S.RUNNING, S.LOST)
        quiet_release.set()
        fresh_release.set()
        for task_id in (quiet_id, fresh_id):
            supervisor.wait(task_id, WAIT)

    @checks("CTRL-READ-ONLY-NO-CLAIM")
    def test_ctrl_read_only_no_claim__dashboard_leaves_the_stop_for_its_holder(self) -> None:
        clock = ManualClock()
        holder = self.controller("holder", clock)
        dashboard = self.controller("dashboard", clock)
        started, release, work = self._gate()
        task_id = holder.submit(work, name="watched")
        _wait_event(started, "the task to start")
        command_id = dashboard.stop(task_id)
        assert command_id is not None, "stop() of a task held elsewhere must write a command"
        # The dashboard reads like a dashboard does; it never polls.
        dashboard.list_tasks()
        dashboard.stats()
        dashboard.bucket_counts()
        assert dashboard.get(task_id) is not None
        assert not dashboard.polling and dashboard.deliveries == [], "a read-only client polled"
        holder.poll_once()
        assert command_id in holder.deliveries, (
            "the holder's first poll did not receive the stop request")
        release.set()
        final = holder.wait(task_id, WAIT)
        assert final.status is S.CANCELLED, final.status

    @checks("CTRL-STOP-REACHES-HOLDER")
    def test_ctrl_stop_reaches_holder__after_a_non_holder_claimed_it_first(self) -> None:
        clock = ManualClock()
        holder = self.controller("holder", clock)
        bystander = self.controller("bystander", clock)
        stopper = self.controller("stopper", clock)
        started, release, work = self._gate()
        task_id = holder.submit(work, name="to-stop")
        _wait_event(started, "the task to start")
        other_started, other_release, other = self._gate()
        bystander.submit(other, name="bystander's own")  # so it polls, holding another task
        _wait_event(other_started, "the bystander's task to start")
        command_id = stopper.stop(task_id)
        assert command_id is not None
        bystander.poll_once()  # the worst case: the wrong controller claims first
        assert bystander.released == [command_id], (
            f"the bystander did not claim and release the stop: deliveries "
            f"{bystander.deliveries}, released {bystander.released}")
        holder.poll_once()
        assert command_id in holder.deliveries, (
            "the stop request never reached its holder after another controller released it "
            "(a release that completes the command drops it silently)")
        release.set()
        final = holder.wait(task_id, WAIT)
        holder.poll_once()
        assert final.status is S.CANCELLED, f"the stopped task ended {final.status}"
        self._assert_stored_status(task_id, S.CANCELLED, holder, bystander, stopper)
        assert (command_id, "stopped") in holder.completed, holder.completed
        other_release.set()

    @checks("CTRL-STOP-DELIVERED-ONCE")
    def test_ctrl_stop_delivered_once__no_second_delivery_while_held(self) -> None:
        clock = ManualClock()
        holder = self.controller("holder", clock)
        stopper = self.controller("stopper", clock)
        started, release, work = self._gate()
        task_id = holder.submit(work, name="slow-to-stop")
        _wait_event(started, "the task to start")
        command_id = stopper.stop(task_id)
        assert command_id is not None
        holder.poll_once()  # claims the stop; the task has not reached a checkpoint yet
        assert holder.deliveries == [command_id], holder.deliveries
        clock.advance(LEASE / 3)
        holder.poll_once()  # the claim is still held: nothing may come back
        clock.advance(LEASE / 3)
        holder.poll_once()
        assert holder.duplicate_deliveries == [], (
            f"the store handed out stop {command_id} again while its claim was held: the stop "
            f"was delivered {holder.deliveries.count(command_id)} times")
        release.set()
        holder.wait(task_id, WAIT)
        holder.poll_once()
        assert (command_id, "stopped") in holder.completed, holder.completed
        clock.advance(LEASE * 2)
        holder.poll_once()
        # What this clause owns passed above (nothing back while the claim was held). A
        # completed command handed out once its lease ran out is COMPLETE-NEVER-RECLAIMED's
        # failure: the complete did not take.
        if holder.deliveries != [command_id]:
            exc = AssertionError(
                f"a completed stop was delivered again after its lease: {holder.deliveries}")
            blame(exc, ("COMPLETE-NEVER-RECLAIMED",))
            raise exc

    # ========================================================================================
    # across processes (needs make_shared_store)
    # ========================================================================================
    def run_cross_process(self, scenario: str) -> None:
        """Run one cross-process scenario on a fresh shared location; raise on any problem."""
        problems = run_cross_process(scenario, self.make_shared_store, self._stack,
                                     deadline=self.cross_process_deadline)
        assert not problems, f"{scenario}:\n  " + "\n  ".join(problems)

    @checks("XP-CTRL-STOP")
    def test_xp_ctrl_stop__another_process_stops_the_task(self) -> None:
        self.run_cross_process("stop")

    @checks("XP-CTRL-NO-STARVATION")
    def test_xp_ctrl_no_starvation__holder_gets_the_stop_despite_a_poller(self) -> None:
        self.run_cross_process("no_starvation")

    @checks("XP-CTRL-KILLED-HOLDER")
    def test_xp_ctrl_killed_holder__reconcile_in_a_new_process(self) -> None:
        self.run_cross_process("killed_holder")

    def open_fresh_store(self) -> TaskStore:
        """One more store for the check (closed at teardown); ``preflight.explain`` uses it."""
        return self.open_into(self._stack)


def _explained(test: Callable[[ControllerContract], None]) -> Callable[[ControllerContract], None]:
    """Run ``test``; if it fails, let :func:`preflight.explain` tell a knock-on from a finding."""

    @functools.wraps(test)
    def run(self: ControllerContract) -> None:
        try:
            test(self)
        except Exception as exc:
            explain(exc, self.open_fresh_store)
            raise

    return run


for _name, _test in list(vars(ControllerContract).items()):
    if _name.startswith("test_"):
        setattr(ControllerContract, _name, _explained(_test))
