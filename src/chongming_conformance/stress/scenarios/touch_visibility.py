"""``touch_visibility`` proves XP-TOUCH-VISIBLE: a returned touch is committed.

Worker 0 only touches: once per round, progress, heartbeat and lease, all
naming the round. At the barrier the other workers read the task and must
see exactly that touch. A touch kept in an open transaction until the
process's next write is invisible to them (and holds the row lock); this
scenario gives the toucher no other write, so nothing commits it by luck.

Interleaving assumptions: none -- the readers read between two barriers, after
the round's touch returned and before the next one is called, with nobody
writing. Only rounds whose touch returned are judged.
"""

from __future__ import annotations

from functools import partial

from ...protocol.codec import encode_dt
from ...protocol.model import Progress
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs
from ..records import at, snapshot_summary, task
from ._common import report_errors
from ._registry import Scenario, register

TASK = "stress-touch-visible"
OWNER = "toucher"


def _expected(r: int) -> dict[str, object]:
    return {"done": r + 1, "heartbeat": encode_dt(at(r + 1)), "lease_owner": OWNER,
            "lease_until": encode_dt(at(1000.0 + r))}


# -- the roles ------------------------------------------------------------------------------

def _toucher(ctx: WorkerContext) -> None:
    for r in range(ctx.params["rounds"]):
        ctx.round = r
        ctx.sync()
        ctx.call("touch", {"task": TASK, "round": r}, partial(
            ctx.store.touch, TASK, progress=Progress(done=r + 1, message=OWNER),
            heartbeat_at=at(r + 1), lease_owner=OWNER, lease_until=at(1000.0 + r)))
        ctx.sync()  # the readers read now; the next round's barrier waits for them


def _reader(ctx: WorkerContext) -> None:
    for r in range(ctx.params["rounds"]):
        ctx.round = r
        ctx.sync()
        ctx.sync()
        ctx.call("get", {"task": TASK}, partial(ctx.store.get, TASK), summarize=snapshot_summary)


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """Worker 0 touches once per round; the others read the task at the barrier."""
    with h.store() as store:
        store.create(task(TASK))
    params = {"rounds": h.profile.rounds}
    specs = [WorkerSpec(0, "toucher", _toucher, params)]
    specs += [WorkerSpec(i, "reader", _reader, params) for i in range(1, h.profile.processes)]
    judge(h, h.run(specs))


# -- the verdict ----------------------------------------------------------------------------

def judge(h: Harness, logs: Logs) -> None:
    report_errors(h, logs.all_ops())
    touched = {o.round: o for o in logs.done("touch") if o.ok}
    shown = 0
    for op in logs.done("get"):
        if not op.ok or op.round is None or op.round not in touched or shown >= 5:
            continue
        want = _expected(op.round)
        got = {k: None if op.value is None else op.value.get(k) for k in want}
        if got != want:
            shown += 1
            h.anomaly(
                "touch-invisible",
                f"worker {op.worker} read task {TASK!r} at the barrier of round {op.round}, "
                f"after worker 0's touch had returned, and saw {got} instead of {want}: the "
                "touch was not committed when it returned (or went elsewhere)",
                cites=[touched[op.round], op], task=TASK, worker=op.worker, round=op.round,
                seen=got, expected=want,
            )


SCENARIO = register(Scenario(name="touch_visibility", clause="XP-TOUCH-VISIBLE",
                             rule="next_reader_sees_it", run=run))
