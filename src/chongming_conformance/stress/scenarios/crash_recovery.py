"""``crash_recovery`` proves XP-CLAIM-CRASH-RECOVERY: a killed holder's leases end on time.

Per crash cycle a holder claims every command, then writes as fast as it can
until the parent SIGKILLs it; the survivors probe together before, just
before, at and just after ``lease_until``. The verdict: nothing is claimable
before the lease ends, everything exactly once after it, and every write the
holder was told had succeeded survived the kill. Exactly *at* ``lease_until`` a
claim may or may not take a command (the guide does not fix whether a lease is
over at that instant: CLAIM-LEASE-BOUNDARY is a SHOULD), so that probe's claims
are released, never judged.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from ...model import Progress, TaskSnapshot, Transition
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs
from ..records import at, command, offset, task, transition
from ._common import logged_claim, report_errors, when
from ._registry import Scenario, register

LEASE = 10.0
COMMANDS = 6
#: Extra commands the holder submits before it only touches and appends.
EXTRA_SUBMITS = 200


# -- the roles ------------------------------------------------------------------------------

def _holder(ctx: WorkerContext) -> None:
    p = ctx.params
    t0, prefix, busy = p["t0"], p["prefix"], p["busy"]
    logged_claim(ctx, t0, p["lease"], p["commands"])
    ctx.set_event("claimed")
    i = 0
    while True:  # write until the SIGKILL lands (the self-destruct bounds this loop)
        i += 1
        if i <= EXTRA_SUBMITS:
            extra = command(f"{prefix}-x{i:03d}", busy, t0 - 50.0 + i / 1000)
            ctx.call("submit", {"id": extra.command_id},
                     partial(ctx.store.submit_command, extra))
        ctx.call("touch", {"task": busy, "done": i},
                 partial(ctx.store.touch, busy, progress=Progress(done=i),
                         heartbeat_at=at(t0 + i / 1000)))
        ctx.call("append", {"task": busy, "version": i},
                 partial(ctx.store.append, transition(busy, i)))


def _survivor(ctx: WorkerContext) -> None:
    p = ctx.params
    ctx.wait_event("go")  # the holder is dead by now
    probes: list[int] = p["probes_us"]
    for r, micros in enumerate(probes):
        ctx.round = r
        now = at(p["t0"]) + timedelta(microseconds=micros)
        last = micros > p["lease_us"]
        ctx.sync()
        for c in logged_claim(ctx, now, 5.0, 100_000):
            op = ctx.store.complete_command if last else ctx.store.release_command
            ctx.call("complete" if last else "release", {"id": c.command_id},
                     partial(op, c.command_id, now=now), now=now)
        ctx.sync()


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """A holder is SIGKILLed mid-write; its commands stay leased until lease_until, then free."""
    survivors = max(1, h.profile.processes - 1)
    rng = random.Random(h.profile.seed)
    lease_us = int(LEASE * 1_000_000)
    for cycle in range(h.profile.crash_cycles):
        prefix = f"crash{cycle}"
        t0 = 100_000.0 * (cycle + 1)
        busy = f"{prefix}-busy"
        ids = [f"{prefix}-cmd-{i}" for i in range(COMMANDS)]
        params = {"t0": t0, "prefix": prefix, "busy": busy, "lease": LEASE,
                  "commands": COMMANDS,
                  "lease_us": lease_us,
                  # One probe at lease_until (either answer is allowed), then three just
                  # after it: a server may need a moment to drop the killed holder's locks
                  # (SKIP LOCKED skips them meanwhile).
                  "probes_us": [0, lease_us // 2, lease_us - 1, lease_us, lease_us + 1,
                                lease_us + 1, lease_us + 1]}
        with h.store() as store:
            store.create(task(busy))
            for i, cid in enumerate(ids):
                store.submit_command(command(cid, busy, t0 - 100.0 + i))
        specs = [WorkerSpec(0, "holder", _holder, params)]
        specs += [WorkerSpec(i, "survivor", _survivor, params)
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
        judge(h, logs, ids, params, busy_task, busy_history)
        if h.errors:
            return


# -- the verdict ----------------------------------------------------------------------------

def judge(h: Harness, logs: Logs, ids: Sequence[str], params: dict[str, Any],
          busy: TaskSnapshot | None, history: Sequence[Transition]) -> None:
    t0, lease = float(params["t0"]), float(params["lease"])
    holder = logs.ops.get(0, [])
    claims = [o for o in holder if o.op == "claim" and not o.pending]
    report_errors(h, [o for o in holder if not o.pending])
    report_errors(h, (o for w, ops in logs.ops.items() if w != 0 for o in ops))
    if not claims or not claims[0].ok:
        h.anomaly("holder-claim", "the holder's claim failed or never returned; nothing to "
                  "check", commands=list(ids))
        return
    held = {c["id"]: offset(c["lease_until"]) for c in claims[0].value or []}
    if set(held) != set(ids):
        h.anomaly("holder-claim",
                  f"the holder claimed {sorted(held)} at {when(t0)} with limit={len(ids)}, "
                  f"expected all of {sorted(ids)}", held=sorted(held))
    for cid, until in held.items():
        if until is None or abs(until - (t0 + lease)) > 1e-6:
            h.anomaly("wrong-lease", f"the holder got {cid!r} with lease_until {when(until)}, "
                      f"expected {when(t0 + lease)}", command=cid)
    final_rounds = {r for r, us in enumerate(params["probes_us"]) if us > params["lease_us"]}
    boundary_rounds = {r for r, us in enumerate(params["probes_us"]) if us == params["lease_us"]}
    final_claims: Counter[str] = Counter()
    for op in logs.done("claim"):
        if op.worker == 0 or not op.ok:
            continue
        now_s = offset(op.now)
        for c in op.value or []:
            cid = c["id"]
            if op.round in final_rounds:
                final_claims[cid] += 1
            elif op.round in boundary_rounds:
                continue  # at lease_until either answer is allowed (and it was released)
            elif cid in held:
                h.anomaly(
                    "claimed-before-expiry",
                    f"command {cid!r}, leased by the killed worker 0 until "
                    f"{when(held[cid])}, was claimed by worker {op.worker} at {when(now_s)}",
                    command=cid, worker=op.worker, now=now_s, lease_until=held[cid],
                )
    expiry = t0 + lease
    for cid in held:
        if final_claims[cid] == 0:
            h.anomaly("stuck-after-expiry",
                      f"command {cid!r} of the killed worker 0 was not claimable after its "
                      f"lease_until {when(expiry)}", command=cid)
        elif final_claims[cid] > 1:
            h.anomaly("double-hold", f"command {cid!r} was claimed by {final_claims[cid]} "
                      f"survivors at {when(expiry)}", command=cid)
    acked = [o.detail["id"] for o in holder if o.op == "submit" and o.ok]
    for cid in acked:
        if final_claims[cid] == 0:
            h.anomaly("lost-write",
                      f"command {cid!r}, acknowledged to worker 0 before it was killed, was "
                      f"not claimable at {when(expiry)}: the acknowledged submit was lost",
                      command=cid)
        elif final_claims[cid] > 1:
            h.anomaly("double-hold", f"command {cid!r} was claimed by {final_claims[cid]} "
                      f"survivors at {when(expiry)}", command=cid)
    versions = {t.version for t in history}
    lost = [o.detail["version"] for o in holder
            if o.op == "append" and o.ok and o.detail["version"] not in versions]
    if lost:
        h.anomaly("lost-write", f"history versions {lost[:5]} of {params['busy']!r}, "
                  "acknowledged before the kill, are missing", versions=lost[:20])
    touched = [o.detail["done"] for o in holder if o.op == "touch"]
    acked_touch = [o.detail["done"] for o in holder if o.op == "touch" and o.ok]
    done = None if busy is None or busy.progress is None else busy.progress.done
    if acked_touch and (done is None or done < max(acked_touch) or done > max(touched)):
        h.anomaly("lost-write", f"task {params['busy']!r} has progress {done}; the last "
                  f"acknowledged touch wrote {max(acked_touch)}", progress=done)


SCENARIO = register(Scenario(name="crash_recovery", clause="XP-CLAIM-CRASH-RECOVERY",
                             rule="killed_holder", run=run))
