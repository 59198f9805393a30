"""``save_race`` proves XP-SAVE-ATOMIC: of N saves at one expect_version, exactly one wins.

Every round all workers, released together by the barrier, save one task at
the same ``expect_version``; the winner appends the transition. The verdict:
one winner per round, the losers got ``ConcurrencyConflict``, and the final
task and history are the winners' writes.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import partial
from typing import Any

from ...model import TaskSnapshot, Transition
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs
from ..records import task, transition
from ._common import report_errors
from ._registry import Scenario, register

TASK = "stress-save"


# -- the role -------------------------------------------------------------------------------

def _saver(ctx: WorkerContext) -> None:
    task_id: str = ctx.params["task"]
    for r in range(ctx.params["rounds"]):
        ctx.round = r
        new = 2 * r + 2  # versions skip by two on purpose (SAVE-VERSION-SKIP)
        snap = task(task_id, version=new, name=f"r{r}-w{ctx.index}")
        ctx.sync()
        out = ctx.call("save", {"task": task_id, "expect": 2 * r, "new": new},
                       partial(ctx.store.save, snap, expect_version=2 * r))
        if out.ok:
            ctx.call("append", {"task": task_id, "version": new},
                     partial(ctx.store.append, transition(task_id, new, reason=f"w{ctx.index}")))


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """Every round all workers save one task at the same expect_version: one wins."""
    rounds = h.profile.rounds
    with h.store() as store:
        store.create(task(TASK))
    specs = [WorkerSpec(i, "saver", _saver, {"task": TASK, "rounds": rounds})
             for i in range(h.profile.processes)]
    logs = h.run(specs)
    with h.store() as store:
        final = store.get(TASK)
        history = list(store.history(TASK))
    judge(h, logs, TASK, rounds, final, history)


# -- the verdict ----------------------------------------------------------------------------

def judge(h: Harness, logs: Logs, task_id: str, rounds: int,
          final: TaskSnapshot | None, history: Sequence[Transition]) -> None:
    saves = list(logs.done("save"))
    report_errors(h, saves, conflict_ok=True)
    report_errors(h, logs.done("append"))
    winners: dict[int, list[int]] = defaultdict(list)
    conflicts: dict[int, list[Any]] = defaultdict(list)
    tried: Counter[int] = Counter()
    for op in saves:
        assert op.round is not None
        tried[op.round] += 1
        if op.ok:
            winners[op.round].append(op.worker)
        elif op.conflict and op.error is not None:
            conflicts[op.round].append(op.error.get("actual"))
    for r in range(rounds):
        won = sorted(winners.get(r, []))
        if len(won) > 1:
            h.anomaly(
                "lost-update",
                f"round {r}: workers {won} all saved task {task_id!r} at "
                f"expect_version={2 * r}; exactly one may succeed, the others must raise "
                "ConcurrencyConflict (check and write are not one atomic step)",
                task=task_id, round=r, expect_version=2 * r, winners=won,
            )
        elif not won and tried[r] == h.profile.processes and len(conflicts[r]) == tried[r]:
            h.anomaly(
                "no-winner",
                f"round {r}: all {tried[r]} saves of task {task_id!r} at expect_version="
                f"{2 * r} raised ConcurrencyConflict, though the task was at that version "
                f"(stored versions reported: {sorted(set(map(str, conflicts[r])))})",
                task=task_id, round=r, expect_version=2 * r,
            )
    single = {r: w[0] for r, w in winners.items() if len(w) == 1}
    if final is None:
        h.anomaly("final-state", f"task {task_id!r} is gone after the save race", task=task_id)
    elif all(len(winners.get(r, [])) == 1 for r in range(rounds)):
        expect_name = f"r{rounds - 1}-w{single[rounds - 1]}"
        if final.status_version != 2 * rounds or final.name != expect_name:
            h.anomaly(
                "final-state",
                f"task {task_id!r} ends at version {final.status_version} named "
                f"{final.name!r}; the last round's winner wrote version {2 * rounds} named "
                f"{expect_name!r}",
                task=task_id, version=final.status_version, name=final.name,
            )
    rows = Counter(t.version for t in history)
    for version, n in sorted(rows.items()):
        if n > 1:
            h.anomaly("history", f"task {task_id!r} has {n} history rows for version {version}",
                      task=task_id, version=version)
    by_version = {t.version: t for t in history}
    for r, w in sorted(single.items()):
        row = by_version.get(2 * r + 2)
        if row is None or row.reason != f"w{w}":
            got = None if row is None else row.reason
            h.anomaly(
                "history",
                f"task {task_id!r}: round {r} was won by worker {w}, but history row "
                f"{2 * r + 2} is {got!r} (expected 'w{w}')",
                task=task_id, round=r, version=2 * r + 2, winner=w, row_reason=got,
            )


SCENARIO = register(Scenario(name="save_race", clause="XP-SAVE-ATOMIC", rule="save_race",
                             run=run))
