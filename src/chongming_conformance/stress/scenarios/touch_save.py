"""``touch_save`` proves XP-TOUCH-SAVE: touches and saves of one task never undo each other.

One saver (the only writer of ``status_version``) saves with a sentinel lease
nobody else writes; the other workers touch progress, heartbeat and lease at
full speed. The verdict: no save ever conflicts, no read shows the sentinel
or a lost lease, and every version read is one a save wrote.

Interleaving assumptions: none between touches and saves -- a touch never checks
or changes the version and a save never writes the lease, so in every order the
saver (the only writer of the version) meets no conflict, its read right after
its own save shows that version, every read shows a version some save wrote
(one that raised may have written it too) and a lease some create or touch wrote.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from ...protocol.codec import encode_dt
from ...protocol.model import Progress
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
from ..records import at, snapshot_summary, task
from ._common import report_errors
from ._registry import Scenario, register

TASK = "stress-touch"
SENTINEL_OWNER = "written-by-save"
SENTINEL_UNTIL_S = -10_000_000.0  # a lease no toucher ever writes


# -- the roles ------------------------------------------------------------------------------

def _saver(ctx: WorkerContext) -> None:
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


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """One saver, the rest touch progress, heartbeat and lease at full speed."""
    params = {"task": TASK, "rounds": h.profile.rounds, "saves": 3, "touches": 16}
    with h.store() as store:
        store.create(task(TASK, lease_owner="initial", lease_until=at(1000.0)))
    specs = [WorkerSpec(0, "saver", _saver, params)]
    specs += [WorkerSpec(i, "toucher", _toucher, params)
              for i in range(1, h.profile.processes)]
    logs = h.run(specs)
    judge(h, logs, TASK, SENTINEL_OWNER, at(SENTINEL_UNTIL_S))


# -- the verdict ----------------------------------------------------------------------------

def judge(h: Harness, logs: Logs, task_id: str, sentinel_owner: str,
          sentinel_until: datetime) -> None:
    saves = [o for o in logs.all_ops() if o.op == "save"]
    report_errors(h, (o for o in logs.all_ops() if o.op != "save"))
    # Versions some save may have written: those that returned, and those that raised
    # something other than a conflict or never returned (their effect is unknown).
    saved = {0} | {int(o.detail["new"]) for o in saves if not o.conflict}
    last_save: Op | None = None
    for op in saves:
        if op.conflict and op.error is not None:
            # The saver is the only writer of the version: no order makes it conflict.
            h.anomaly(
                "touch-conflict",
                f"worker 0, the only writer of task {task_id!r}'s version, got "
                f"ConcurrencyConflict on {op.describe()} (store holds version "
                f"{op.error.get('actual')}): something else moved status_version (or wrote "
                "the row back from a stale read)",
                cites=[op], task=task_id, round=op.round, expect=op.detail["expect"],
                actual=op.error.get("actual"),
            )
        elif not op.ok and not op.pending:
            report_errors(h, [op])
    # The saver is the only writer of the version: its read right after a successful
    # save must show exactly that version.
    last_saved: int | None = None
    for op in logs.ops.get(0, []):
        if op.op == "save" and not op.pending:
            last_saved = int(op.detail["new"]) if op.ok else None
            last_save = op
        elif op.op == "get" and op.ok and op.value is not None and last_saved is not None:
            if op.value["v"] != last_saved:
                h.anomaly(
                    "version-moved",
                    f"worker 0 saved task {task_id!r} at version {last_saved} in round "
                    f"{op.round}, and its next read shows version {op.value['v']}: something "
                    "else changed (or rewrote) status_version in between",
                    cites=[x for x in (last_save, op) if x is not None], task=task_id,
                    round=op.round, saved=last_saved, read=op.value["v"],
                )
            last_saved = None
    clobber_seen = 0
    moved_seen = 0
    sentinel_iso = encode_dt(sentinel_until)
    for op in logs.done("get"):
        snap = op.value if op.ok else None
        if snap is None:
            continue
        if (snap["lease_owner"] in (sentinel_owner, None) or snap["lease_until"] in
                (sentinel_iso, None)) and clobber_seen < 5:
            clobber_seen += 1
            # Any order: only the create and the touches write the lease, never None.
            h.anomaly(
                "lease-clobbered",
                f"worker {op.worker} read task {task_id!r} with lease "
                f"({snap['lease_owner']!r}, {snap['lease_until']}) in round {op.round}; only "
                "create and touch write the lease, never that value, and save's snapshot "
                f"carried ({sentinel_owner!r}, {sentinel_iso}): save wrote the lease columns",
                cites=[op], task=task_id, worker=op.worker, round=op.round,
                lease_owner=snap["lease_owner"],
            )
        if snap["v"] not in saved and moved_seen < 5:
            moved_seen += 1
            h.anomaly(
                "version-moved",
                f"worker {op.worker} read task {task_id!r} at status_version {snap['v']}, "
                f"which no save wrote (saved: {sorted(saved)[-3:]}...): a touch moved it",
                cites=[op], task=task_id, worker=op.worker, version=snap["v"],
            )


SCENARIO = register(Scenario(name="touch_save", clause="XP-TOUCH-SAVE",
                             rule="touch_while_saving", run=run))
