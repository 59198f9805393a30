"""``release_starvation`` proves XP-RELEASE-NO-STARVATION: a released command reaches its owner.

Every round one worker submits a command for every worker's task; the
non-owners of worker 0's task claim and release it at once, then worker 0
polls. The verdict: worker 0 receives each of its commands within
``POLL_BOUND`` polls of its submission (a correct store needs one).

Interleaving assumptions. The non-owners' claims in phase A race each other (a
``SKIP LOCKED`` claim may skip what another holds locked); each hands back what
is not its own before the barrier. The owner's poll in phase B is alone -- no
other call runs between those barriers -- so it must return every command that is
claimable: its own, submitted and released by then. A command one of whose
releases raised may still be leased: it is not judged (the error is).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from functools import partial
from typing import Any

from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
from ..records import at, command, task
from ._common import logged_claim, report_errors
from ._registry import Scenario, register

LEASE = 2.0
#: Polls within which the owner must receive its command (a correct store needs one).
POLL_BOUND = 2


# -- the roles (one function: worker 0 is the owner, the others its rivals) ------------------

def _worker(ctx: WorkerContext) -> None:
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
    for c in logged_claim(ctx, now, lease, 10_000):
        if c.task_id == mine:
            ctx.call("complete", {"id": c.command_id},
                     partial(ctx.store.complete_command, c.command_id, now=now, outcome="done"),
                     now=now)
        else:  # not ours: hand it back at once so its owner can take it
            ctx.call("release", {"id": c.command_id},
                     partial(ctx.store.release_command, c.command_id, now=now), now=now)


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """Non-owners claim and release; worker 0 must get its commands within a bounded poll."""
    n = h.profile.processes
    params = {"workers": n, "rounds": h.profile.rounds, "lease": LEASE, "tail": POLL_BOUND}
    with h.store() as store:
        for i in range(n):
            store.create(task(f"own-w{i}"))
    logs = h.run([WorkerSpec(i, "owner" if i == 0 else "other", _worker, params)
                  for i in range(n)])
    judge(h, logs, params, POLL_BOUND)


# -- the verdict ----------------------------------------------------------------------------

def judge(h: Harness, logs: Logs, params: dict[str, Any], bound: int) -> None:
    report_errors(h, logs.all_ops())
    rounds = int(params["rounds"])
    submits = {o.detail["id"]: o for o in logs.done("submit")
               if o.ok and o.detail["task"] == "own-w0"}
    owner_polls = sorted((o for o in logs.ops.get(0, []) if o.op == "claim" and o.ok),
                         key=lambda o: o.round or 0)
    received: dict[str, int] = {}
    for op in owner_polls:
        for c in op.value or []:
            received.setdefault(c["id"], int(op.round or 0))
    others: dict[str, list[str]] = defaultdict(list)
    touched: dict[str, list[Op]] = defaultdict(list)
    unsure: set[str] = set()
    for op in logs.all_ops():
        if op.worker == 0 or op.pending:
            continue
        if op.op == "release" and not op.ok:
            unsure.add(op.detail["id"])  # may still be leased: not judged
        if op.ok and op.op in ("claim", "release"):
            ids = [c["id"] for c in op.value or []] if op.op == "claim" else [op.detail["id"]]
            for cid in ids:
                others[cid].append(f"{op.op} by worker {op.worker} in round {op.round}")
                touched[cid].append(op)
    starved = 0
    for cid, sub in sorted(submits.items()):
        if cid in unsure:
            continue
        r = int(sub.round or 0)
        polls = [o for o in owner_polls if int(o.round or 0) >= r]
        got = received.get(cid)
        n = None if got is None else sum(1 for o in polls if int(o.round or 0) <= got)
        if (n is None and len(polls) >= bound) or (n is not None and n > bound):
            starved += 1
            if starved <= 5:
                # The owner's polls run alone; each must return every claimable command.
                h.anomaly(
                    "starved",
                    f"owner worker 0 did not receive command {cid!r} (submitted in round {r}) "
                    f"within {bound} polls, each run alone after the others had handed it back ("
                    + ("never received" if got is None else f"received at poll {n}")
                    + f"); meanwhile: {'; '.join(others[cid][:6]) or 'no other consumer'}",
                    cites=[sub, *touched[cid][-2:], *polls[:bound]], command=cid,
                    submitted_round=r, received_round=got, others=others[cid][:10],
                )
    if starved > 5:
        h.anomaly("starved", f"... and {starved - 5} more starved commands of worker 0 "
                  f"(of {len(submits)} submitted over {rounds} rounds)")


SCENARIO = register(Scenario(name="release_starvation", clause="XP-RELEASE-NO-STARVATION",
                             rule="owner_gets_its_command", run=run))
