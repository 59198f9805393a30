"""``claim_race`` proves XP-CLAIM-EXCLUSIVE: a command is held by one consumer at a time.

Consumers claim, complete, release or keep commands in barrier-aligned rounds
on a logical clock (round ``r`` is ``now = r`` seconds), then drain the store.
The verdict rebuilds every hold's window on that clock -- from its claim to
its release, completion or ``lease_until`` (exclusive) -- and flags two holds
of one command that overlap, a wrong lease, a double completion, and commands
left over or lost.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from ...model import Command
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
    end: tuple[int, int] | None = None
    end_how: str = "lease expiry"

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
        if not op.ok:
            continue
        r = op.round or 0
        if op.op == "claim":
            now_s = _round_now(params, r)
            for c in op.value or []:
                until = offset(c["lease_until"])
                if until is None or abs(until - (now_s + lease)) > 1e-6:
                    h.anomaly(
                        "wrong-lease",
                        f"worker {op.worker} claimed {c['id']!r} at {when(now_s)} with "
                        f"lease_seconds={lease:g} but got lease_until {when(until)} "
                        f"(expected {when(now_s + lease)})",
                        command=c["id"], worker=op.worker, round=r,
                    )
                hold = _Hold(c["id"], op.worker, (r, 0), now_s, until)
                holds[c["id"]].append(hold)
                open_holds[(c["id"], op.worker)] = hold
        elif op.op in ("complete", "release"):
            cid = op.detail["id"]
            ended = open_holds.pop((cid, op.worker), None)
            if ended is not None and ended.end is None:
                ended.end, ended.end_how = (r, 1), op.op
            if op.op == "complete":
                completes[cid].append(op)
    for cid, hs in sorted(holds.items()):
        found = 0
        for i, a in enumerate(hs):
            for b in hs[i + 1:]:
                first, second = (a, b) if a.start <= b.start else (b, a)
                if first.covers(second.start, second.start_s) and found < 3:
                    found += 1
                    h.anomaly(
                        "double-hold",
                        f"command {cid!r} was held by two consumers at "
                        f"{when(second.start_s)}: {first.window()}; {second.window()}",
                        command=cid, workers=[first.worker, second.worker],
                        windows=[[first.start_s, first.until_s], [second.start_s,
                                                                  second.until_s]],
                    )
    for cid, ops in sorted(completes.items()):
        if len(ops) > 1:
            h.anomaly(
                "completed-twice",
                f"command {cid!r} was completed {len(ops)} times, by workers "
                f"{[o.worker for o in ops]} in rounds {[o.round for o in ops]}",
                command=cid, workers=[o.worker for o in ops],
            )
    left = {c.command_id for c in leftover}
    for cid in ids:
        if cid in left:
            h.anomaly("not-completed",
                      f"command {cid!r} is still claimable after every consumer drained the "
                      "store: nobody completed it", command=cid)
        elif cid not in completes:
            h.anomaly("lost",
                      f"command {cid!r} was never completed by any consumer, yet is no longer "
                      "claimable (finished or dropped by the store)", command=cid)


SCENARIO = register(Scenario(name="claim_race", clause="XP-CLAIM-EXCLUSIVE", rule="claim_race",
                             run=run))
