"""The XP-CTRL-* scenarios: Controllers in real spawned processes on one shared store.

Each child process opens its own store with the *opener* (the picklable
zero-argument callable ``make_shared_store`` gives) and runs one
:class:`Controller`, driven by the parent through a small request/reply
protocol over queues (``submit``, ``poll``, ``stop``, ``reconcile`` ...).
Driving the polls from the parent is what makes the no-starvation scenario
deterministic: the bystander always claims *first*, the worst case, instead of
whenever the scheduler happens to run it.

Everything is bounded: one deadline per scenario for every reply the parent
waits for; each child arms ``SIGALRM`` (default action: die) and a timer
calling ``os._exit`` a little after that deadline, so it dies even if the
parent is gone; the parent terminates and then kills every child it started
in a ``finally``. No scenario asserts on elapsed time.

Interleaving assumptions, per check (each ``run.check`` says its own): the parent
drives every request and waits for its reply, so two requests to the children
never overlap unless a scenario says so; a controller's own poll thread runs only
where its poll interval is ``FAST_POLL``. A claim may skip a row any concurrent
transaction holds locked (``SKIP LOCKED``), so "not claimable" is judged only on
claims that nothing else could be holding the row against -- the parent's claims
after the controllers that could are idle or dead, repeated a few times after a
kill (a server may take a moment to drop a killed client's locks).
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import signal
import threading
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import multiprocess

from ...controller import Controller, TaskContext
from ...protocol.model import TaskStatus
from ...report.masking import masked_logging
from ...seam.factory import enter_opener, enter_store, picklability_problem

__all__ = ["SCENARIOS", "run_cross_process"]

Opener = Callable[[], Any]
#: Seconds a scenario may take before the parent gives up on a reply (never reached
#: by a working store; it turns a hang into a named failure).
DEADLINE = 60.0
#: Seconds a child outlives the deadline before destroying itself.
GRACE = 10.0
#: Real seconds between poll cycles of a controller whose poll thread runs.
FAST_POLL = 0.05
#: Polls a controller makes, after a stop was written, before "the task never ended" is
#: the verdict (a healthy store ends it within two; ~10 s at FAST_POLL on a quiet box).
POLL_BUDGET = 200
#: Seconds another process may take to read a write that has returned (it should be at
#: once; the slack only absorbs a loaded machine).
VISIBLE_WITHIN = 10.0
#: Poll interval of controllers the parent drives by hand (the thread never fires).
NEVER = 3600.0
#: Command / supervisor lease of the scenarios without a kill (real seconds).
LEASE = 30.0
#: Lease in the kill scenario: short, because the check must wait for it to expire.
KILL_LEASE = 0.5
#: Claims the parent makes, FAST_POLL apart, before "the killed holder's STOP is not
#: claimable" is the verdict: a server may hold a SIGKILLed client's row locks for a
#: moment (SKIP LOCKED skips them meanwhile); a healthy one returns it at the first.
RECLAIM_TRIES = 40


class ScenarioFailed(Exception):
    """A child reported an error or did not answer before the deadline."""


# =============================================================================================
# the child side
# =============================================================================================
def _arm_self_destruct(seconds: float) -> None:
    if hasattr(signal, "SIGALRM"):
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(max(1, math.ceil(seconds)))
    timer = threading.Timer(seconds + 2.0, os._exit, args=(70,))
    timer.daemon = True
    timer.start()


def _until_stopped(deadline: float) -> Callable[[TaskContext], None]:
    """A task that checkpoints until stopped (bounded by the deadline)."""

    def work(ctx: TaskContext) -> None:
        n = 0
        while time.monotonic() < deadline:
            n += 1
            ctx.checkpoint(done=n)
            time.sleep(0.01)

    return work


def _cpu_bound(deadline: float) -> Callable[[TaskContext], None]:
    """A task that never checkpoints, so it never sees a stop (bounded by the deadline)."""

    def work(ctx: TaskContext) -> None:
        while time.monotonic() < deadline:
            time.sleep(0.01)

    return work


def _state(c: Controller) -> dict[str, Any]:
    return {
        "polling": c.polling,
        "polls": c.polls,
        "deliveries": list(c.deliveries),
        "released": list(c.released),
        "completed": list(c.completed),
        "duplicates": list(c.duplicate_deliveries),
        "errors": list(c.side_path_errors) + list(c.write_errors),
    }


def _serve(c: Controller, op: str, args: tuple[Any, ...], deadline: float) -> Any:
    """One request from the parent."""
    if op == "submit":
        return c.submit(_until_stopped(deadline), name="xp-held")
    if op == "submit_cpu_bound":
        return c.submit(_cpu_bound(deadline), name="xp-cpu-bound")
    if op == "submit_quick":
        task_id = c.submit(lambda ctx: None, name="xp-quick")
        c.wait(task_id, max(deadline - time.monotonic(), 0.0))
        return task_id
    if op == "poll":
        c.poll_once()
        return _state(c)
    if op == "state":
        return _state(c)
    if op == "stop":
        return c.stop(args[0])
    if op == "wait_status":
        task_id, wanted, within = args
        until = min(deadline, time.monotonic() + within)
        while time.monotonic() < until:
            snap = c.get(task_id)
            if snap is not None and snap.status.value == wanted:
                return wanted
            time.sleep(0.02)
        snap = c.get(task_id)
        return snap.status.value if snap is not None else None
    if op == "wait_done":
        # Bounded by this controller's own polls, not only by the wall clock: a stop that
        # has not ended the task after POLL_BUDGET polls never will (a healthy store needs
        # one or two), so a broken store fails in seconds instead of at the deadline.
        task_id = args[0]
        start = c.polls
        final = None
        while final is None and time.monotonic() < deadline and c.polls - start <= POLL_BUDGET:
            try:
                final = c.wait(task_id, 0.2)
            except TimeoutError:
                continue
        if final is None:
            snap = c.local_snapshot(task_id)
            return {"status": snap.status.value if snap is not None else None, **_state(c)}
        while time.monotonic() < deadline and not c.completed:
            time.sleep(0.02)  # the command is completed right after the task ends
        return {"status": final.status.value, **_state(c)}
    if op == "wait_delivery":
        command_id = args[0]
        while time.monotonic() < deadline and command_id not in c.deliveries:
            time.sleep(0.02)
        return _state(c)
    if op == "reconcile":
        return c.reconcile()
    raise ValueError(f"unknown request {op!r}")


def _child_main(opener: Opener, params: dict[str, Any], inbox: Any, outbox: Any,
                deadline: float) -> None:
    """Entry point of every child: open the store, run one Controller, answer requests."""
    masked_logging()  # the store's driver logs to this process's stderr
    _arm_self_destruct(deadline - time.monotonic() + GRACE)
    try:
        with contextlib.ExitStack() as stack:
            store = enter_store(opener, stack, origin="the shared-store opener")
            c = Controller(store, owner=params["owner"],
                           command_poll_interval=params["poll"],
                           command_lease=params["lease"], join_timeout=2.0)
            outbox.put(("ready", None))
            while True:
                op, args = inbox.get(timeout=max(deadline - time.monotonic(), 0.1))
                if op == "quit":
                    c.close()
                    outbox.put(("ok", None))
                    return
                try:
                    outbox.put(("ok", _serve(c, op, args, deadline)))
                except Exception as exc:
                    outbox.put(("error", f"{op}: {type(exc).__name__}: {exc}\n"
                                         + traceback.format_exc(limit=6)))
    except queue.Empty:
        outbox.put(("error", "no request before the deadline"))
    except Exception as exc:
        outbox.put(("error", f"{type(exc).__name__}: {exc}\n" + traceback.format_exc(limit=6)))


# =============================================================================================
# the parent side
# =============================================================================================
class _Child:
    """One spawned controller process and its two queues."""

    def __init__(self, mp: Any, opener: Opener, deadline: float, *, owner: str,
                 poll: float, lease: float) -> None:
        self.owner = owner
        self.deadline = deadline
        self.budget = deadline - time.monotonic()
        self.inbox, self.outbox = mp.Queue(), mp.Queue()
        self.proc = mp.Process(
            target=_child_main, name=f"chongming-ctrl-{owner}", daemon=True,
            args=(opener, {"owner": owner, "poll": poll, "lease": lease},
                  self.inbox, self.outbox, deadline),
        )
        self.proc.start()
        self.killed = False

    def _reply(self, what: str) -> Any:
        remaining = self.deadline - time.monotonic()
        try:
            kind, value = self.outbox.get(timeout=max(remaining, 0.1))
        except queue.Empty:
            raise ScenarioFailed(
                f"controller {self.owner} (pid {self.proc.pid}) did not answer {what} "
                f"within the scenario's {self.budget:.0f} s deadline (hung store call?)"
            ) from None
        if kind == "error":
            raise ScenarioFailed(f"controller {self.owner} failed on {what}: {value}")
        return value

    def ready(self) -> None:
        self._reply("start-up (opening the store)")

    def call(self, op: str, *args: Any) -> Any:
        self.inbox.put((op, args))
        return self._reply(f"{op}{args!r}")

    def kill(self) -> None:
        self.killed = True
        if self.proc.pid is not None and self.proc.is_alive():
            os.kill(self.proc.pid, getattr(signal, "SIGKILL", signal.SIGTERM))
        self.proc.join(5.0)

    def ask_to_quit(self) -> None:
        if not self.killed and self.proc.is_alive():
            with contextlib.suppress(Exception):
                self.inbox.put(("quit", ()))

    def finish(self) -> None:
        """Wait for it to quit (after ask_to_quit); terminate, then kill, whatever does not."""
        if not self.killed and self.proc.is_alive():
            with contextlib.suppress(Exception):
                self.outbox.get(timeout=5.0)
        self.proc.join(5.0)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(2.0)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(2.0)
        for q in (self.inbox, self.outbox):
            q.cancel_join_thread()
            q.close()


class _Run:
    """A scenario's processes, deadline and problems."""

    def __init__(self, opener: Opener, seconds: float) -> None:
        self.opener = opener
        self.mp = multiprocess.get_context("spawn")
        self.deadline = time.monotonic() + seconds
        self.children: list[_Child] = []
        self.problems: list[str] = []

    def spawn(self, owner: str, *, poll: float, lease: float) -> _Child:
        child = _Child(self.mp, self.opener, self.deadline, owner=owner, poll=poll, lease=lease)
        self.children.append(child)
        return child

    def check(self, ok: bool, problem: str) -> None:
        if not ok:
            self.problems.append(problem)

    def close(self) -> None:
        for child in self.children:  # all quit at once, then each is reaped
            child.ask_to_quit()
        for child in self.children:
            child.finish()


