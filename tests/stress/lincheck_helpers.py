"""Hand-written histories, logged exactly as the mixed workload logs them.

``Recorder`` writes each call as a real worker would (``stress.log.Op`` with the
scenario's ``detail`` and summary *and* the full recorded call), so one history
feeds both the linearizability checker (``calls_from_logs``) and the mixed
workload's whole verdict (``mixed_workload.judge``: the checker with the strict skip
policy, and the errors a healthy store does not raise).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from chongming_conformance.protocol.model import (
    Command,
    Progress,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
)
from chongming_conformance.stress import StressProfile
from chongming_conformance.stress.calls import encode_value
from chongming_conformance.stress.harness import Anomaly, Harness
from chongming_conformance.stress.lincheck import Call, calls_from_logs
from chongming_conformance.stress.log import Logs, Op
from chongming_conformance.stress.records import (
    at,
    command,
    commands_summary,
    snapshot_summary,
    task,
    transition,
    transitions_summary,
)
from chongming_conformance.stress.scenarios import mixed_workload
from chongming_conformance.stress.scenarios._mix_calls import LEASE, LEASE_BASE

#: The key tasks of the hand-written histories (named like the workload's, fewer of them).
TASKS = tuple(f"mix-t{k}" for k in range(4))

Times = tuple[float, float | None]
OK = "ok"
CONFLICT = "conflict"
FAILED = "failed"


class Recorder:
    """Calls of several workers, each at explicit (invoke, return) times."""

    def __init__(self, processes: int = 4) -> None:
        self.processes = processes
        self.ops: dict[int, list[Op]] = defaultdict(list)
        self.seq: Counter[int] = Counter()

    # -- the raw call -------------------------------------------------------------------
    def call(self, w: int, op: str, detail: dict[str, Any], method: str,
             args: dict[str, Any], t: Times, *, result: Any = None, summary: Any = None,
             outcome: str = OK, round_: int = 0, now: Any = None) -> Op:
        self.seq[w] += 1
        o = Op(w, self.seq[w], op, round_, None if now is None else encode_value(now)["$dt"],
               detail, t[0], t[1],
               call={"method": method, "args": {k: encode_value(v) for k, v in args.items()}})
        if t[1] is not None:
            if outcome == OK:
                o.ok, o.value, o.result, o.has_result = True, summary, encode_value(result), True
            elif outcome == CONFLICT:
                o.error = {"type": "ConcurrencyConflict", "message": "conflict", "conflict": True,
                           "expected": args.get("expect_version"), "actual": None}
            else:
                o.error = {"type": "chongming_conformance.protocol.errors.StoreError",
                           "message": "connection lost", "store_error": True, "cause": None}
        self.ops[w].append(o)
        return o

    # -- the mixed workload's calls, logged as it logs them -----------------------------
    def create(self, w: int, snap: TaskSnapshot, t: Times, *, outcome: str = OK,
               round_: int = 0) -> Op:
        detail: dict[str, Any] = {"task": snap.task_id}
        if snap.status.is_terminal:
            detail["doomed"] = True
        return self.call(w, "create", detail, "create", {"snapshot": snap}, t, outcome=outcome,
                         round_=round_)

    def setup(self) -> None:
        """The key tasks, created once each at the start (what every run begins with)."""
        for k, tid in enumerate(TASKS):
            self.create(0, task(tid, name="w0-create"), (0.001 * k, 0.001 * k + 0.0005))

    def save(self, w: int, snap: TaskSnapshot, expect: int, t: Times, *, outcome: str = OK,
             revive: bool = False, round_: int = 0) -> Op:
        detail: dict[str, Any] = {"task": snap.task_id, "expect": expect,
                                  "new": snap.status_version, "name": snap.name}
        if revive:
            detail["revive"] = True
        return self.call(w, "save", detail, "save",
                         {"snapshot": snap, "expect_version": expect}, t, outcome=outcome,
                         round_=round_)

    def get(self, w: int, task_id: str, result: TaskSnapshot | None, t: Times, *,
            check: bool = False, round_: int = 0) -> Op:
        detail: dict[str, Any] = {"task": task_id}
        if check:
            detail["check"] = True
        return self.call(w, "get", detail, "get", {"task_id": task_id}, t, result=result,
                         summary=snapshot_summary(result), round_=round_)

    def renew(self, w: int, task_id: str, n: int, t: Times, *, round_: int = 0) -> Op:
        """The lease writer's renewal number ``n``."""
        args = {"task_id": task_id, "progress": Progress(done=n, message=f"w{w}"),
                "heartbeat_at": None, "lease_owner": f"w{w}",
                "lease_until": at(LEASE_BASE + n)}
        return self.call(w, "touch", {"task": task_id, "lease": n}, "touch", args, t,
                         round_=round_)

    def query(self, w: int, result: Sequence[TaskSnapshot], t: Times, *,
              q: TaskQuery | None = None, round_: int = 0) -> Op:
        return self.call(w, "query", {}, "query", {"query": q}, t, result=list(result),
                         summary=len(result), round_=round_)

    def append(self, w: int, task_id: str, version: int, t: Times, *, round_: int = 0) -> Op:
        return self.call(w, "append", {"task": task_id, "version": version, "reason": f"w{w}"},
                         "append", {"transition": transition(task_id, version, reason=f"w{w}")},
                         t, round_=round_)

    def history(self, w: int, task_id: str, rows: Sequence[Any], t: Times, *,
                round_: int = 0) -> Op:
        return self.call(w, "history", {"task": task_id}, "history",
                         {"task_id": task_id, "since_version": 0}, t, result=list(rows),
                         summary=transitions_summary(rows), round_=round_)

    def submit(self, w: int, cmd: Command, t: Times, *, round_: int = 0) -> Op:
        return self.call(w, "submit", {"id": cmd.command_id, "shared": False},
                         "submit_command", {"command": cmd}, t, round_=round_)

    def claim(self, w: int, now: float, limit: int, result: Sequence[Command], t: Times, *,
              round_: int | None = None) -> Op:
        """A claim at logical ``now`` (the round is ``now`` too, as in the workload)."""
        return self.call(w, "claim", {"lease_seconds": LEASE, "limit": limit}, "claim_commands",
                         {"now": at(now), "lease_seconds": LEASE, "limit": limit}, t,
                         result=list(result), summary=commands_summary(result),
                         round_=int(now) if round_ is None else round_, now=at(now))

    def release(self, w: int, cid: str, now: float, t: Times) -> Op:
        return self.call(w, "release", {"id": cid}, "release_command",
                         {"command_id": cid, "now": at(now)}, t, round_=int(now), now=at(now))

    def complete(self, w: int, cid: str, now: float, t: Times) -> Op:
        return self.call(w, "complete", {"id": cid}, "complete_command",
                         {"command_id": cid, "now": at(now), "outcome": "ok"}, t,
                         round_=int(now), now=at(now))

    def prune(self, w: int, keep: int, dropped: int, t: Times, *, round_: int = 0) -> Op:
        return self.call(w, "prune", {"keep_terminal": keep}, "prune", {"keep_terminal": keep},
                         t, result=dropped, summary=dropped, round_=round_)

    # -- what the two verdicts say ------------------------------------------------------
    def logs(self) -> Logs:
        return Logs(ops={w: list(ops) for w, ops in self.ops.items()},
                    notes={w: [] for w in self.ops})

    def calls(self) -> list[Call]:
        return calls_from_logs(self.logs())

    def judge(self, tmp: Path | None = None) -> list[Anomaly]:
        """The mixed workload's verdict on this history (``mixed_workload.judge``)."""
        profile = StressProfile("test", processes=self.processes, rounds=1)
        h = Harness("mixed_workload", lambda: None, profile, tmp or Path("."))
        mixed_workload.judge(h, self.logs())
        return h.anomalies


def leased(cmd: Command, now: float) -> Command:
    """``cmd`` as a claim at ``now`` returns it."""
    return replace(cmd, lease_until=at(now + LEASE))


__all__ = [
    "CONFLICT",
    "FAILED",
    "OK",
    "TASKS",
    "Recorder",
    "TaskStatus",
    "at",
    "command",
    "leased",
    "task",
    "transition",
]
