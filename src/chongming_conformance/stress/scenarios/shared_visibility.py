"""``shared_visibility`` proves XP-SHARED-VISIBILITY: a write is seen at every other next read.

Round ``r`` has one writer (``r mod N``) that saves, touches, creates and
appends while the others read the same row; after the barrier every other
worker reads it all back. The verdict: reads during the write are whole rows
that never go backwards, and reads after it show exactly what was written.

Interleaving assumptions. Phase W: a read overlapping the save may see either
version (before or after it), but a whole row, and a worker's later read (its
calls are sequential) never an older one. Phase R: every write of the round
returned before the barrier and nobody writes until the next one, so each read
shows exactly what was written. A write that raised or never returned leaves
the state unknown: that round and every later one are not judged (the error is).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ...protocol.codec import encode_dt
from ...protocol.model import TaskQuery
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
from ..records import at, snapshot_summary, task, transition, transitions_summary
from ._common import report_errors
from ._registry import Scenario, register

TASK = "stress-visible"
#: Reads of the task each non-writer makes while the writer writes.
SPINS = 6
#: Calls the writer makes (its own writes, not reads to judge).
_WRITES = ("save", "touch", "create", "append")


# -- the role (every worker writes in its turn and reads in the others') ----------------------

def _peer(ctx: WorkerContext) -> None:
    p = ctx.params
    n, task_id = p["workers"], p["task"]
    for r in range(p["rounds"]):
        ctx.round = r
        writer = r % n
        ctx.sync()  # phase W: the writer writes while the others read the same row
        if ctx.index == writer:
            snap = task(task_id, version=r + 1)
            ctx.call("save", {"task": task_id, "expect": r, "new": r + 1},
                     partial(ctx.store.save, snap, expect_version=r))
            ctx.call("touch", {"task": task_id, "heartbeat": r},
                     partial(ctx.store.touch, task_id, heartbeat_at=at(r + 0.5)))
            ctx.call("create", {"task": f"vis-{r}"},
                     partial(ctx.store.create, task(f"vis-{r}", name=f"vis-{r}")))
            ctx.call("append", {"task": task_id, "version": r + 1},
                     partial(ctx.store.append, transition(task_id, r + 1)))
        else:
            for _ in range(p["spins"]):
                ctx.call("spin-get", {"task": task_id}, partial(ctx.store.get, task_id),
                         summarize=snapshot_summary)
        ctx.sync()  # phase R: every other worker must now see all of it
        if ctx.index != writer:
            ctx.call("get", {"task": task_id}, partial(ctx.store.get, task_id),
                     summarize=snapshot_summary)
            ctx.call("get-new", {"task": f"vis-{r}"}, partial(ctx.store.get, f"vis-{r}"),
                     summarize=snapshot_summary)
            ctx.call("query-new", {"name": f"vis-{r}"},
                     partial(ctx.store.query, TaskQuery(name=f"vis-{r}")),
                     summarize=lambda rows: [s.task_id for s in rows])
            ctx.call("history", {"task": task_id, "since": r},
                     partial(ctx.store.history, task_id, since_version=r),
                     summarize=transitions_summary)


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """A rotating writer writes; every other process must see it at its next read."""
    params = {"workers": h.profile.processes, "task": TASK, "rounds": h.profile.rounds,
              "spins": SPINS}
    with h.store() as store:
        store.create(task(TASK))
    logs = h.run([WorkerSpec(i, "peer", _peer, params) for i in range(h.profile.processes)])
    judge(h, logs, TASK, params)


# -- the verdict ----------------------------------------------------------------------------

def judge(h: Harness, logs: Logs, task_id: str, params: dict[str, Any]) -> None:
    report_errors(h, logs.all_ops())
    n = int(params["workers"])
    writes: dict[int, list[Op]] = {}
    for o in logs.all_ops():
        if o.op in _WRITES:
            writes.setdefault(int(o.round or 0), []).append(o)
    # The state is known through round r while every write so far returned.
    judged = 0
    while judged < int(params["rounds"]) and writes.get(judged) and all(
            o.ok for o in writes[judged]):
        judged += 1
    last_seen: dict[int, tuple[int, Op]] = {}
    for op in sorted((o for o in logs.all_ops() if o.op == "spin-get" and o.ok),
                     key=lambda o: (o.worker, o.seq)):
        snap = op.value
        r = int(op.round or 0)
        if r > judged:
            continue
        mine = writes.get(r, [])
        if snap is None:
            h.anomaly("torn-read", f"worker {op.worker} found no task {task_id!r} in round {r}",
                      cites=[*mine[:1], op], worker=op.worker, round=r)
            continue
        v = snap["v"]
        consistent = (snap["name"] == f"v{v}" and snap["tags"] == [f"t{v}"]
                      and snap["done"] == v)
        if not consistent:
            # Every save writes a self-consistent row: a read of any order sees one whole.
            h.anomaly("torn-read", f"worker {op.worker} read a half-written task {task_id!r} in "
                      f"round {r}: {snap}", cites=[*mine[:1], op], worker=op.worker, round=r,
                      snapshot=snap)
        before = last_seen.get(op.worker)
        if v not in (r, r + 1) or (before is not None and v < before[0]):
            # Before or after the round's save, never older than this worker's last read.
            h.anomaly("stale-read", f"worker {op.worker} read version {v} of {task_id!r} while "
                      f"worker {r % n} wrote version {r + 1} over {r} (it had seen "
                      f"{0 if before is None else before[0]})",
                      cites=[*mine[:1], *(before[1:] if before else ()), op], worker=op.worker,
                      round=r, version=v)
        if before is None or v >= before[0]:
            last_seen[op.worker] = (v, op)
    for op in logs.all_ops():
        if op.pending or not op.ok or op.op == "spin-get" or op.op in _WRITES:
            continue
        r = int(op.round or 0)
        if r >= judged:
            continue
        writer = r % n
        mine = writes.get(r, [])
        what = f"worker {op.worker} did not see, at its next read, what worker {writer} wrote " \
               f"in round {r}"
        value = op.value
        if op.op == "get":
            want = {"v": r + 1, "name": f"v{r + 1}", "heartbeat": encode_dt(at(r + 0.5))}
            got = None if value is None else {k: value[k] for k in want}
            if got != want:
                h.anomaly("stale-read", f"{what}: task {task_id!r} read as {got}, written as "
                          f"{want}", cites=[*mine[:2], op], worker=op.worker, writer=writer,
                          round=r)
        elif op.op == "get-new" and value is None:
            h.anomaly("stale-read", f"{what}: created task 'vis-{r}' is missing",
                      cites=[*mine[2:3], op], worker=op.worker, writer=writer, round=r)
        elif op.op == "query-new" and value != [f"vis-{r}"]:
            h.anomaly("stale-read", f"{what}: query(name='vis-{r}') returned {value}",
                      cites=[*mine[2:3], op], worker=op.worker, writer=writer, round=r)
        elif op.op == "history" and [row["v"] for row in value or []] != [r + 1]:
            h.anomaly("stale-read", f"{what}: history(since_version={r}) returned versions "
                      f"{[row['v'] for row in value or []]}, expected [{r + 1}]",
                      cites=[*mine[3:4], op], worker=op.worker, writer=writer, round=r)


SCENARIO = register(Scenario(name="shared_visibility", clause="XP-SHARED-VISIBILITY",
                             rule="next_read_sees_it", run=run))
