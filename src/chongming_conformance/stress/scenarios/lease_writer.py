"""``lease_writer`` proves XP-SAVE-KEEPS-LEASE: saves never carry an older lease back.

Worker 0 is the task's only lease writer: it renews the lease with ``touch``
as fast as it can, each renewal with a later ``lease_until`` (which encodes
its sequence number). The other workers keep saving the task (read, then
compare-and-set, their snapshots carrying no lease, as a controller's do) and
read it back after each save. Two checks, both sound on any machine:

* real-time order: a read *invoked after* renewal k *returned* must show
  renewal k or a later one -- only the renewer writes the lease, in order;
* at every round's barrier (nobody writes) each worker reads the lease, which
  must be exactly the renewer's latest acknowledged renewal.

An ORM-style save that reads the row, carries its lease over and writes every
column puts back the lease read before a renewal that landed in between.

Interleaving assumptions: none among the saves and renewals themselves; only
real-time order (a call that returned before another was invoked took effect
first) and the barrier (nobody writes between the two barriers of a round). A
renewal that raised or never returned may or may not have landed: a read may
show it, and the lease expected at a barrier is then any of the renewals from
the last acknowledged one to that one.
"""

from __future__ import annotations

import bisect
from functools import partial

from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
from ..records import at, offset, snapshot_summary, task
from ._common import report_errors
from ._registry import Scenario, register

TASK = "stress-lease"
OWNER = "renewer"
LEASE_BASE = 100_000.0  # lease_until = at(LEASE_BASE + renewal number)


def _renewal(lease_until_iso: str | None) -> int | None:
    """Which renewal wrote a lease (0: the create), or None for a lease nobody wrote."""
    seconds = offset(lease_until_iso)
    if seconds is None or seconds < LEASE_BASE or seconds != int(seconds):
        return None
    return int(seconds - LEASE_BASE)


# -- the roles ------------------------------------------------------------------------------

def _renewer(ctx: WorkerContext) -> None:
    p = ctx.params
    seq = 0
    for r in range(p["rounds"]):
        ctx.round = r
        ctx.sync()
        for _ in range(p["renewals"]):
            seq += 1
            ctx.call("touch", {"task": TASK, "renewal": seq},
                     partial(ctx.store.touch, TASK, lease_owner=OWNER,
                             lease_until=at(LEASE_BASE + seq)))
        ctx.sync()  # the barrier read: nobody writes until the next round's barrier
        ctx.call("get", {"task": TASK, "at_barrier": True}, partial(ctx.store.get, TASK),
                 summarize=snapshot_summary)


def _saver(ctx: WorkerContext) -> None:
    p = ctx.params
    for r in range(p["rounds"]):
        ctx.round = r
        ctx.sync()
        for _ in range(p["saves"]):
            got = ctx.call("get", {"task": TASK}, partial(ctx.store.get, TASK),
                           summarize=snapshot_summary)
            if not got.ok or got.value is None:
                continue
            version = got.value.status_version
            snap = task(TASK, version=version + 1, name=f"w{ctx.index}",
                        lease_owner=None, lease_until=None)
            ctx.call("save", {"task": TASK, "expect": version, "new": version + 1},
                     partial(ctx.store.save, snap, expect_version=version))
        ctx.sync()
        ctx.call("get", {"task": TASK, "at_barrier": True}, partial(ctx.store.get, TASK),
                 summarize=snapshot_summary)


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """Worker 0 renews the lease; the others read-and-save the task continuously."""
    params = {"rounds": h.profile.rounds, "renewals": 8, "saves": 5}
    with h.store() as store:
        store.create(task(TASK, lease_owner=OWNER, lease_until=at(LEASE_BASE)))
    specs = [WorkerSpec(0, "renewer", _renewer, params)]
    specs += [WorkerSpec(i, "saver", _saver, params) for i in range(1, h.profile.processes)]
    judge(h, h.run(specs))


# -- the verdict ----------------------------------------------------------------------------

def judge(h: Harness, logs: Logs) -> None:
    report_errors(h, (o for o in logs.all_ops() if o.op != "save"))
    report_errors(h, logs.done("save"), conflict_ok=True)  # savers race each other: fine
    attempts = [o for o in logs.ops.get(0, []) if o.op == "touch"]
    renewals = sorted((o for o in attempts if o.ok), key=lambda o: o.t_invoke)
    returned_at = [o.t_return or 0.0 for o in renewals]
    reported = 0
    for op in logs.done("get"):
        if not op.ok or op.value is None or reported >= 5:
            continue
        seen = _renewal(op.value["lease_until"])
        owner = op.value["lease_owner"]
        if op.detail.get("at_barrier"):
            # Between the round's two barriers nobody writes: the lease is the last
            # renewal that took effect -- the last acknowledged one, or a later one that
            # raised (its effect is unknown).
            r = op.round or 0
            mine = [o for o in attempts if (o.round or 0) <= r]
            acked = [o for o in mine if o.ok]
            floor = int(acked[-1].detail["renewal"]) if acked else 0
            allowed = {floor} | {int(o.detail["renewal"]) for o in mine
                                 if not o.ok and int(o.detail["renewal"]) > floor}
            if seen not in allowed or owner != OWNER:
                reported += 1
                _stale(h, op, seen, owner, floor, "at the round's barrier, when nobody writes",
                       acked[-1:])
            continue
        # Renewals that returned before this read was invoked (they are in order): the
        # read's point is after them, and only the renewer writes the lease.
        done_before = bisect.bisect_left(returned_at, op.t_invoke)
        floor = int(renewals[done_before - 1].detail["renewal"]) if done_before else 0
        if seen is None or seen < floor or owner != OWNER:
            reported += 1
            _stale(h, op, seen, owner, floor, "though that renewal had returned before the read "
                   "started", renewals[done_before - 1:done_before])


def _stale(h: Harness, op: Op, seen: int | None, owner: str | None, expected: int,
           why: str, renewal: list[Op]) -> None:
    shown = "a lease nobody wrote" if seen is None else f"renewal {seen}"
    h.anomaly(
        "stale-lease",
        f"worker {op.worker} read task {TASK!r} in round {op.round} with lease ({owner!r}, "
        f"{shown}); the renewer's latest was renewal {expected}, {why}: a save wrote the "
        "lease columns from an older read (or None)",
        cites=[*renewal, op], task=TASK, worker=op.worker, round=op.round, seen=seen,
        expected=expected,
    )


SCENARIO = register(Scenario(name="lease_writer", clause="XP-SAVE-KEEPS-LEASE",
                             rule="renewed_lease_survives_saves", run=run))