def _scenario_stop(run: _Run, stack: contextlib.ExitStack) -> None:
    """B (another process) stops A's task; A claims, stops, completes 'stopped'."""
    a = run.spawn("A", poll=FAST_POLL, lease=LEASE)
    b = run.spawn("B", poll=FAST_POLL, lease=LEASE)
    a.ready()
    b.ready()
    task_id = a.call("submit")
    # B reads the task while it runs (as a stopper's dashboard would), then stops it.
    running = b.call("wait_status", task_id, TaskStatus.RUNNING.value, VISIBLE_WITHIN)
    # B re-reads until it sees RUNNING; a correct store shows it at the first read after
    # A's save returned, the bound only ends the wait on a broken one.
    run.check(running == TaskStatus.RUNNING.value, f"B saw A's running task as {running!r}")
    command_id = b.call("stop", task_id)
    run.check(command_id is not None, "B's stop() of A's task wrote no command")
    done = a.call("wait_done", task_id)
    # A is the only controller that polls (B never submitted a task): its polls claim the
    # stop alone, so within POLL_BUDGET polls it must have stopped the task.
    run.check(done["status"] == TaskStatus.CANCELLED.value, f"A's task ended {done['status']!r}")
    # A has written CANCELLED: B, in another process, must read it at once.
    seen = b.call("wait_status", task_id, TaskStatus.CANCELLED.value, VISIBLE_WITHIN)
    run.check(seen == TaskStatus.CANCELLED.value,
              f"B saw the task {seen!r}, never 'cancelled', after stopping it")
    run.check([command_id, "stopped"] in [list(x) for x in done["completed"]],
              f"A did not complete the stop with outcome 'stopped': {done['completed']}")
    run.check(done["duplicates"] == [], f"A received the stop twice: {done['duplicates']}")
    state = b.call("state")
    run.check(not state["polling"] and state["deliveries"] == [],
              f"B never submitted a task yet polled commands: {state}")
    store = enter_store(run.opener, stack, origin="the shared-store opener")
    later = datetime.now(UTC) + timedelta(days=1)
    again = [c.command_id for c in store.claim_commands(now=later, lease_seconds=1.0)]
    # Whatever else runs: a completed command is never claimable again.
    run.check(command_id not in again, "the completed stop was claimable again a day later")
    rows = list(store.history(task_id))
    run.check(bool(rows) and rows[-1].to_status is TaskStatus.CANCELLED,
              f"history does not end with CANCELLED: {[r.to_status.value for r in rows]}")


