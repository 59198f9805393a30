"""``append_replay`` proves XP-APPEND-REPLAY: concurrent appends of one version keep one row.

Every round all workers append the same versions at once, each in its own
order, then read that round's history back. The verdict: exactly one row per
version (in each worker's read and at the end), and each row one some worker
appended whole (never fields of two appends mixed).

Each worker signs its rows (``reason``), so a mixed row shows; which worker's row
is kept is *not* judged: keeping the first (DO NOTHING) is APPEND-FIRST-WINS, a
SHOULD, and a store that keeps the last still keeps exactly one row per version.

Interleaving assumptions: none among the appends -- whatever their order, a
version has one row once any append of it returned, and never two. A worker's
read comes after its own appends returned (its own calls are sequential), so it
must show one row for each version it appended; other workers' appends may
still be running, which changes nothing. An append that raised may or may not
have written: a version none of whose appends returned is not judged.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import partial
from typing import Any

from ...protocol.model import Transition
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
from ..records import task, transition, transitions_summary
from ._common import report_errors
from ._registry import Scenario, register

TASK = "stress-append"
PER_ROUND = 4


# -- the role -------------------------------------------------------------------------------

def _appender(ctx: WorkerContext) -> None:
    p = ctx.params
    task_id, k = p["task"], p["per_round"]
    for r in range(p["rounds"]):
        ctx.round = r
        versions = list(range(r * k + 1, r * k + k + 1))
        shift = ctx.index % k
        versions = versions[shift:] + versions[:shift]
        if ctx.index % 2:
            versions.reverse()
        ctx.sync()
        for v in versions:
            ctx.call("append", {"task": task_id, "version": v},
                     partial(ctx.store.append, transition(task_id, v, reason=f"w{ctx.index}")))
        ctx.call("history", {"task": task_id, "since": r * k},
                 partial(ctx.store.history, task_id, since_version=r * k),
                 summarize=transitions_summary)


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """Every worker appends the same versions at once, in different orders."""
    params = {"task": TASK, "rounds": h.profile.rounds, "per_round": PER_ROUND}
    with h.store() as store:
        store.create(task(TASK))
    logs = h.run([WorkerSpec(i, "appender", _appender, params)
                  for i in range(h.profile.processes)])
    with h.store() as store:
        final = list(store.history(TASK))
    judge(h, logs, TASK, params, h.profile.processes, final)


# -- the verdict ----------------------------------------------------------------------------

def judge(h: Harness, logs: Logs, task_id: str, params: dict[str, Any], workers: int,
          final: Sequence[Transition]) -> None:
    report_errors(h, logs.all_ops())
    k, rounds = int(params["per_round"]), int(params["rounds"])
    reasons = {f"w{i}" for i in range(workers)}
    final_rows = Counter(t.version for t in final)
    by_version = {t.version: t for t in final}
    appends: dict[int, list[Op]] = defaultdict(list)
    for op in logs.all_ops():
        if op.op == "append":
            appends[int(op.detail["version"])].append(op)
    for v in range(1, rounds * k + 1):
        n = final_rows.get(v, 0)
        acked = [o for o in appends.get(v, []) if o.ok]
        if n > 1 or (n == 0 and acked):
            h.anomaly("rows-per-version",
                      f"task {task_id!r} has {n} history rows for version {v} (exactly one "
                      f"expected after {len(acked)} acknowledged appends of it)",
                      cites=appends.get(v, [])[:4], task=task_id, version=v, rows=n)
        row = by_version.get(v)
        if row is not None:
            want = transition(task_id, v, reason=row.reason)
            if row != want or row.reason not in reasons:
                h.anomaly("mixed-row", f"task {task_id!r} version {v} holds {row!r}, which no "
                          "worker appended", cites=appends.get(v, [])[:4], task=task_id,
                          version=v)
    for op in logs.done("history"):
        if not op.ok:
            continue
        r = int(op.round or 0)
        seen = Counter(row["v"] for row in op.value or [])
        mine = [o for o in logs.ops.get(op.worker, []) if o.op == "append" and o.round == r]
        for v in range(r * k + 1, r * k + k + 1):
            own = [o for o in mine if o.detail["version"] == v]
            if seen.get(v, 0) > 1 or (seen.get(v, 0) == 0 and any(o.ok for o in own)):
                h.anomaly("rows-per-version",
                          f"worker {op.worker} read {seen.get(v, 0)} rows for version {v} of "
                          f"{task_id!r} right after its own append of it returned (round {r})",
                          cites=[*own, op], task=task_id, version=v, worker=op.worker)


SCENARIO = register(Scenario(name="append_replay", clause="XP-APPEND-REPLAY",
                             rule="concurrent_replay", run=run))
