"""The mixed workload's client: the calls a worker makes, and the state it keeps between them.

What one worker of ``mixed_workload`` (and of the fault run, and the aimed workload's
freezers) calls and how it builds each call's arguments: the key tasks and their
snapshots, a seeded random call of the 14 (:func:`one_call`), the reads of every filter
kind, and the signal files the workers and the parent talk through. The roles -- when a
worker calls, the rounds, the check phase, the crashes -- are ``mixed_workload``'s; this
module only knows how to make a call, so every role makes it the same way.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ...protocol import TaskStore
from ...protocol.model import Progress, TaskQuery, TaskSnapshot, TaskStatus
from ..harness import WorkerContext
from ..records import BASE, at, command, snapshot_summary, task, transition, transitions_summary
from ._common import logged_claim

TASKS = tuple(f"mix-t{k}" for k in range(8))
STEP = 1.0
LEASE = 2.0  # two rounds: leases expire and are reclaimed during the run
LEASE_BASE = 100_000.0  # a lease writer's lease_until = at(LEASE_BASE + its touch number)
CYCLE = (TaskStatus.PENDING, TaskStatus.RUNNING)


def lease_writer(task_index: int, processes: int) -> int:
    """Each task has one lease writer (a supervisor), so its leases go up one by one."""
    return task_index % processes


def key_task(tid: str, *, version: int = 0, name: str, status: TaskStatus | None = None
             ) -> TaskSnapshot:
    """A key task's snapshot: created_at, bucket, pipeline run id and a tag fixed per task
    (pairs of tasks share created_at: ties a query may order either way), the rest per
    write."""
    k = TASKS.index(tid)
    return task(tid, version=version, name=name, created_at=at(k // 2),
                bucket=k % 3, tags=frozenset({f"t{version}", "even" if k % 2 == 0 else "odd"}),
                pipeline_run_id=RUNS[k % len(RUNS)],
                status=status if status is not None else
                CYCLE[version % 2] if version else TaskStatus.PENDING,
                lease_owner=None, lease_until=None)


@dataclass(slots=True)
class State:
    """What one worker remembers between its calls (never shared)."""

    me: str
    n: int
    rng: random.Random
    #: The store instances this process holds (a second one: as a dashboard thread
    #: beside the worker would), and what closes the ones it opened.
    stores: list[TaskStore] = field(default_factory=list)
    stack: contextlib.ExitStack | None = None
    seq: int = 0
    held: dict[str, float] = field(default_factory=dict)  # command id -> lease_until (s)
    finished: list[str] = field(default_factory=list)  # commands we completed or released
    doomed: list[str] = field(default_factory=list)  # our terminal tasks, for prune
    revived: list[str] = field(default_factory=list)  # ours saved back to RUNNING this round
    submitted: list[str] = field(default_factory=list)  # command ids we submitted first

    @property
    def own_tag(self) -> str:
        """The tag only this worker's terminal tasks carry, which only it queries: a task it
        created is in that query's answer from the create's return on, never overlapping."""
        return f"own-{self.me}"


def quiet_driver_warnings(p: Mapping[str, Any]) -> None:
    """In a fault run, the driver's warnings about the connections the nemesis breaks
    (psycopg_pool's "error connecting", "discarding closed connection") are the faults
    themselves, which the run logs and reports: only errors get through. (``disable``, not
    a level: psycopg sets its own logger's level.)"""
    if p.get("tail") is not None:
        logging.disable(logging.WARNING)


def signal_file(folder: str, name: str) -> None:
    """Tell the parent or a peer something: a file, which a SIGKILL cannot leave locked."""
    (Path(folder) / name).touch()


def wait_for_file(ctx: WorkerContext, folder: str, name: str, *, limit: float | None = None
              ) -> bool:
    """Poll for a signal file until the deadline, or for ``limit`` seconds (False then)."""
    path = Path(folder) / name
    until = None if limit is None else time.monotonic() + limit
    while not path.exists():
        if ctx.remaining() <= 0 or (until is not None and time.monotonic() > until):
            return False
        time.sleep(0.005)
    return True


def create_doomed(ctx: WorkerContext, st: State) -> None:
    st.seq += 1
    doomed = f"mix-done-{st.me}-{st.seq}"
    out = ctx.call("create", {"task": doomed, "doomed": True}, partial(
        ctx.store.create, task(doomed, status=TaskStatus.SUCCEEDED,
                               created_at=at(100 + st.seq / 1000),
                               tags=frozenset({"t0", st.own_tag}))))
    if out.ok:
        st.doomed.append(doomed)
    else:
        look_after_unknown_create(ctx, st, doomed)


def look_after_unknown_create(ctx: WorkerContext, st: State, doomed: str) -> None:
    """A create that raised has an unknown effect; look, as a careful caller does: the
    task itself, then the query by the tag it carries. A create that went half way (its
    row committed, its tag rows not: two transactions where one belongs) shows in the
    first and not in the second; the checker takes the create as done from the read that
    showed it on. Asked at once, so that no prune has taken the terminal task first: left
    to the next check phase, the workload's prunes had mostly removed it. Each read is
    tried up to three times: in a fault run the next call on a connection is often a
    fault's target too."""
    s = ctx.store
    for _ in range(3):
        if ctx.call("get", {"task": doomed}, partial(s.get, doomed),
                    summarize=snapshot_summary).ok:
            break
    for _ in range(3):
        if ctx.call("query", {"tag": st.own_tag}, partial(s.query, TaskQuery(tag=st.own_tag)),
                    summarize=lambda ts: len(ts)).ok:
            break


def revive(ctx: WorkerContext, st: State) -> None:
    """Save one of our terminal tasks back to RUNNING, racing whoever prunes."""
    doomed = st.doomed.pop(st.rng.randrange(len(st.doomed)))
    seq = int(doomed.rsplit("-", 1)[1])
    snap = task(doomed, version=1, name=f"{st.me}-revive", status=TaskStatus.RUNNING,
                created_at=at(100 + seq / 1000), tags=frozenset({"t1", st.own_tag}))
    out = ctx.call("save", {"task": doomed, "expect": 0, "new": 1, "name": snap.name,
                            "revive": True}, partial(ctx.store.save, snap, expect_version=0))
    if out.ok:
        st.revived.append(doomed)


def supervised(index: int, n: int) -> list[str]:
    """The tasks whose lease this worker writes (it is their only lease writer)."""
    return [t for i, t in enumerate(TASKS) if lease_writer(i, n) == index]


def renew(ctx: WorkerContext, st: State, tid: str) -> None:
    st.seq += 1
    ctx.call("touch", {"task": tid, "lease": st.seq}, partial(
        ctx.store.touch, tid, lease_owner=st.me, lease_until=at(LEASE_BASE + st.seq),
        progress=Progress(done=st.seq, message=st.me)))


#: A save's version steps: mostly one, sometimes a skip (the write-through buffer's jump).
STEPS = (1, 1, 2)
#: The steps of a save that is frozen or killed between two of its requests: odd, so the
#: status always moves (a key task's status follows its version's parity) and the
#: half-written save leaves an entry in *two* status indexes -- a save that kept its status
#: would leave nothing a status count or filter could show; a skip half the time still.
MOVING_STEPS = (1, 3)


def read_and_save(ctx: WorkerContext, st: State, tid: str,
                  steps: tuple[int, ...] = STEPS) -> None:
    """What a controller does: read, compare-and-set (no lease in its snapshot), then
    write the transition through."""
    s = ctx.store
    got = ctx.call("get", {"task": tid}, partial(s.get, tid), summarize=snapshot_summary)
    if not got.ok or got.value is None:
        return
    v = got.value.status_version
    new = v + st.rng.choice(steps)
    st.seq += 1
    snap = key_task(tid, version=new, name=f"{st.me}-s{st.seq}")
    out = ctx.call("save", {"task": tid, "expect": v, "new": new, "name": snap.name},
                   partial(s.save, snap, expect_version=v))
    if out.ok:
        ctx.call("append", {"task": tid, "version": new},
                 partial(s.append, transition(tid, new)))


RUNS: tuple[str | None, ...] = ("run-a", "", None, "run-b")


def filters(rng: random.Random, me: str) -> dict[str, Any]:
    """One filter of every kind the protocol has, drawn uniformly: statuses, name (exact),
    name_prefix, tag, buckets, pipeline_run_id -- the falsy values included (the name and
    run id "", bucket 0) -- or two of them combined (they AND)."""
    kinds: list[Callable[[], dict[str, Any]]] = [
        lambda: {"statuses": frozenset(rng.sample((*CYCLE, TaskStatus.SUCCEEDED),
                                                  rng.randint(1, 2)))},
        lambda: {"name": rng.choice(("v0", f"{me}-create", f"{me}-revive", ""))},
        lambda: {"name_prefix": rng.choice((f"{me}-", "v", ""))},
        lambda: {"tag": rng.choice(("even", "odd", "t1", "", f"own-{me}"))},
        lambda: {"buckets": frozenset(rng.sample(range(3), rng.randint(1, 2)))},
        lambda: {"pipeline_run_id": rng.choice(("run-a", "", "run-b"))},
    ]
    if rng.random() < 0.25:
        first, second = rng.sample(kinds, 2)
        return {**first(), **second()}
    return rng.choice(kinds)()


def random_query(rng: random.Random, me: str) -> TaskQuery | None:
    """No filter (None, or a limit alone), or :func:`filters` with a limit now and then."""
    pick = rng.randrange(8)
    if pick == 0:
        return None
    newest = rng.random() < 0.3
    if pick == 1:
        return TaskQuery(limit=rng.randint(1, 4), newest_first=newest)
    return TaskQuery(**filters(rng, me), limit=rng.choice((None, None, 1, 2, 3)),
                     newest_first=newest)


#: What the checker reads in every check phase, while nobody else writes: every filter
#: kind once, so a filter that is wrong only in what it returns shows in every round.
CHECK_QUERIES: tuple[TaskQuery, ...] = (
    TaskQuery(),
    TaskQuery(statuses=frozenset(CYCLE)),
    TaskQuery(name="v0"),
    TaskQuery(name_prefix=""),
    TaskQuery(tag="even"),
    TaskQuery(buckets=frozenset({0})),
    TaskQuery(pipeline_run_id=""),
    TaskQuery(pipeline_run_id="run-a", newest_first=True, limit=1),
)


def reopen(ctx: WorkerContext, st: State) -> None:
    """Close the second instance and open a new one: closing one instance must leave the
    others on the location working (the next calls through the first one show it)."""
    assert st.stack is not None
    if len(st.stores) > 1:
        ctx.call("close", {"instance": 1}, st.stores[1].close)
        del st.stores[1]
    stack = st.stack
    opened = ctx.call("open", {"instance": 1}, partial(ctx.open_store, stack), record=False)
    if opened.ok and opened.value is not None:
        # (Under a fault opening may fail: the worker goes on with its first instance
        # and tries again at its next reopen.)
        st.stores.append(opened.value)


def random_call(ctx: WorkerContext, st: State, now: float, *, crashing: bool) -> None:
    """One random call of the 14 (a crashing worker: no claim and no prune), through one
    of the worker's store instances."""
    if len(st.stores) < 2:
        one_call(ctx, st, now, crashing=crashing)
        return
    primary = ctx.store
    ctx.store = st.stores[st.rng.randrange(len(st.stores))]
    try:
        one_call(ctx, st, now, crashing=crashing)
    finally:
        ctx.store = primary


def one_call(ctx: WorkerContext, st: State, now: float, *, crashing: bool) -> None:
    s = ctx.store
    rng = st.rng
    st.seq += 1
    tid = TASKS[rng.randrange(len(TASKS))]
    held = st.held
    if not crashing:
        for cid in [c for c, until in held.items() if until <= now]:
            del held[cid]  # the lease is over: someone else may hold it now
    pick = rng.random()
    if pick < 0.20:
        read_and_save(ctx, st, tid, MOVING_STEPS if crashing else STEPS)
    elif pick < 0.26:  # a replay of some earlier transition (always the same content)
        _append_replay(ctx, st, tid)
    elif pick < 0.35:
        mine = [] if crashing else supervised(ctx.index, st.n)
        if mine and rng.random() < 0.6:
            renew(ctx, st, rng.choice(mine))
        else:  # the side path: progress, heartbeat, or both; never the lease
            _side_touch(ctx, st, now, tid)
    elif pick < 0.39:
        since = rng.choice((0, 0, 2, 5))
        ctx.call("history", {"task": tid, "since": since},
                 partial(s.history, tid, since_version=since), summarize=transitions_summary)
    elif pick < 0.48:
        ctx.call("query", {}, partial(s.query, random_query(rng, st.me)),
                 summarize=lambda ts: len(ts))
    elif pick < 0.51:
        ctx.call("counts", {}, s.counts, summarize=lambda c: sum(c.values()))
    elif pick < 0.61:
        _submit(ctx, st, now, tid)
    elif pick < 0.73 and not crashing:
        _claim(ctx, st, now, rng.randint(1, 3))
    elif pick < 0.84 and (held or st.finished):
        _finish(ctx, st, now, complete=None)
    elif pick < 0.85:  # a plain read (a cache that outlives other processes' writes)
        target = tid if rng.random() < 0.8 or not st.doomed else rng.choice(st.doomed)
        ctx.call("get", {"task": target}, partial(s.get, target), summarize=snapshot_summary)
    elif pick < 0.90:  # an insert retried: the id exists
        insert_again(ctx, st, now, tid)
    elif pick < 0.95 and st.doomed:
        revive(ctx, st)
    elif pick < 0.97:
        create_doomed(ctx, st)
    elif pick < 0.98 and st.stack is not None:
        reopen(ctx, st)
    elif not crashing:
        _prune(ctx, st)


def _append_replay(ctx: WorkerContext, st: State, tid: str) -> None:
    v = st.rng.randrange(1, 8)
    ctx.call("append", {"task": tid, "version": v, "replay": True},
             partial(ctx.store.append, transition(tid, v)))


def _side_touch(ctx: WorkerContext, st: State, now: float, tid: str) -> None:
    """The side path: progress, heartbeat, or both; never the lease."""
    rng = st.rng
    fields: dict[str, Any] = {}
    if rng.random() < 0.6:
        fields["heartbeat_at"] = at(now + st.seq / 1000)
    if not fields or rng.random() < 0.5:
        fields["progress"] = Progress(done=st.seq, total=1000, message=st.me)
    target = tid if rng.random() < 0.9 or not st.doomed else rng.choice(st.doomed)
    ctx.call("touch", {"task": target}, partial(ctx.store.touch, target, **fields))


def _submit(ctx: WorkerContext, st: State, now: float, tid: str) -> None:
    shared = st.rng.random() < 0.3
    cid = f"mix-dup-r{ctx.round}" if shared else f"mix-c-{st.me}-{st.seq}"
    out = ctx.call("submit", {"id": cid, "shared": shared},
                   partial(ctx.store.submit_command, command(cid, tid, now + st.seq / 1000)))
    if out.ok and not shared:
        st.submitted.append(cid)


def insert_again(ctx: WorkerContext, st: State, now: float, tid: str) -> None:
    """An insert of an id that exists -- a key task (every one exists once round 0's creates
    returned), or a command this worker submitted -- as a caller that retries one does: the
    store must refuse it (StoreError), never answer as if it had inserted. The call is
    qualified ``dup`` on the call board, so a fault can be aimed at it; 5 % of the random
    calls, so that a fault run lands its lost requests on both kinds within seconds."""
    started = (ctx.round or 0) > 0  # every key task exists
    if st.submitted and (not started or st.rng.random() < 0.5):
        cid = st.rng.choice(st.submitted)
        ctx.call("submit", {"id": cid, "again": True},
                 partial(ctx.store.submit_command, command(cid, tid, now + st.seq / 1000)),
                 qualifier="dup")
    elif started:
        ctx.call("create", {"task": tid, "again": True}, partial(
            ctx.store.create, key_task(tid, name=f"{st.me}-again")), qualifier="dup")


def _claim(ctx: WorkerContext, st: State, now: float, limit: int) -> None:
    for c in logged_claim(ctx, now, LEASE, limit):
        until = c.lease_until
        st.held[c.command_id] = now if until is None else (until - BASE).total_seconds()


def _finish(ctx: WorkerContext, st: State, now: float, *, complete: bool | None) -> None:
    """Complete or release (``complete`` None: drawn) a held command -- or, now and then, one
    already finished (a no-op: COMPLETE-IDEMPOTENT, RELEASE-FINISHED-NOOP)."""
    s, rng, held = ctx.store, st.rng, st.held
    if held and (rng.random() < 0.9 or not st.finished):
        cid = rng.choice(sorted(held))
        del held[cid]
    else:
        cid = rng.choice(st.finished)
    qualifier = None if cid in st.finished else "held"  # a finished one: a no-op
    st.finished.append(cid)
    if complete if complete is not None else rng.random() < 0.6:
        ctx.call("complete", {"id": cid}, partial(s.complete_command, cid, now=at(now),
                                                  outcome="ok"), now=at(now),
                 qualifier=qualifier)
    else:
        ctx.call("release", {"id": cid}, partial(s.release_command, cid, now=at(now)),
                 now=at(now), qualifier=qualifier)


def _prune(ctx: WorkerContext, st: State) -> None:
    keep = st.rng.randrange(3)
    ctx.call("prune", {"keep_terminal": keep}, partial(ctx.store.prune, keep_terminal=keep),
             summarize=lambda x: x)


#: The writes :func:`designated_call` can make, by protocol method.
DESIGNATED = ("save", "create", "touch", "append", "submit_command", "claim_commands",
              "complete_command", "release_command", "prune")


def designated_call(ctx: WorkerContext, st: State, now: float, method: str) -> bool:
    """One write of protocol ``method``, built as the random mix builds it (a save after its
    read, a create of a terminal task of the worker's own, a touch of the side path, a
    complete after a claim of its own, ...); False when the worker has nothing to make it
    with (no command to complete, none claimable)."""
    st.seq += 1
    tid = TASKS[st.rng.randrange(len(TASKS))]
    if method == "save":
        read_and_save(ctx, st, tid, MOVING_STEPS)
    elif method == "create":
        create_doomed(ctx, st)
    elif method == "touch":
        _side_touch(ctx, st, now, tid)
    elif method == "append":
        _append_replay(ctx, st, tid)
    elif method == "submit_command":
        _submit(ctx, st, now, tid)
    elif method == "claim_commands":
        _claim(ctx, st, now, st.rng.randint(1, 3))
    elif method in ("complete_command", "release_command"):
        for cid in [c for c, until in st.held.items() if until <= now]:
            del st.held[cid]
        if not st.held:  # a command of its own first (this claim is not the one frozen)
            _claim(ctx, st, now, st.rng.randint(1, 3))
        if not st.held and not st.finished:
            return False
        _finish(ctx, st, now, complete=method == "complete_command")
    elif method == "prune":
        _prune(ctx, st)
    else:
        raise ValueError(f"no designated call for {method!r}")
    return True
