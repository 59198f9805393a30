"""``claim_race`` proves XP-CLAIM-EXCLUSIVE: a command is held by one consumer at a time.

Consumers claim, complete, release or keep commands in barrier-aligned rounds
on a logical clock (round ``r`` is ``now = r`` seconds), then drain the store.
The verdict rebuilds every hold's window on that clock -- from its claim to
its release, completion or ``lease_until`` (exclusive) -- and flags two holds
of one command that overlap, a wrong lease, a double completion, and commands
left over or lost.

Interleaving assumptions. Inside a phase the claims race in any order (and a
``SKIP LOCKED`` claim may come back short, skipping rows another claim holds:
nothing judges a claim for what it left out); the barrier orders the phases, so
a hold that ended in phase B of round ``r`` (its release or completion returned)
is over before round ``r+1``'s claims begin. A release or completion that raised
may or may not have ended the hold, so it is taken as ended (nothing is judged
on it but the error). At ``now == lease_until`` the lease may hold or not
(CLAIM-LEASE-BOUNDARY is a SHOULD): a hold's window ends before it. The drain at
the end is one worker's alone, after a barrier -- concurrent claims could each
skip rows the others hold locked and stop early -- and the leftover claim, in the
parent after every worker exited, is alone too.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ...protocol.model import Command
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
from ..records import at, command, offset
from ._common import logged_claim, report_errors, when
from ._registry import Scenario, register

STEP = 1.0
# Two rounds: claims also land at now == lease_until, where a store may treat the lease as
# over or as still held (CLAIM-LEASE-BOUNDARY is a SHOULD); a hold's window ends *before*
# lease_until (``_Hold.covers``), so either answer is accepted.
LEASE = 2.0


# -- the role -------------------------------------------------------------------------------

def _consumer(ctx: WorkerContext) -> None:
    p = ctx.params
    rounds, lease, limit = p["rounds"], p["lease"], p["limit"]
    rng = random.Random(p["seed"] * 7919 + ctx.index)
    held: dict[str, Any] = {}  # command_id -> lease_until (None if the store set none)
    for r in range(rounds):
        ctx.round = r
        now_s = r * p["step"]
        ctx.sync()  # phase A: everybody claims at the same logical instant
        for c in logged_claim(ctx, now_s, lease, limit):
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
    if ctx.index != 0:
        return  # one worker drains alone: a claim that overlaps none comes back short
        # only when nothing is left (SKIP LOCKED skips rows concurrent claims hold)
    drain_s = p["drain_at"]
    for _ in range(p["commands"] + 2):
        got = logged_claim(ctx, drain_s, lease, limit)
        if not got:
            break
        for c in got:
            ctx.call("complete", {"id": c.command_id},
                     partial(ctx.store.complete_command, c.command_id, now=at(drain_s),
                             outcome="ok"), now=at(drain_s))


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """Consumers claim, complete, release or keep commands in barrier-aligned rounds."""
    n, rounds = h.profile.processes, h.profile.rounds
    count = n * rounds // 2 + n
    params = {"rounds": rounds, "lease": LEASE, "step": STEP, "limit": 1,
              "seed": h.profile.seed, "commands": count,
              "drain_at": rounds * STEP + LEASE + STEP}
    ids = [f"claim-{i:04d}" for i in range(count)]
    with h.store() as store:
        for i, cid in enumerate(ids):
            store.submit_command(command(cid, f"task-{i % 7}", -1000.0 + i))
    logs = h.run([WorkerSpec(i, "consumer", _consumer, params) for i in range(n)])
    with h.store() as store:
        leftover = list(store.claim_commands(now=at(params["drain_at"] + 1000.0),
                                             lease_seconds=LEASE, limit=count + 100))
    judge(h, logs, ids, params, leftover)


# -- the verdict ----------------------------------------------------------------------------

@dataclass(slots=True)
class _Hold:
    command: str
    worker: int
    start: tuple[int, int]  # (round, phase): phase 0 = claim, 1 = complete/release
    start_s: float
    until_s: float | None
    claim: Op
    end: tuple[int, int] | None = None
    end_how: str = "lease expiry"
    ended_by: Op | None = None

    def covers(self, key: tuple[int, int], now_s: float) -> bool:
        if key < self.start:
            return False
        if self.end is not None and key > self.end:
            return False
        return self.until_s is None or now_s < self.until_s

    def window(self) -> str:
        end = self.end_how if self.end is None else f"{self.end_how} in round {self.end[0]}"
        return (f"worker {self.worker} claimed it at {when(self.start_s)} (round "
                f"{self.start[0]}) with lease until {when(self.until_s)}, held until {end}")


def _round_now(params: dict[str, Any], r: int) -> float:
    return float(params["drain_at"]) if r >= params["rounds"] else r * float(params["step"])


def judge(h: Harness, logs: Logs, ids: Sequence[str], params: dict[str, Any],
          leftover: Sequence[Command]) -> None:
    report_errors(h, logs.all_ops())
    lease = float(params["lease"])
    holds: dict[str, list[_Hold]] = defaultdict(list)
    open_holds: dict[tuple[str, int], _Hold] = {}
    completes: dict[str, list[Op]] = defaultdict(list)
    for op in logs.all_ops():  # per worker, in call order: pairs each end with its claim
        if op.pending:
            continue
        r = op.round or 0
        if op.op == "claim" and op.ok:
            now_s = _round_now(params, r)
            for c in op.value or []:
                until = offset(c["lease_until"])
                if until is None or abs(until - (now_s + lease)) > 1e-6:
                    # Any interleaving: a claim sets lease_until = now + lease_seconds.
                    h.anomaly(
                        "wrong-lease",
                        f"worker {op.worker} claimed {c['id']!r} at {when(now_s)} with "
                        f"lease_seconds={lease:g} but got lease_until {when(until)} "
                        f"(expected {when(now_s + lease)})",
                        cites=[op], command=c["id"], worker=op.worker, round=r,
                    )
                hold = _Hold(c["id"], op.worker, (r, 0), now_s, until, op)
                holds[c["id"]].append(hold)
                open_holds[(c["id"], op.worker)] = hold
        elif op.op in ("complete", "release"):
            # A call that raised may have ended the hold too: taken as ended (its error is
            # reported on its own), so no overlap is claimed after it.
            cid = op.detail["id"]
            ended = open_holds.pop((cid, op.worker), None)
            if ended is not None and ended.end is None:
                ended.end, ended.ended_by = (r, 1), op
                ended.end_how = op.op if op.ok else f"{op.op} (raised)"
            if op.op == "complete" and op.ok:
                completes[cid].append(op)
    for cid, hs in sorted(holds.items()):
        found = 0
        for i, a in enumerate(hs):
            for b in hs[i + 1:]:
                first, second = (a, b) if a.start <= b.start else (b, a)
                if first.covers(second.start, second.start_s) and found < 3:
                    found += 1
                    # The first hold had neither ended (a release or completion that
                    # returned, or raised) before the second claim's phase, nor reached
                    # lease_until at its now.
                    h.anomaly(
                        "double-hold",
                        f"command {cid!r} was held by two consumers at "
                        f"{when(second.start_s)}: {first.window()}; {second.window()}",
                        cites=[x for x in (first.claim, second.claim, first.ended_by)
                               if x is not None],
                        command=cid, workers=[first.worker, second.worker],
                        windows=[[first.start_s, first.until_s], [second.start_s,
                                                                  second.until_s]],
                    )
    for cid, ops in sorted(completes.items()):
        if len(ops) > 1:
            # A consumer completes only what it holds under an unexpired lease: two
            # completions mean two holds, whatever the interleaving.
            h.anomaly(
                "completed-twice",
                f"command {cid!r} was completed {len(ops)} times, by workers "
                f"{[o.worker for o in ops]} in rounds {[o.round for o in ops]}",
                cites=[*ops, *(x.claim for x in holds.get(cid, []))][:6],
                command=cid, workers=[o.worker for o in ops],
            )
    left = {c.command_id for c in leftover}
    ends = [o for o in logs.all_ops() if o.op in ("complete", "release")]
    for cid in ids:
        about = [x.claim for x in holds.get(cid, [])] + [
            o for o in ends if o.detail.get("id") == cid]
        if cid in left:
            # The parent's claim beyond every lease runs alone, after every worker exited.
            tried = ("" if any(o.detail.get("id") == cid and o.op == "complete" for o in ends)
                     else ", and no consumer's complete of it was ever called")
            h.anomaly("not-completed",
                      f"command {cid!r} is still claimable after worker 0 drained the store "
                      f"alone and every worker exited{tried}", cites=about[-4:], command=cid)
        elif cid not in completes and not any(
                o.detail.get("id") == cid and o.op == "complete" for o in ends):
            # Nothing but a completion finishes a command; none of it was even called (one
            # that raised may have finished it).
            h.anomaly("lost",
                      f"command {cid!r} was never completed by any consumer (no complete of it "
                      "was called), yet a claim beyond every lease, alone, does not return it",
                      cites=about[-4:], command=cid)


SCENARIO = register(Scenario(name="claim_race", clause="XP-CLAIM-EXCLUSIVE", rule="claim_race",
                             run=run))
