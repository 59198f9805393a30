"""``crash_recovery`` proves XP-CLAIM-CRASH-RECOVERY: a killed holder's leases end on time.

Per crash cycle a holder claims every command, then writes as fast as it can
until the parent SIGKILLs it; the survivors probe together before, just
before, at and just after ``lease_until``. The verdict: nothing is claimable
before the lease ends, everything exactly once after it, and every write the
holder was told had succeeded survived the kill. Exactly *at* ``lease_until`` a
claim may or may not take a command (the guide does not fix whether a lease is
over at that instant: CLAIM-LEASE-BOUNDARY is a SHOULD), so that probe's claims
are released, never judged.

Interleaving assumptions. The probes are a barrier apart, and each probe's claims
finish what they took before the next barrier: the holder's submitted commands
and, from ``lease_until`` on, its claimed ones are completed; a command of the
holder's claimed before ``lease_until`` (the fault itself) is handed back -- so no
verdict relies on ``release_command`` (a release that keeps the lease is
RELEASE-NOT-COMPLETE's failure, not this clause's). Inside a probe the survivors'
claims race: a ``SKIP LOCKED`` claim may skip rows another claim holds, so
"not returned" is judged on all the probes that may return the command together,
and the last probe is one survivor's alone -- after the kill, nothing but a dead
holder's lingering transaction could still hold a row, and the earlier probes
gave the server time to drop it. The holder's claim runs alone (the survivors
wait for the kill). A write of the holder that never returned may or may not
have landed: only acknowledged writes are judged.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Sequence
from datetime import timedelta
from functools import partial
from typing import Any

from ...protocol.model import Progress, TaskSnapshot, Transition
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
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
        ctx.sync()
        if r == len(probes) - 1 and ctx.index != 1:
            ctx.sync()  # the last probe is worker 1's alone: no concurrent claim skips rows
            continue
        for c in logged_claim(ctx, now, 5.0, 100_000):
            # Done with it: a command of the holder's only from lease_until on (before it,
            # taking one is the fault, handed back); anything else (the holder's submits)
            # at once. No verdict relies on release_command working.
            done = micros >= p["lease_us"] or c.command_id not in p["held"]
            op = ctx.store.complete_command if done else ctx.store.release_command
            ctx.call("complete" if done else "release", {"id": c.command_id},
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
                  "commands": COMMANDS, "held": ids,
                  "lease_us": lease_us,
                  # One probe at lease_until (either answer is allowed: what it takes, it
                  # completes), then three just after it: a server may need a moment to
                  # drop the killed holder's locks (SKIP LOCKED skips them meanwhile); the
                  # last is one survivor's alone.
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
                  "check", cites=claims[:1], commands=list(ids))
        return
    claim = claims[0]
    held = {c["id"]: offset(c["lease_until"]) for c in claim.value or []}
    if set(held) != set(ids):
        # The holder claims alone (the survivors wait for the kill), every command free.
        h.anomaly("holder-claim",
                  f"the holder claimed {sorted(held)} at {when(t0)} with limit={len(ids)}, "
                  f"alone, when all of {sorted(ids)} were free", cites=[claim],
                  held=sorted(held))
    for cid, until in held.items():
        if until is None or abs(until - (t0 + lease)) > 1e-6:
            h.anomaly("wrong-lease", f"the holder got {cid!r} with lease_until {when(until)}, "
                      f"expected {when(t0 + lease)}", cites=[claim], command=cid)
    lease_us = params["lease_us"]
    after_rounds = {r for r, us in enumerate(params["probes_us"]) if us >= lease_us}
    last_round = len(params["probes_us"]) - 1
    returned: dict[str, list[Op]] = defaultdict(list)
    for op in logs.done("claim"):
        if op.worker == 0 or not op.ok:
            continue
        now_s = offset(op.now)
        for c in op.value or []:
            cid = c["id"]
            if cid not in held or op.round in after_rounds:
                returned[cid].append(op)
            else:
                # Before lease_until the killed holder's lease holds, whatever the order.
                h.anomaly(
                    "claimed-before-expiry",
                    f"command {cid!r}, leased by the killed worker 0 until "
                    f"{when(held[cid])}, was claimed by worker {op.worker} at {when(now_s)}",
                    cites=[claim, op], command=cid, worker=op.worker, now=now_s,
                    lease_until=held[cid],
                )
    completes = [o for o in logs.done("complete") if o.ok]
    claims = [o for o in logs.all_ops() if o.op == "claim" and o.worker != 0]
    solo = [o for o in claims if o.round == last_round]
    expiry = t0 + lease

    def once(cid: str, got: list[Op], what: str, probes: str, fault: str,
             first: list[Op]) -> None:
        """Returned by exactly one of the claims that may return it (each completes it)."""
        if not got:
            tried = [o for o in claims if o.round in after_rounds] if probes else claims
            h.anomaly(fault, f"command {cid!r}, {what}, was returned by none of the "
                      f"{len(tried)} claims {probes}after the kill, the last of them alone",
                      cites=[*first, *solo], command=cid)
            return
        done = next((o for o in completes if o.worker == got[0].worker
                     and o.detail["id"] == cid), None)
        if len(got) > 1 and done is not None:
            # The first claimer completed it and that call returned: no other claim may
            # return it (before the completion its lease held, after it it is finished).
            h.anomaly("double-hold", f"command {cid!r}, {what}, was returned by {len(got)} "
                      f"claims {probes}after the kill, though the first one's claimer "
                      "completed it", cites=[*got[:2], done], command=cid)

    for cid in held:
        once(cid, returned.get(cid, []), f"leased by the killed worker 0 until "
             f"{when(expiry)}", f"at or after {when(expiry)} ", "stuck-after-expiry", [claim])
    for sub in (o for o in holder if o.op == "submit" and o.ok):
        cid = sub.detail["id"]
        once(cid, returned.get(cid, []), "acknowledged to worker 0 before it was killed", "",
             "lost-write", [sub])
    versions = {t.version for t in history}
    lost = [o for o in holder
            if o.op == "append" and o.ok and o.detail["version"] not in versions]
    if lost:
        h.anomaly("lost-write", f"history versions {[o.detail['version'] for o in lost][:5]} of "
                  f"{params['busy']!r}, acknowledged before the kill, are missing",
                  cites=lost[:3], versions=[o.detail["version"] for o in lost][:20])
    touches = [o for o in holder if o.op == "touch"]
    acked_touch = [o for o in touches if o.ok]
    done = None if busy is None or busy.progress is None else busy.progress.done
    if acked_touch and (done is None or done < acked_touch[-1].detail["done"]
                        or done > max(o.detail["done"] for o in touches)):
        # Only the holder touches: at least its last acknowledged touch, at most its last
        # attempted one (a touch that never returned may have landed).
        h.anomaly("lost-write", f"task {params['busy']!r} has progress {done}; the last "
                  f"acknowledged touch wrote {acked_touch[-1].detail['done']}",
                  cites=[acked_touch[-1], *touches[-1:]], progress=done)


SCENARIO = register(Scenario(name="crash_recovery", clause="XP-CLAIM-CRASH-RECOVERY",
                             rule="killed_holder", run=run))