def _scenario_no_starvation(run: _Run, stack: contextlib.ExitStack) -> None:
    """C polls first every time and holds nothing; A must get the stop within two polls."""
    a = run.spawn("A", poll=NEVER, lease=LEASE)
    c = run.spawn("C", poll=NEVER, lease=LEASE)
    a.ready()
    c.ready()
    task_id = a.call("submit")
    c.call("submit_quick")  # C has submitted (so it polls) but holds nothing now
    store = enter_store(run.opener, stack, origin="the shared-store opener")
    stopper = Controller(store, owner="B", command_poll_interval=NEVER, command_lease=LEASE)
    stack.callback(stopper.close)
    command_id = stopper.stop(task_id)
    got = False
    # The parent drives every poll and waits for its reply: C's poll, then A's, never
    # overlapping (both poll threads are idle), so A's claim runs alone and must return
    # the stop C handed back.
    for _ in range(2):
        c_state = c.call("poll")
        run.check(command_id not in [x[0] for x in c_state["completed"]],
                  "C completed a stop for a task it does not hold")
        run.check(command_id in c_state["released"] or command_id not in c_state["deliveries"],
                  f"C claimed the stop and did not release it: {c_state}")
        a_state = a.call("poll")
        if command_id in a_state["deliveries"]:
            got = True
            break
    run.check(got, "A (the holder) did not receive the stop within two of its polls while C "
                   "claimed first (a release that completes, or no release, starves it)")
    c_state = c.call("state")
    run.check(command_id in c_state["released"],
              f"C never claimed and released the stop first: {c_state}")
    if got:
        done = a.call("wait_done", task_id)
        run.check(done["status"] == TaskStatus.CANCELLED.value,
                  f"A's task ended {done['status']!r}")
        run.check([command_id, "stopped"] in [list(x) for x in done["completed"]],
                  f"A did not complete the stop 'stopped': {done['completed']}")


