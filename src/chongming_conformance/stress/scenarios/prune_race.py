"""``prune_race`` proves XP-PRUNE-SAVE-RACE: a task a save revived is never pruned.

Every round starts with a batch of terminal (SUCCEEDED) tasks (the parent
creates the first, worker 1 the next one after each round's reads); released
together, worker 0 prunes everything terminal while the other
workers save each of those tasks back to RUNNING. Either the prune drops a
task first (the save then conflicts with ``actual=None``) or the save wins
(the prune must then leave the task alone). At the next barrier everyone
reads every task of the round: a task whose save succeeded must still be
there, RUNNING, at the saved version.

Interleaving assumptions: none between the prune and the saves -- in any order,
a save that succeeded found the task there and made it RUNNING, and a prune
after it must leave a RUNNING task alone; before it, the save would have raised.
The barrier puts the reads after every save and prune of the round returned.
"""

from __future__ import annotations

from functools import partial

from ...model import TaskSnapshot, TaskStatus
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
from ..records import snapshot_summary, task
from ._common import report_errors
from ._registry import Scenario, register

BATCH = 8


def _task_id(r: int, k: int) -> str:
    return f"prune-r{r}-{k}"


# -- the roles ------------------------------------------------------------------------------

def _pruner(ctx: WorkerContext) -> None:
    for r in range(ctx.params["rounds"]):
        ctx.round = r
        ctx.sync()  # the race
        ctx.call("prune", {"keep_terminal": 0}, partial(ctx.store.prune, keep_terminal=0),
                 summarize=lambda n: n)
        ctx.sync()  # the reads
        _read_batch(ctx, r)


def _reviver(ctx: WorkerContext) -> None:
    p = ctx.params
    for r in range(p["rounds"]):
        ctx.round = r
        ctx.sync()
        order = list(range(BATCH))
        shift = ctx.index % BATCH
        for k in order[shift:] + order[:shift]:
            tid = _task_id(r, k)
            snap = task(tid, version=1, name=f"w{ctx.index}", status=TaskStatus.RUNNING)
            ctx.call("save", {"task": tid, "expect": 0, "new": 1},
                     partial(ctx.store.save, snap, expect_version=0))
        ctx.sync()
        _read_batch(ctx, r)
        if ctx.index == 1 and r + 1 < p["rounds"]:  # next round's batch: nobody prunes now
            for k in range(BATCH):
                ctx.call("create", {"task": _task_id(r + 1, k)}, partial(
                    ctx.store.create, _doomed(_task_id(r + 1, k))))


def _doomed(task_id: str) -> TaskSnapshot:
    return task(task_id, status=TaskStatus.SUCCEEDED)


def _read_batch(ctx: WorkerContext, r: int) -> None:
    for k in range(BATCH):
        tid = _task_id(r, k)
        ctx.call("get", {"task": tid}, partial(ctx.store.get, tid), summarize=snapshot_summary)


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """Worker 0 prunes while the others save the round's terminal tasks back to RUNNING."""
    params = {"rounds": h.profile.rounds}
    with h.store() as store:
        for k in range(BATCH):
            store.create(_doomed(_task_id(0, k)))
    specs = [WorkerSpec(0, "pruner", _pruner, params)]
    specs += [WorkerSpec(i, "reviver", _reviver, params) for i in range(1, h.profile.processes)]
    judge(h, h.run(specs))


# -- the verdict ----------------------------------------------------------------------------

def judge(h: Harness, logs: Logs) -> None:
    report_errors(h, (o for o in logs.all_ops() if o.op != "save"))
    report_errors(h, logs.done("save"), conflict_ok=True)  # pruned first, or another won
    revived = {o.detail["task"]: o for o in logs.done("save") if o.ok}
    prunes: dict[int | None, list[Op]] = {}
    for o in logs.all_ops():
        if o.op == "prune":
            prunes.setdefault(o.round, []).append(o)
    flagged: set[str] = set()
    for op in logs.done("get"):
        tid = op.detail["task"]
        saved = revived.get(tid)
        if saved is None or not op.ok or tid in flagged:
            continue
        if op.value is None or op.value["v"] != 1:
            flagged.add(tid)
            state = "gone" if op.value is None else f"at version {op.value['v']}"
            h.anomaly(
                "revived-task-pruned",
                f"task {tid!r}: worker {saved.worker} saved it back to RUNNING (version 1) "
                f"in round {saved.round} while worker 0 pruned, and the save succeeded; at the "
                f"barrier worker {op.worker} finds it {state}: prune tested the status and "
                "deleted in separate steps",
                cites=[saved, *prunes.get(saved.round, []), op], task=tid,
                saver=saved.worker, reader=op.worker, round=saved.round,
            )


SCENARIO = register(Scenario(name="prune_race", clause="XP-PRUNE-SAVE-RACE",
                             rule="revived_task_survives", run=run))
