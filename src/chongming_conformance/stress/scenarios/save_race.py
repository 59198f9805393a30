"""``save_race`` proves XP-SAVE-ATOMIC: of N saves at one expect_version, exactly one wins.

Every round all workers, released together by the barrier, save one task at
the same ``expect_version``; the winner appends the transition. The verdict:
one winner per round, the losers got ``ConcurrencyConflict``, and the final
task and history are the winners' writes.

Interleaving assumptions: none about the order inside a round -- any
interleaving of the round's saves has exactly one winner, because the first to
take effect moves the version away from ``expect_version``. Across rounds the
barrier orders them: round ``r`` starts after round ``r-1``'s saves and appends
returned, so the task is at version ``2r`` then -- if round ``r-1`` had exactly
one winner and no save raised (a save of unknown outcome leaves the version
unknown, and every later round is then left unjudged).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import partial

from ...protocol.model import TaskSnapshot, Transition
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
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
    winners: dict[int, list[Op]] = defaultdict(list)
    conflicts: dict[int, list[Op]] = defaultdict(list)
    tried: dict[int, list[Op]] = defaultdict(list)
    for op in logs.all_ops():
        if op.op == "save":
            assert op.round is not None
            tried[op.round].append(op)
            if op.ok:
                winners[op.round].append(op)
            elif op.conflict:
                conflicts[op.round].append(op)
    # The version is known at the start of round r while every earlier round had exactly
    # one winner and no save of unknown outcome (raised something else, or never returned).
    known = 0
    while known < rounds and len(winners.get(known, [])) == 1 and all(
            o.ok or o.conflict for o in tried.get(known, [])):
        known += 1
    for r in range(rounds):
        won = sorted(winners.get(r, []), key=lambda o: o.worker)
        if len(won) > 1:
            # Any interleaving: the first save to take effect moves the version away.
            h.anomaly(
                "lost-update",
                f"round {r}: workers {[o.worker for o in won]} all saved task {task_id!r} at "
                f"expect_version={2 * r}; exactly one may succeed, the others must raise "
                "ConcurrencyConflict (check and write are not one atomic step)",
                cites=won, task=task_id, round=r, expect_version=2 * r,
                winners=[o.worker for o in won],
            )
        elif (not won and r <= known and len(tried[r]) == h.profile.processes
              and len(conflicts[r]) == len(tried[r])):
            # Judged only while the version at the round's start is known to be 2r.
            actual = sorted({str((o.error or {}).get("actual")) for o in conflicts[r]})
            h.anomaly(
                "no-winner",
                f"round {r}: all {len(tried[r])} saves of task {task_id!r} at expect_version="
                f"{2 * r} raised ConcurrencyConflict, though every earlier round had one "
                f"winner, so the task was at version {2 * r} (stored versions reported: "
                f"{actual})",
                cites=[*winners.get(r - 1, []), *conflicts[r]], task=task_id, round=r,
                expect_version=2 * r,
            )
    # The final reads come after every worker exited: the last writes are known iff every
    # round had one winner and no save of unknown outcome.
    last = winners.get(rounds - 1, [])
    if final is None:
        h.anomaly("final-state", f"task {task_id!r} is gone after the save race (no call "
                  "of the scenario deletes it)", cites=last, task=task_id)
    elif known == rounds:
        expect_name = f"r{rounds - 1}-w{last[0].worker}"
        if final.status_version != 2 * rounds or final.name != expect_name:
            h.anomaly(
                "final-state",
                f"task {task_id!r} ends at version {final.status_version} named "
                f"{final.name!r}; the last round's winner wrote version {2 * rounds} named "
                f"{expect_name!r}",
                cites=last, task=task_id, version=final.status_version, name=final.name,
            )
    rows = Counter(t.version for t in history)
    appends = list(logs.done("append"))
    for version, n in sorted(rows.items()):
        if n > 1:
            # Only each round's winner appends, once: no interleaving makes two rows.
            h.anomaly("history", f"task {task_id!r} has {n} history rows for version {version}",
                      cites=[o for o in appends if o.detail.get("version") == version],
                      task=task_id, version=version)
    by_version = {t.version: t for t in history}
    for r in range(rounds):
        if len(winners.get(r, [])) != 1:
            continue
        (w,) = winners[r]
        appended = [o for o in appends if o.worker == w.worker and o.round == r]
        if not appended or not all(o.ok for o in appended):
            continue  # the append raised (reported): its row is not known
        row = by_version.get(2 * r + 2)
        if row is None or row.reason != f"w{w.worker}":
            got = None if row is None else row.reason
            # The winner's append returned before the final read; nobody else appends it.
            h.anomaly(
                "history",
                f"task {task_id!r}: round {r} was won by worker {w.worker}, whose append of "
                f"version {2 * r + 2} returned, but history row {2 * r + 2} is "
                f"{'missing' if row is None else repr(got)} (expected 'w{w.worker}')",
                cites=[w, *appended], task=task_id, round=r, version=2 * r + 2,
                winner=w.worker, row_reason=got,
            )


SCENARIO = register(Scenario(name="save_race", clause="XP-SAVE-ATOMIC", rule="save_race",
                             run=run))