def _scenario_killed_holder(run: _Run, stack: contextlib.ExitStack) -> None:
    """A holds a task and its STOP, is SIGKILLed; reconcile elsewhere marks it LOST."""
    a = run.spawn("A", poll=FAST_POLL, lease=KILL_LEASE)
    r = run.spawn("R", poll=NEVER, lease=KILL_LEASE)  # the "new process", started early
    a.ready()
    r.ready()
    task_id = a.call("submit_cpu_bound")  # never checkpoints: the stop stays in flight
    store = enter_store(run.opener, stack, origin="the shared-store opener")
    stopper = Controller(store, owner="B", command_poll_interval=NEVER, command_lease=LEASE)
    stack.callback(stopper.close)
    command_id = stopper.stop(task_id)
    state = a.call("wait_delivery", command_id)
    run.check(command_id in state["deliveries"], f"A never claimed the stop: {state}")
    a.kill()
    killed_at = datetime.now(UTC)
    # Wait (bounded) until both leases A held must have expired: the task's supervisor
    # lease as stored, and the command's (claimed before the kill, so < kill + lease).
    snap = store.get(task_id)
    run.check(snap is not None and snap.lease_owner == "A",
              f"the task's supervisor lease is not A's: {snap}")
    expiry = killed_at + timedelta(seconds=KILL_LEASE)
    if snap is not None and snap.lease_until is not None:
        expiry = max(expiry, snap.lease_until)
    while datetime.now(UTC) <= expiry and time.monotonic() < run.deadline:
        time.sleep(0.05)
    lost = r.call("reconcile")
    # R is the only live controller (B's poll thread never fires): its reconcile runs after
    # the supervisor lease A held has expired, so exactly A's task is LOST.
    run.check(lost == [task_id], f"reconcile() in a new process marked {lost}, not [{task_id}]")
    after = store.get(task_id)
    run.check(after is not None and after.status is TaskStatus.LOST,
              f"the killed holder's task is {after.status if after else None}, not LOST")
    rows = list(store.history(task_id))
    run.check(bool(rows) and rows[-1].to_status is TaskStatus.LOST,
              f"history does not end with LOST: {[x.to_status.value for x in rows]}")
    # Nothing live claims (R and B never poll, A is dead), but the killed A's last claim
    # may still hold rows locked on the server for a moment: a claim skips them meanwhile.
    # So the parent claims up to RECLAIM_TRIES times; a healthy store returns it at once.
    now = datetime.now(UTC)
    tries = 0
    again: list[str] = []
    while tries < RECLAIM_TRIES and command_id not in again:
        if tries:
            time.sleep(FAST_POLL)
        tries += 1
        now = datetime.now(UTC)
        again = [c.command_id for c in store.claim_commands(now=now, lease_seconds=KILL_LEASE)]
        for other in again:  # hand back anything else at once
            if other != command_id:
                store.release_command(other, now=now)
    run.check(command_id in again,
              f"the STOP the killed holder had claimed is not claimable after its lease expired "
              f"(not returned by any of {tries} claims, {FAST_POLL:g} s apart, with no live "
              "controller claiming)")
    if command_id in again:
        store.complete_command(command_id, now=now, outcome="already-terminal")


SCENARIOS: dict[str, Callable[[_Run, contextlib.ExitStack], None]] = {
    "stop": _scenario_stop,
    "no_starvation": _scenario_no_starvation,
    "killed_holder": _scenario_killed_holder,
}


def run_cross_process(scenario: str, make_shared_store: Callable[[], Any],
                      stack: contextlib.ExitStack, *, deadline: float = DEADLINE) -> list[str]:
    """Run one scenario on a fresh shared location; return the problems found (empty: pass).

    The location's teardown is pushed on ``stack``; every child is gone before
    this returns. ``deadline`` bounds the whole scenario (seconds): a store that
    never delivers what a child waits for fails at the deadline, never hangs.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"unknown scenario {scenario!r}; known: {', '.join(SCENARIOS)}")
    opener = enter_opener(make_shared_store, stack)
    problem = picklability_problem(opener)
    if problem is not None:
        return [problem]
    run = _Run(opener, deadline)
    with contextlib.ExitStack() as inner:
        try:
            SCENARIOS[scenario](run, inner)
        except ScenarioFailed as exc:
            run.problems.append(str(exc))
        finally:
            run.close()
    return run.problems
