"""The scenarios: what each worker does, and the parent-side setup around it.

A scenario is a function ``scenario(h: Harness) -> None`` decorated with the
clause IDs it checks. It sets up the shared store from the parent, runs one or
more groups of spawned workers, and hands their logs to ``checker``, which
records anomalies on ``h``. Worker roles are module-level functions (the spawn
context pickles them by reference).

Every verdict is made on the logical ``now`` timeline or on counts, never on
wall-clock timing, so a correct store cannot produce a false anomaly on a
slow machine; the barrier makes the races real.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from ..clauses import checks
from ..model import Command, Progress, TaskQuery
from . import checker
from .harness import Harness, WorkerContext, WorkerSpec
from .worker import (
    at,
    command,
    commands_summary,
    snapshot_summary,
    task,
    transition,
    transitions_summary,
)

__all__ = ["SCENARIOS", "Scenario"]

Scenario = Callable[[Harness], None]
SCENARIOS: dict[str, Scenario] = {}


def _register(func: Scenario) -> Scenario:
    SCENARIOS[func.__name__] = func
    return func


def _claim(ctx: WorkerContext, when: float | datetime, lease: float, limit: int) -> list[Command]:
    """One logged claim at logical ``when`` (seconds after BASE, or a datetime)."""
    now = when if isinstance(when, datetime) else at(when)
    out = ctx.call(
        "claim", {"lease_seconds": lease, "limit": limit},
        partial(ctx.store.claim_commands, now=now, lease_seconds=lease, limit=limit),
        now=now, summarize=commands_summary,
    )
    return list(out.value) if out.ok and out.value is not None else []


# -- save race ----------------------------------------------------------------------------

def _save_race_worker(ctx: WorkerContext) -> None:
    task_id: str = ctx.params["task"]
    for r in range(ctx.params["rounds"]):
        ctx.round = r
        new = 2 * r + 2  # versions skip by two on purpose (SAVE-VERSION-SKIP)
        snap = task(task_id, version=new, name=f"r{r}-w{ctx.index}")
        ctx.sync()
        out = ctx.call("save", {"task": task_id, "expect": 2 * r, "new": new},
                       partial(ctx.store.save, snap, expect_version=2 * r))
        if out.ok:
            ctx.call("append", {"task": task_id, "version": new},
                     partial(ctx.store.append, transition(task_id, new, reason=f"w{ctx.index}")))


@_register
@checks("XP-SAVE-ATOMIC")
def save_race(h: Harness) -> None:
    """Every round all workers save one task at the same expect_version: one wins."""
    task_id, rounds = "stress-save", h.profile.rounds
    with h.store() as store:
        store.create(task(task_id))
    specs = [WorkerSpec(i, "saver", _save_race_worker, {"task": task_id, "rounds": rounds})
             for i in range(h.profile.processes)]
    logs = h.run(specs)
    with h.store() as store:
        final = store.get(task_id)
        history = list(store.history(task_id))
    checker.check_save_race(h, logs, task_id, rounds, final, history)


# -- claim race ---------------------------------------------------------------------------

CLAIM_STEP = 1.0
CLAIM_LEASE = 2.0  # two rounds: also exercises "claimable again at now == lease_until"


def _claim_race_worker(ctx: WorkerContext) -> None:
    p = ctx.params
    rounds, lease, limit = p["rounds"], p["lease"], p["limit"]
    rng = random.Random(p["seed"] * 7919 + ctx.index)
    held: dict[str, Any] = {}  # command_id -> lease_until (None if the store set none)
    for r in range(rounds):
        ctx.round = r
        now_s = r * p["step"]
        ctx.sync()  # phase A: everybody claims at the same logical instant
        for c in _claim(ctx, now_s, lease, limit):
            held[c.command_id] = c.lease_until
        ctx.sync()  # phase B: act on what we hold, while our lease is still valid
        for cid in sorted(held):
            until = held[cid]
            if until is not None and until <= at(now_s):
                del held[cid]  # the lease is over: someone else may hold it now
                continue
            pick = rng.random()
            if pick < 0.45:
                ctx.call("complete", {"id": cid},
                         partial(ctx.store.complete_command, cid, now=at(now_s), outcome="ok"),
                         now=at(now_s))
                del held[cid]
            elif pick < 0.75:
                ctx.call("release", {"id": cid},
                         partial(ctx.store.release_command, cid, now=at(now_s)), now=at(now_s))
                del held[cid]
            # else: keep holding into the next round
    ctx.round = rounds
    ctx.sync()  # drain: every lease from the rounds has expired at this instant
    drain_s = p["drain_at"]
    for _ in range(p["commands"] + 2):
        got = _claim(ctx, drain_s, lease, limit)
        if not got:
            break
        for c in got:
            ctx.call("complete", {"id": c.command_id},
                     partial(ctx.store.complete_command, c.command_id, now=at(drain_s),
                             outcome="ok"), now=at(drain_s))


@_register
@checks("XP-CLAIM-EXCLUSIVE")
def claim_race(h: Harness) -> None:
    """Consumers claim, complete, release or keep commands in barrier-aligned rounds."""
    n, rounds = h.profile.processes, h.profile.rounds
    count = n * rounds // 2 + n
    params = {"rounds": rounds, "lease": CLAIM_LEASE, "step": CLAIM_STEP, "limit": 1,
              "seed": h.profile.seed, "commands": count,
              "drain_at": rounds * CLAIM_STEP + CLAIM_LEASE + CLAIM_STEP}
    ids = [f"claim-{i:04d}" for i in range(count)]
    with h.store() as store:
        for i, cid in enumerate(ids):
            store.submit_command(command(cid, f"task-{i % 7}", -1000.0 + i))
    logs = h.run([WorkerSpec(i, "consumer", _claim_race_worker, params) for i in range(n)])
    with h.store() as store:
        leftover = list(store.claim_commands(now=at(params["drain_at"] + 1000.0),
                                             lease_seconds=CLAIM_LEASE, limit=count + 100))
    checker.check_claim_race(h, logs, ids, params, leftover)


# -- crashed holder -----------------------------------------------------------------------

CRASH_LEASE = 10.0
CRASH_COMMANDS = 6
CRASH_EXTRA = 200


def _crash_holder(ctx: WorkerContext) -> None:
    p = ctx.params
    t0, prefix, busy = p["t0"], p["prefix"], p["busy"]
    _claim(ctx, t0, p["lease"], p["commands"])
    ctx.set_event("claimed")
    i = 0
    while True:  # write until the SIGKILL lands (the self-destruct bounds this loop)
        i += 1
        if i <= CRASH_EXTRA:
            extra = command(f"{prefix}-x{i:03d}", busy, t0 - 50.0 + i / 1000)
            ctx.call("submit", {"id": extra.command_id},
                     partial(ctx.store.submit_command, extra))
        ctx.call("touch", {"task": busy, "done": i},
                 partial(ctx.store.touch, busy, progress=Progress(done=i),
                         heartbeat_at=at(t0 + i / 1000)))
        ctx.call("append", {"task": busy, "version": i},
                 partial(ctx.store.append, transition(busy, i)))


def _crash_survivor(ctx: WorkerContext) -> None:
    p = ctx.params
    ctx.wait_event("go")  # the holder is dead by now
    probes: list[int] = p["probes_us"]
    for r, micros in enumerate(probes):
        ctx.round = r
        now = at(p["t0"]) + timedelta(microseconds=micros)
        last = micros >= p["lease_us"]
        ctx.sync()
        for c in _claim(ctx, now, 5.0, 100_000):
            op = ctx.store.complete_command if last else ctx.store.release_command
            ctx.call("complete" if last else "release", {"id": c.command_id},
                     partial(op, c.command_id, now=now), now=now)
        ctx.sync()


@_register
@checks("XP-CLAIM-CRASH-RECOVERY")
def crash_recovery(h: Harness) -> None:
    """A holder is SIGKILLed mid-write; its commands stay leased until lease_until, then free."""
    survivors = max(1, h.profile.processes - 1)
    rng = random.Random(h.profile.seed)
    lease_us = int(CRASH_LEASE * 1_000_000)
    for cycle in range(h.profile.crash_cycles):
        prefix = f"crash{cycle}"
        t0 = 100_000.0 * (cycle + 1)
        busy = f"{prefix}-busy"
        ids = [f"{prefix}-cmd-{i}" for i in range(CRASH_COMMANDS)]
        params = {"t0": t0, "prefix": prefix, "busy": busy, "lease": CRASH_LEASE,
                  "commands": CRASH_COMMANDS,
                  "lease_us": lease_us,
                  # Three probes at lease_until: a server may need a moment to drop the
                  # killed holder's locks (SKIP LOCKED skips them meanwhile).
                  "probes_us": [0, lease_us // 2, lease_us - 1, lease_us, lease_us, lease_us]}
        with h.store() as store:
            store.create(task(busy))
            for i, cid in enumerate(ids):
                store.submit_command(command(cid, busy, t0 - 100.0 + i))
        specs = [WorkerSpec(0, "holder", _crash_holder, params)]
        specs += [WorkerSpec(i, "survivor", _crash_survivor, params)
                  for i in range(1, survivors + 1)]
        group = h.group(specs, barrier_parties=survivors, events=("claimed", "go"))
        group.start()
        if group.wait_event("claimed", by=0):
            time.sleep(rng.uniform(0.0, 0.05))  # let the kill land inside the holder's writes
            group.kill(0)
        else:
            h.errors.append(f"scenario 'crash_recovery' cycle {cycle}: the holder never "
                            "reported its claim (see its log)")
        group.set_event("go")
        logs = group.finish()
        with h.store() as store:
            busy_task = store.get(busy)
            busy_history = list(store.history(busy))
        checker.check_crash(h, logs, ids, params, busy_task, busy_history)
        if h.errors:
            return


# -- touch vs save ------------------------------------------------------------------------

SENTINEL_OWNER = "written-by-save"
SENTINEL_UNTIL_S = -10_000_000.0  # a lease no toucher ever writes


def _touch_saver(ctx: WorkerContext) -> None:
    p = ctx.params
    task_id, version = p["task"], 0
    rounds = p["rounds"]
    for r in range(rounds + 1):
        ctx.round = r
        ctx.sync()  # the last round runs alone: touchers have stopped
        for _ in range(p["saves"] if r < rounds else 1):
            new = version + 2
            snap = task(task_id, version=new, lease_owner=SENTINEL_OWNER,
                        lease_until=at(SENTINEL_UNTIL_S), heartbeat_at=None)
            out = ctx.call("save", {"task": task_id, "expect": version, "new": new},
                           partial(ctx.store.save, snap, expect_version=version))
            got = ctx.call("get", {"task": task_id}, partial(ctx.store.get, task_id),
                           summarize=snapshot_summary)
            if out.ok:
                version = new
            elif got.ok and got.value is not None:
                version = got.value.status_version  # resync so later rounds still test


def _toucher(ctx: WorkerContext) -> None:
    p = ctx.params
    task_id, seq = p["task"], 0
    owner = f"toucher-{ctx.index}"
    for r in range(p["rounds"]):
        ctx.round = r
        ctx.sync()
        for j in range(p["touches"]):
            seq += 1
            fields: dict[str, Any] = {}
            kind = seq % 4
            if kind in (0, 1):
                fields["progress"] = Progress(done=seq, message=owner)
            if kind in (0, 2):
                fields["heartbeat_at"] = at(seq)
            if kind in (0, 3):
                fields["lease_owner"] = owner
                fields["lease_until"] = at(1000.0 + seq)
            ctx.call("touch", {"task": task_id, "seq": seq, "fields": sorted(fields)},
                     partial(ctx.store.touch, task_id, **fields))
            if j % 4 == 3:
                ctx.call("get", {"task": task_id}, partial(ctx.store.get, task_id),
                         summarize=snapshot_summary)
    ctx.round = p["rounds"]
    ctx.sync()


@_register
@checks("XP-TOUCH-SAVE")
def touch_save(h: Harness) -> None:
    """One saver, the rest touch progress, heartbeat and lease at full speed."""
    task_id = "stress-touch"
    params = {"task": task_id, "rounds": h.profile.rounds, "saves": 3, "touches": 16}
    with h.store() as store:
        store.create(task(task_id, lease_owner="initial", lease_until=at(1000.0)))
    specs = [WorkerSpec(0, "saver", _touch_saver, params)]
    specs += [WorkerSpec(i, "toucher", _toucher, params)
              for i in range(1, h.profile.processes)]
    logs = h.run(specs)
    checker.check_touch_save(h, logs, task_id, SENTINEL_OWNER, at(SENTINEL_UNTIL_S))


# -- append replay ------------------------------------------------------------------------

APPEND_PER_ROUND = 4


def _appender(ctx: WorkerContext) -> None:
    p = ctx.params
    task_id, k = p["task"], p["per_round"]
    for r in range(p["rounds"]):
        ctx.round = r
        versions = list(range(r * k + 1, r * k + k + 1))
        shift = ctx.index % k
        versions = versions[shift:] + versions[:shift]
        if ctx.index % 2:
            versions.reverse()
        ctx.sync()
        for v in versions:
            ctx.call("append", {"task": task_id, "version": v},
                     partial(ctx.store.append, transition(task_id, v, reason=f"w{ctx.index}")))
        ctx.call("history", {"task": task_id, "since": r * k},
                 partial(ctx.store.history, task_id, since_version=r * k),
                 summarize=transitions_summary)


@_register
@checks("XP-APPEND-REPLAY")
def append_replay(h: Harness) -> None:
    """Every worker appends the same versions at once, in different orders."""
    task_id = "stress-append"
    params = {"task": task_id, "rounds": h.profile.rounds, "per_round": APPEND_PER_ROUND}
    with h.store() as store:
        store.create(task(task_id))
    logs = h.run([WorkerSpec(i, "appender", _appender, params)
                  for i in range(h.profile.processes)])
    with h.store() as store:
        final = list(store.history(task_id))
    checker.check_append(h, logs, task_id, params, h.profile.processes, final)


# -- release, no starvation ---------------------------------------------------------------

STARVE_LEASE = 2.0
#: Polls within which the owner must receive its command (a correct store needs one).
STARVATION_POLL_BOUND = 2


def _starve_worker(ctx: WorkerContext) -> None:
    p = ctx.params
    n, rounds, lease = p["workers"], p["rounds"], p["lease"]
    mine = f"own-w{ctx.index}"
    total = rounds + p["tail"]
    for r in range(total):
        ctx.round = r
        now = at(float(r))
        ctx.sync()  # phase S: worker 1 submits one command for every worker's task
        if ctx.index == 1 and r < rounds:
            for i in range(n):
                cmd = command(f"r{r:03d}-for-w{i}", f"own-w{i}", r - 0.5 + i / 1000)
                ctx.call("submit", {"id": cmd.command_id, "task": cmd.task_id},
                         partial(ctx.store.submit_command, cmd))
        ctx.sync()  # phase A: the non-owners of worker 0's task poll (and race each other)
        if ctx.index != 0 and r < rounds:
            _poll(ctx, now, lease, mine)
        ctx.sync()  # phase B: the owner polls
        if ctx.index == 0:
            _poll(ctx, now, lease, mine)


def _poll(ctx: WorkerContext, now: datetime, lease: float, mine: str) -> None:
    # A limit above any possible backlog: the owner's command is never cut off by it.
    for c in _claim(ctx, now, lease, 10_000):
        if c.task_id == mine:
            ctx.call("complete", {"id": c.command_id},
                     partial(ctx.store.complete_command, c.command_id, now=now, outcome="done"),
                     now=now)
        else:  # not ours: hand it back at once so its owner can take it
            ctx.call("release", {"id": c.command_id},
                     partial(ctx.store.release_command, c.command_id, now=now), now=now)


@_register
@checks("XP-RELEASE-NO-STARVATION")
def release_starvation(h: Harness) -> None:
    """Non-owners claim and release; worker 0 must get its commands within a bounded poll."""
    n = h.profile.processes
    params = {"workers": n, "rounds": h.profile.rounds, "lease": STARVE_LEASE,
              "tail": STARVATION_POLL_BOUND}
    with h.store() as store:
        for i in range(n):
            store.create(task(f"own-w{i}"))
    logs = h.run([WorkerSpec(i, "owner" if i == 0 else "other", _starve_worker, params)
                  for i in range(n)])
    checker.check_starvation(h, logs, params, STARVATION_POLL_BOUND)


# -- shared visibility --------------------------------------------------------------------

def _visibility_worker(ctx: WorkerContext) -> None:
    p = ctx.params
    n, task_id = p["workers"], p["task"]
    for r in range(p["rounds"]):
        ctx.round = r
        writer = r % n
        ctx.sync()  # phase W: the writer writes while the others read the same row
        if ctx.index == writer:
            snap = task(task_id, version=r + 1)
            ctx.call("save", {"task": task_id, "expect": r, "new": r + 1},
                     partial(ctx.store.save, snap, expect_version=r))
            ctx.call("touch", {"task": task_id, "heartbeat": r},
                     partial(ctx.store.touch, task_id, heartbeat_at=at(r + 0.5)))
            ctx.call("create", {"task": f"vis-{r}"},
                     partial(ctx.store.create, task(f"vis-{r}", name=f"vis-{r}")))
            ctx.call("append", {"task": task_id, "version": r + 1},
                     partial(ctx.store.append, transition(task_id, r + 1)))
        else:
            for _ in range(p["spins"]):
                ctx.call("spin-get", {"task": task_id}, partial(ctx.store.get, task_id),
                         summarize=snapshot_summary)
        ctx.sync()  # phase R: every other worker must now see all of it
        if ctx.index != writer:
            ctx.call("get", {"task": task_id}, partial(ctx.store.get, task_id),
                     summarize=snapshot_summary)
            ctx.call("get-new", {"task": f"vis-{r}"}, partial(ctx.store.get, f"vis-{r}"),
                     summarize=snapshot_summary)
            ctx.call("query-new", {"name": f"vis-{r}"},
                     partial(ctx.store.query, TaskQuery(name=f"vis-{r}")),
                     summarize=lambda rows: [s.task_id for s in rows])
            ctx.call("history", {"task": task_id, "since": r},
                     partial(ctx.store.history, task_id, since_version=r),
                     summarize=transitions_summary)


@_register
@checks("XP-SHARED-VISIBILITY")
def shared_visibility(h: Harness) -> None:
    """A rotating writer writes; every other process must see it at its next read."""
    task_id = "stress-visible"
    params = {"workers": h.profile.processes, "task": task_id, "rounds": h.profile.rounds,
              "spins": 6}
    with h.store() as store:
        store.create(task(task_id))
    logs = h.run([WorkerSpec(i, "peer", _visibility_worker, params)
                  for i in range(h.profile.processes)])
    checker.check_visibility(h, logs, task_id, params)

