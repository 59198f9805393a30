"""Verdicts from the workers' logs (and a final read by the parent).

Each ``check_*`` records anomalies on the harness with the minimal evidence:
which task or command, which workers, which rounds, logical lease windows
(seconds after ``worker.BASE``) or versions. Nothing here looks at wall-clock
durations; ordering comes from the barrier phases and the logical ``now``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..codec import encode_dt
from ..model import Command, TaskSnapshot, Transition
from .harness import Harness
from .log import Logs, Op
from .worker import at, offset, transition

__all__ = [
    "check_append",
    "check_claim_race",
    "check_crash",
    "check_save_race",
    "check_starvation",
    "check_touch_save",
    "check_visibility",
    "report_errors",
]


def _t(seconds: float | None) -> str:
    return "none" if seconds is None else f"t+{seconds:g}s"


def report_errors(h: Harness, ops: Iterable[Op], *, conflict_ok: bool = False) -> None:
    """Every store call that raised something it should not have."""
    for op in ops:
        if op.pending or op.ok or (conflict_ok and op.conflict):
            continue
        error = op.error or {}
        h.anomaly(
            "unexpected-error",
            f"worker {op.worker}: {op.describe()} raised {error.get('type')}: "
            f"{error.get('message')}",
            worker=op.worker, op=op.op, round=op.round, error=error,
        )


# -- save race ----------------------------------------------------------------------------

def check_save_race(h: Harness, logs: Logs, task_id: str, rounds: int,
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


# -- claim race ---------------------------------------------------------------------------

@dataclass(slots=True)
class _Hold:
    command: str
    worker: int
    start: tuple[int, int]  # (round, phase): phase 0 = claim, 1 = complete/release
    start_s: float
    until_s: float | None
    end: tuple[int, int] | None = None
    end_how: str = "lease expiry"

    def covers(self, key: tuple[int, int], now_s: float) -> bool:
        if key < self.start:
            return False
        if self.end is not None and key > self.end:
            return False
        return self.until_s is None or now_s < self.until_s

    def window(self) -> str:
        end = self.end_how if self.end is None else f"{self.end_how} in round {self.end[0]}"
        return (f"worker {self.worker} claimed it at {_t(self.start_s)} (round {self.start[0]}) "
                f"with lease until {_t(self.until_s)}, held until {end}")


def _round_now(params: dict[str, Any], r: int) -> float:
    return float(params["drain_at"]) if r >= params["rounds"] else r * float(params["step"])


def check_claim_race(h: Harness, logs: Logs, ids: Sequence[str], params: dict[str, Any],
                     leftover: Sequence[Command]) -> None:
    report_errors(h, logs.all_ops())
    lease = float(params["lease"])
    holds: dict[str, list[_Hold]] = defaultdict(list)
    open_holds: dict[tuple[str, int], _Hold] = {}
    completes: dict[str, list[Op]] = defaultdict(list)
    for op in logs.all_ops():  # per worker, in call order: pairs each end with its claim
        if not op.ok:
            continue
        r = op.round or 0
        if op.op == "claim":
            now_s = _round_now(params, r)
            for c in op.value or []:
                until = offset(c["lease_until"])
                if until is None or abs(until - (now_s + lease)) > 1e-6:
                    h.anomaly(
                        "wrong-lease",
                        f"worker {op.worker} claimed {c['id']!r} at {_t(now_s)} with "
                        f"lease_seconds={lease:g} but got lease_until {_t(until)} "
                        f"(expected {_t(now_s + lease)})",
                        command=c["id"], worker=op.worker, round=r,
                    )
                hold = _Hold(c["id"], op.worker, (r, 0), now_s, until)
                holds[c["id"]].append(hold)
                open_holds[(c["id"], op.worker)] = hold
        elif op.op in ("complete", "release"):
            cid = op.detail["id"]
            ended = open_holds.pop((cid, op.worker), None)
            if ended is not None and ended.end is None:
                ended.end, ended.end_how = (r, 1), op.op
            if op.op == "complete":
                completes[cid].append(op)
    for cid, hs in sorted(holds.items()):
        found = 0
        for i, a in enumerate(hs):
            for b in hs[i + 1:]:
                first, second = (a, b) if a.start <= b.start else (b, a)
                if first.covers(second.start, second.start_s) and found < 3:
                    found += 1
                    h.anomaly(
                        "double-hold",
                        f"command {cid!r} was held by two consumers at {_t(second.start_s)}: "
                        f"{first.window()}; {second.window()}",
                        command=cid, workers=[first.worker, second.worker],
                        windows=[[first.start_s, first.until_s], [second.start_s,
                                                                  second.until_s]],
                    )
    for cid, ops in sorted(completes.items()):
        if len(ops) > 1:
            h.anomaly(
                "completed-twice",
                f"command {cid!r} was completed {len(ops)} times, by workers "
                f"{[o.worker for o in ops]} in rounds {[o.round for o in ops]}",
                command=cid, workers=[o.worker for o in ops],
            )
    left = {c.command_id for c in leftover}
    for cid in ids:
        if cid in left:
            h.anomaly("not-completed",
                      f"command {cid!r} is still claimable after every consumer drained the "
                      "store: nobody completed it", command=cid)
        elif cid not in completes:
            h.anomaly("lost",
                      f"command {cid!r} was never completed by any consumer, yet is no longer "
                      "claimable (finished or dropped by the store)", command=cid)


# -- crashed holder -----------------------------------------------------------------------

def check_crash(h: Harness, logs: Logs, ids: Sequence[str], params: dict[str, Any],
                busy: TaskSnapshot | None, history: Sequence[Transition]) -> None:
    t0, lease = float(params["t0"]), float(params["lease"])
    holder = logs.ops.get(0, [])
    claims = [o for o in holder if o.op == "claim" and not o.pending]
    report_errors(h, [o for o in holder if not o.pending])
    report_errors(h, (o for w, ops in logs.ops.items() if w != 0 for o in ops))
    if not claims or not claims[0].ok:
        h.anomaly("holder-claim", "the holder's claim failed or never returned; nothing to "
                  "check", commands=list(ids))
        return
    held = {c["id"]: offset(c["lease_until"]) for c in claims[0].value or []}
    if set(held) != set(ids):
        h.anomaly("holder-claim",
                  f"the holder claimed {sorted(held)} at {_t(t0)} with limit={len(ids)}, "
                  f"expected all of {sorted(ids)}", held=sorted(held))
    for cid, until in held.items():
        if until is None or abs(until - (t0 + lease)) > 1e-6:
            h.anomaly("wrong-lease", f"the holder got {cid!r} with lease_until {_t(until)}, "
                      f"expected {_t(t0 + lease)}", command=cid)
    final_rounds = {r for r, us in enumerate(params["probes_us"]) if us >= params["lease_us"]}
    final_claims: Counter[str] = Counter()
    for op in logs.done("claim"):
        if op.worker == 0 or not op.ok:
            continue
        now_s = offset(op.now)
        for c in op.value or []:
            cid = c["id"]
            if op.round in final_rounds:
                final_claims[cid] += 1
            elif cid in held:
                h.anomaly(
                    "claimed-before-expiry",
                    f"command {cid!r}, leased by the killed worker 0 until "
                    f"{_t(held[cid])}, was claimed by worker {op.worker} at {_t(now_s)}",
                    command=cid, worker=op.worker, now=now_s, lease_until=held[cid],
                )
    expiry = t0 + lease
    for cid in held:
        if final_claims[cid] == 0:
            h.anomaly("stuck-after-expiry",
                      f"command {cid!r} of the killed worker 0 was not claimable at its "
                      f"lease_until {_t(expiry)}", command=cid)
        elif final_claims[cid] > 1:
            h.anomaly("double-hold", f"command {cid!r} was claimed by {final_claims[cid]} "
                      f"survivors at {_t(expiry)}", command=cid)
    acked = [o.detail["id"] for o in holder if o.op == "submit" and o.ok]
    for cid in acked:
        if final_claims[cid] == 0:
            h.anomaly("lost-write",
                      f"command {cid!r}, acknowledged to worker 0 before it was killed, was "
                      f"not claimable at {_t(expiry)}: the acknowledged submit was lost",
                      command=cid)
        elif final_claims[cid] > 1:
            h.anomaly("double-hold", f"command {cid!r} was claimed by {final_claims[cid]} "
                      f"survivors at {_t(expiry)}", command=cid)
    versions = {t.version for t in history}
    lost = [o.detail["version"] for o in holder
            if o.op == "append" and o.ok and o.detail["version"] not in versions]
    if lost:
        h.anomaly("lost-write", f"history versions {lost[:5]} of {params['busy']!r}, "
                  "acknowledged before the kill, are missing", versions=lost[:20])
    touched = [o.detail["done"] for o in holder if o.op == "touch"]
    acked_touch = [o.detail["done"] for o in holder if o.op == "touch" and o.ok]
    done = None if busy is None or busy.progress is None else busy.progress.done
    if acked_touch and (done is None or done < max(acked_touch) or done > max(touched)):
        h.anomaly("lost-write", f"task {params['busy']!r} has progress {done}; the last "
                  f"acknowledged touch wrote {max(acked_touch)}", progress=done)


# -- touch vs save ------------------------------------------------------------------------

def check_touch_save(h: Harness, logs: Logs, task_id: str, sentinel_owner: str,
                     sentinel_until: datetime) -> None:
    saves = list(logs.done("save"))
    report_errors(h, (o for o in logs.all_ops() if o.op != "save"))
    saved = {0} | {int(o.detail["new"]) for o in saves if o.ok}
    for op in saves:
        if op.conflict and op.error is not None:
            h.anomaly(
                "touch-conflict",
                f"worker 0, the only writer of task {task_id!r}, got ConcurrencyConflict on "
                f"{op.describe()} (store holds version {op.error.get('actual')}): a touch moved "
                "status_version (or rewrote the row from a stale read)",
                task=task_id, round=op.round, expect=op.detail["expect"],
                actual=op.error.get("actual"),
            )
        elif not op.ok:
            report_errors(h, [op])
    # The saver is the only writer of the version: its read right after a successful
    # save must show exactly that version.
    last_saved: int | None = None
    for op in logs.ops.get(0, []):
        if op.op == "save" and not op.pending:
            last_saved = int(op.detail["new"]) if op.ok else None
        elif op.op == "get" and op.ok and op.value is not None and last_saved is not None:
            if op.value["v"] != last_saved:
                h.anomaly(
                    "version-moved",
                    f"worker 0 saved task {task_id!r} at version {last_saved} in round "
                    f"{op.round}, and its next read shows version {op.value['v']}: a "
                    "concurrent touch changed (or rewrote) status_version",
                    task=task_id, round=op.round, saved=last_saved, read=op.value["v"],
                )
            last_saved = None
    clobber_seen = 0
    sentinel_iso = encode_dt(sentinel_until)
    for op in logs.done("get"):
        snap = op.value if op.ok else None
        if snap is None:
            continue
        if (snap["lease_owner"] in (sentinel_owner, None) or snap["lease_until"] in
                (sentinel_iso, None)) and clobber_seen < 5:
            clobber_seen += 1
            h.anomaly(
                "lease-clobbered",
                f"worker {op.worker} read task {task_id!r} with lease "
                f"({snap['lease_owner']!r}, {snap['lease_until']}) in round {op.round}; only "
                "create and touch write the lease, and save's snapshot carried "
                f"({sentinel_owner!r}, {sentinel_iso}): save wrote the lease columns",
                task=task_id, worker=op.worker, round=op.round, lease_owner=snap["lease_owner"],
            )
        if snap["v"] not in saved:
            h.anomaly(
                "version-moved",
                f"worker {op.worker} read task {task_id!r} at status_version {snap['v']}, "
                f"which no save wrote (saved: {sorted(saved)[-3:]}...): a touch moved it",
                task=task_id, worker=op.worker, version=snap["v"],
            )


# -- append replay ------------------------------------------------------------------------

def check_append(h: Harness, logs: Logs, task_id: str, params: dict[str, Any], workers: int,
                 final: Sequence[Transition]) -> None:
    report_errors(h, logs.all_ops())
    k, rounds = int(params["per_round"]), int(params["rounds"])
    reasons = {f"w{i}" for i in range(workers)}
    final_rows = Counter(t.version for t in final)
    by_version = {t.version: t for t in final}
    for v in range(1, rounds * k + 1):
        n = final_rows.get(v, 0)
        if n != 1:
            h.anomaly("rows-per-version",
                      f"task {task_id!r} has {n} history rows for version {v} (exactly one "
                      f"expected after {workers} concurrent appends)", task=task_id, version=v,
                      rows=n)
        row = by_version.get(v)
        if row is not None:
            want = transition(task_id, v, reason=row.reason)
            if row != want or row.reason not in reasons:
                h.anomaly("mixed-row", f"task {task_id!r} version {v} holds {row!r}, which no "
                          "worker appended", task=task_id, version=v)
    for op in logs.done("history"):
        if not op.ok:
            continue
        r = int(op.round or 0)
        seen = Counter(row["v"] for row in op.value or [])
        for v in range(r * k + 1, r * k + k + 1):
            if seen.get(v, 0) != 1:
                h.anomaly("rows-per-version",
                          f"worker {op.worker} read {seen.get(v, 0)} rows for version {v} of "
                          f"{task_id!r} right after appending it (round {r})",
                          task=task_id, version=v, worker=op.worker)
        for row in op.value or []:
            now = by_version.get(row["v"])
            if now is not None and now.reason != row["reason"]:
                h.anomaly("row-changed",
                          f"version {row['v']} of {task_id!r} read by worker {op.worker} in "
                          f"round {r} came from {row['reason']!r}, but ends as "
                          f"{now.reason!r}: a replayed append replaced the first row",
                          task=task_id, version=row["v"])


# -- release, no starvation ---------------------------------------------------------------

def check_starvation(h: Harness, logs: Logs, params: dict[str, Any], bound: int) -> None:
    report_errors(h, logs.all_ops())
    rounds = int(params["rounds"])
    submitted = {o.detail["id"]: int(o.round or 0) for o in logs.done("submit")
                 if o.ok and o.detail["task"] == "own-w0"}
    owner_polls = sorted((o for o in logs.ops.get(0, []) if o.op == "claim" and o.ok),
                         key=lambda o: o.round or 0)
    received: dict[str, int] = {}
    for op in owner_polls:
        for c in op.value or []:
            received.setdefault(c["id"], int(op.round or 0))
    others: dict[str, list[str]] = defaultdict(list)
    for op in logs.all_ops():
        if op.worker != 0 and op.ok and op.op in ("claim", "release"):
            ids = [c["id"] for c in op.value or []] if op.op == "claim" else [op.detail["id"]]
            for cid in ids:
                others[cid].append(f"{op.op} by worker {op.worker} in round {op.round}")
    starved = 0
    for cid, r in sorted(submitted.items()):
        polls = [o for o in owner_polls if int(o.round or 0) >= r]
        got = received.get(cid)
        n = None if got is None else sum(1 for o in polls if int(o.round or 0) <= got)
        if (n is None and len(polls) >= bound) or (n is not None and n > bound):
            starved += 1
            if starved <= 5:
                h.anomaly(
                    "starved",
                    f"owner worker 0 did not receive command {cid!r} (submitted in round {r}) "
                    f"within {bound} polls ("
                    + ("never received" if got is None else f"received at poll {n}")
                    + f"); meanwhile: {'; '.join(others[cid][:6]) or 'no other consumer'}",
                    command=cid, submitted_round=r, received_round=got,
                    others=others[cid][:10],
                )
    if starved > 5:
        h.anomaly("starved", f"... and {starved - 5} more starved commands of worker 0 "
                  f"(of {len(submitted)} submitted over {rounds} rounds)")


# -- shared visibility --------------------------------------------------------------------

def check_visibility(h: Harness, logs: Logs, task_id: str, params: dict[str, Any]) -> None:
    report_errors(h, logs.all_ops())
    n = int(params["workers"])
    last_seen: dict[int, int] = {}
    for op in sorted((o for o in logs.all_ops() if o.op == "spin-get" and o.ok),
                     key=lambda o: (o.worker, o.seq)):
        snap = op.value
        r = int(op.round or 0)
        if snap is None:
            h.anomaly("torn-read", f"worker {op.worker} found no task {task_id!r} in round {r}",
                      worker=op.worker, round=r)
            continue
        v = snap["v"]
        consistent = (snap["name"] == f"v{v}" and snap["tags"] == [f"t{v}"]
                      and snap["done"] == v)
        if not consistent:
            h.anomaly("torn-read", f"worker {op.worker} read a half-written task {task_id!r} in "
                      f"round {r}: {snap}", worker=op.worker, round=r, snapshot=snap)
        if v not in (r, r + 1) or v < last_seen.get(op.worker, 0):
            h.anomaly("stale-read", f"worker {op.worker} read version {v} of {task_id!r} while "
                      f"worker {r % n} wrote version {r + 1} over {r} (it had seen "
                      f"{last_seen.get(op.worker, 0)})", worker=op.worker, round=r, version=v)
        last_seen[op.worker] = max(v, last_seen.get(op.worker, 0))
    for op in logs.all_ops():
        if op.pending or not op.ok or op.op in ("spin-get", "save", "touch", "create", "append"):
            continue
        r = int(op.round or 0)
        writer = r % n
        what = f"worker {op.worker} did not see, at its next read, what worker {writer} wrote " \
               f"in round {r}"
        value = op.value
        if op.op == "get":
            want = {"v": r + 1, "name": f"v{r + 1}", "heartbeat": encode_dt(at(r + 0.5))}
            got = None if value is None else {k: value[k] for k in want}
            if got != want:
                h.anomaly("stale-read", f"{what}: task {task_id!r} read as {got}, written as "
                          f"{want}", worker=op.worker, writer=writer, round=r)
        elif op.op == "get-new" and value is None:
            h.anomaly("stale-read", f"{what}: created task 'vis-{r}' is missing",
                      worker=op.worker, writer=writer, round=r)
        elif op.op == "query-new" and value != [f"vis-{r}"]:
            h.anomaly("stale-read", f"{what}: query(name='vis-{r}') returned {value}",
                      worker=op.worker, writer=writer, round=r)
        elif op.op == "history" and [row["v"] for row in value or []] != [r + 1]:
            h.anomaly("stale-read", f"{what}: history(since_version={r}) returned versions "
                      f"{[row['v'] for row in value or []]}, expected [{r + 1}]",
                      worker=op.worker, writer=writer, round=r)
