"""``prune_race`` proves XP-PRUNE-SAVE-RACE: a task a save revived is never pruned,
and a terminal task a touch moved is pruned all the same.

Every round starts with two batches of terminal (SUCCEEDED) tasks (the parent
creates the first, worker 1 the next after each round's reads); released
together, worker 0 prunes everything terminal while the other workers save each
task of the first batch back to RUNNING and touch (heartbeat and progress) each
task of the second, several times over. For a revived task either the prune
drops it first (the save then conflicts with ``actual=None``) or the save wins
(the prune must then leave the task alone). A touched task stays terminal
whatever the order -- a touch never changes the status (guide §2.2) -- so a
prune that returned must have dropped it. At the next barrier everyone reads
every task of the round: a task whose save succeeded must still be there,
RUNNING, at the saved version; a task only touched must be gone.

The second batch is the bug of a store whose prune is a read, then a
conditional delete per task on the row's revision: a touch between the two
moves the revision, and a prune that then gives up on the task ("someone
changed it") leaves a terminal task behind. Rows in an SQL store are deleted by
one statement that re-tests the status under the lock, and pass.

Interleaving assumptions: none between the prune and the saves or touches -- in
any order, a save that succeeded found the task there and made it RUNNING, and
a prune after it must leave a RUNNING task alone; before it, the save would have
raised; a touch, before or after, leaves the task terminal and never creates
one. The barrier puts the reads after every save, touch and prune of the round
returned.
"""

from __future__ import annotations

from functools import partial

from ...protocol.model import Progress, TaskSnapshot, TaskStatus
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
from ..records import at, snapshot_summary, task
from ._common import report_errors
from ._registry import Scenario, register

BATCH = 8
#: How many times each reviver touches each task of the touched batch in a round:
#: enough touches that some land between a prune's read of a task and its delete.
TOUCH_PASSES = 4


def _task_id(r: int, k: int) -> str:
    return f"prune-r{r}-{k}"


def _touched_id(r: int, k: int) -> str:
    return f"prune-r{r}-t{k}"


def _round_ids(r: int) -> list[str]:
    return [*(_task_id(r, k) for k in range(BATCH)), *(_touched_id(r, k) for k in range(BATCH))]


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
            _touch(ctx, _touched_id(r, k), r, 0)
        for n in range(1, TOUCH_PASSES):
            for k in order[shift:] + order[:shift]:
                _touch(ctx, _touched_id(r, k), r, n)
        ctx.sync()
        _read_batch(ctx, r)
        if ctx.index == 1 and r + 1 < p["rounds"]:  # next round's batch: nobody prunes now
            for tid in _round_ids(r + 1):
                ctx.call("create", {"task": tid}, partial(ctx.store.create, _doomed(tid)))


def _touch(ctx: WorkerContext, tid: str, r: int, n: int) -> None:
    """A heartbeat with progress, as the Controller's poll thread sends it."""
    done = ctx.index * 100 + n
    ctx.call("touch", {"task": tid, "done": done}, partial(
        ctx.store.touch, tid, progress=Progress(done=done, total=1000),
        heartbeat_at=at(r + n / 10)))


def _doomed(task_id: str) -> TaskSnapshot:
    return task(task_id, status=TaskStatus.SUCCEEDED)


def _read_batch(ctx: WorkerContext, r: int) -> None:
    for tid in _round_ids(r):
        ctx.call("get", {"task": tid}, partial(ctx.store.get, tid), summarize=snapshot_summary)


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """Worker 0 prunes while the others save the round's terminal tasks back to RUNNING
    and touch the other batch."""
    params = {"rounds": h.profile.rounds}
    with h.store() as store:
        for tid in _round_ids(0):
            store.create(_doomed(tid))
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
    touched: dict[str, list[Op]] = {}
    for o in logs.done("touch"):
        touched.setdefault(o.detail["task"], []).append(o)
    flagged: set[str] = set()
    for op in logs.done("get"):
        tid = op.detail["task"]
        if not op.ok or tid in flagged:
            continue
        if tid in touched:
            if _kept_after_prune(h, op, touched[tid], prunes.get(op.round, [])):
                flagged.add(tid)
            continue
        saved = revived.get(tid)
        if saved is None:
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


def _kept_after_prune(h: Harness, read: Op, touches: list[Op], prunes: list[Op]) -> bool:
    """A terminal task only touched is still there after the round's prune returned:
    report it (True), unless no prune of the round returned normally (then its effect
    is unknown and nothing is judged)."""
    if read.value is None or not prunes or not all(p.ok for p in prunes):
        return False
    tid = read.detail["task"]
    h.anomaly(
        "touched-terminal-task-kept",
        f"task {tid!r} was terminal (SUCCEEDED) when round {read.round} began; while worker 0 "
        f"ran prune(keep_terminal=0), {len(touches)} touches (heartbeat and progress, never the "
        f"status) reached it, and the prune returned; at the barrier worker {read.worker} still "
        f"finds it (version {read.value['v']}): the prune gave up on a terminal task because a "
        "touch had changed the row (a revision or timestamp) between its read and its "
        "delete -- re-read such a task and drop it while it is still terminal",
        cites=[*prunes, touches[0], touches[-1], read], task=tid, reader=read.worker,
        round=read.round,
    )
    return True


SCENARIO = register(Scenario(name="prune_race", clause="XP-PRUNE-SAVE-RACE",
                             rule="revived_task_survives", run=run))
