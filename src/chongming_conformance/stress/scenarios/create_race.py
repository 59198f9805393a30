"""``create_race`` proves XP-CREATE-EXCLUSIVE: of N creates of one id, exactly one succeeds.

Every round all workers, released together by the barrier, create the same
few task ids and submit the same few command ids, each record named after
its worker. The verdict: per id exactly one success, every other attempt
raised ``StoreError``, and the stored task (or command) is the winner's --
a check-then-insert-or-replace lets two "win" and keeps the later one.

Interleaving assumptions: none inside a round -- whatever the order, the first
create (submit) of an id to take effect makes every later one a duplicate. The
stored records are read in the parent after every worker exited (a claim beyond
every lease, alone, returns every command). An attempt that raised something
other than ``StoreError`` (or never returned) may or may not have stored its
record: "none succeeded" and "the stored record is not the winner's" are then
not judged.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import replace
from functools import partial

from ...protocol.model import Command, TaskSnapshot
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
from ..records import at, command, task
from ._common import report_errors
from ._registry import Scenario, register

IDS_PER_ROUND = 3


def _task_id(r: int, k: int) -> str:
    return f"create-r{r}-{k}"


def _command_id(r: int, k: int) -> str:
    return f"submit-r{r}-{k}"


# -- the role -------------------------------------------------------------------------------

def _creator(ctx: WorkerContext) -> None:
    me = f"w{ctx.index}"
    for r in range(ctx.params["rounds"]):
        ctx.round = r
        ctx.sync()
        for k in range(IDS_PER_ROUND):
            tid = _task_id(r, k)
            ctx.call("create", {"task": tid}, partial(ctx.store.create, task(tid, name=me)))
        for k in range(IDS_PER_ROUND):
            cid = _command_id(r, k)
            cmd = replace(command(cid, _task_id(r, k), float(r)), issued_by=me)
            ctx.call("submit", {"id": cid}, partial(ctx.store.submit_command, cmd))


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """Every round all workers create the same task ids and submit the same command ids."""
    rounds = h.profile.rounds
    logs = h.run([WorkerSpec(i, "creator", _creator, {"rounds": rounds})
                  for i in range(h.profile.processes)])
    with h.store() as store:
        tasks = {s.task_id: s for s in store.query()}
        # A claim far beyond every lease returns every stored command with its issuer.
        commands = {c.command_id: c for c in store.claim_commands(
            now=at(10_000.0), lease_seconds=1.0,
            limit=rounds * IDS_PER_ROUND + 10)}
    judge(h, logs, tasks, commands)


# -- the verdict ----------------------------------------------------------------------------

def _winners(ops: list[Op]) -> dict[str, list[Op]]:
    by_id: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        key = op.detail.get("task", op.detail.get("id"))
        by_id[str(key)].append(op)
    return by_id


def judge(h: Harness, logs: Logs, tasks: Mapping[str, TaskSnapshot],
          commands: Mapping[str, Command]) -> None:
    for what, op_name, stored_by in (
            ("task", "create", {k: v.name for k, v in tasks.items()}),
            ("command", "submit", {k: v.issued_by for k, v in commands.items()})):
        attempts = [o for o in logs.all_ops() if o.op == op_name]
        for rid, ops in sorted(_winners(attempts).items()):
            won = [o for o in ops if o.ok]
            refused = [o for o in ops if not o.pending and not o.ok
                       and (o.error or {}).get("store_error")]
            for o in ops:
                if not o.pending and not o.ok and not (o.error or {}).get("store_error"):
                    report_errors(h, [o])
            # Every attempt returned: a success, or StoreError (a duplicate).
            settled = len(won) + len(refused) == len(ops)
            if len(won) > 1:
                # Any order: the first to take effect makes the others duplicates.
                h.anomaly(
                    f"{op_name}-twice",
                    f"{what} {rid!r}: workers {[o.worker for o in won]} all succeeded at "
                    f"{op_name} in round {won[0].round}; exactly one may, the others must raise "
                    "StoreError (check and insert are not one step, or the insert replaces)",
                    cites=won, id=rid, workers=[o.worker for o in won], round=won[0].round,
                )
            elif not won and settled and len(ops) == h.profile.processes:
                h.anomaly(
                    f"{op_name}-none",
                    f"{what} {rid!r}: all {len(ops)} attempts to {op_name} it raised "
                    "StoreError, though none had stored it before; exactly one must succeed",
                    cites=ops, id=rid, round=ops[0].round,
                )
            holder = stored_by.get(rid)
            if len(won) == 1 and settled and holder != f"w{won[0].worker}":
                # The refused duplicates must have changed nothing.
                h.anomaly(
                    f"{op_name}-overwritten",
                    f"{what} {rid!r} was {op_name}d by worker {won[0].worker} in round "
                    f"{won[0].round} (the others got StoreError), but the store holds the one "
                    f"written by {holder!r}: a refused duplicate replaced the winner's record",
                    cites=ops, id=rid, winner=won[0].worker, stored=holder,
                )
            elif len(won) > 1:
                h.anomaly(
                    f"{op_name}-overwritten",
                    f"{what} {rid!r}: the store holds {holder!r}'s record; the other "
                    f"acknowledged {op_name}s were silently replaced",
                    cites=won, id=rid, stored=holder,
                )


SCENARIO = register(Scenario(name="create_race", clause="XP-CREATE-EXCLUSIVE",
                             rule="one_create_wins", run=run))
