"""``mixed_workload`` proves XP-MIXED-WORKLOAD: what must hold of any interleaving.

The other scenarios each aim at one known race. This one looks for the
unknown ones: every worker issues a seeded random mix of all 14 calls on a
small key space (four tasks, a handful of commands), logged like every
scenario. Each round is a work phase (the random calls, colliding for real)
followed, after a barrier, by a check phase in which nobody writes and every
worker reads the key tasks, their history, ``counts()`` and ``query()``.

The checker needs no model of the interleaving, only what any correct store
guarantees whatever the order:

* per task, the successful saves form one compare-and-set chain (no two from
  one version, no gap) and the task was created once;
* a command is never held by two consumers at once -- judged by real-time
  order (a claim that returned before the holder's release or completion was
  invoked, at a logical ``now`` inside the holder's lease) -- and never
  claimed after a completion by its holder returned;
* a history row, once read, never changes and is never duplicated (every append
  of a version carries the same content, as crash recovery's replays do, so
  this holds whether a store keeps the first or the last: APPEND-FIRST-WINS is a
  SHOULD and is not judged here);
* every acknowledged write is visible in the check phase: the version and
  name of the chain's last save, the lease of the task's only lease writer,
  the history rows appended;
* ``counts()`` equals the statuses ``query()`` returns.

A failure names the seed (``StressProfile.seed``) and quotes the minimal log
slice: the calls that show it, with worker, round and real-time order.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ...model import Progress, TaskStatus
from ..harness import Harness, WorkerContext, WorkerSpec
from ..log import Logs, Op
from ..records import (
    BASE,
    at,
    command,
    commands_summary,
    offset,
    snapshot_summary,
    task,
    transition,
    transitions_summary,
)
from ._common import logged_claim, report_errors
from ._registry import Scenario, register

TASKS = tuple(f"mix-t{k}" for k in range(4))
STEP = 1.0
LEASE = 2.0  # two rounds: leases expire and are reclaimed during the run
LEASE_BASE = 100_000.0  # a lease writer's lease_until = at(LEASE_BASE + its touch number)
OPS_PER_ROUND = 12
_CYCLE = (TaskStatus.PENDING, TaskStatus.RUNNING)


def _lease_writer(task_index: int, processes: int) -> int:
    """Each task has one lease writer (a supervisor), so its latest lease is known."""
    return task_index % processes


# -- the role -------------------------------------------------------------------------------

@dataclass(slots=True)
class _State:
    """What one worker remembers between its calls (never shared)."""

    seq: int = 0
    held: dict[str, float] = field(default_factory=dict)  # command id -> lease_until (s)
    doomed: list[str] = field(default_factory=list)  # our terminal tasks, for prune
    revived: list[str] = field(default_factory=list)  # ours saved back to RUNNING this round


def _worker(ctx: WorkerContext) -> None:
    p = ctx.params
    n = p["processes"]
    rng = random.Random(p["seed"] * 1_000_003 + ctx.index)
    st = _State()
    me = f"w{ctx.index}"
    ctx.record_calls = True  # full calls in the log, for stress.lincheck and the timeline
    for r in range(p["rounds"]):
        ctx.round = r
        now = r * STEP
        ctx.sync()
        if r == 0:  # every worker races to create every key task
            for tid in TASKS:
                ctx.call("create", {"task": tid}, partial(
                    ctx.store.create, task(tid, name=f"{me}-create")))
        _opening_collision(ctx, st, r, n, me)
        for _ in range(2):  # terminal tasks of our own, for next round's prune
            _create_doomed(ctx, st, me)
        for _ in range(OPS_PER_ROUND):
            st.seq += 1
            _random_call(ctx, rng, st, now, me, n)
        ctx.sync()  # check phase: nobody writes
        _check_reads(ctx, st.revived, full=ctx.index == r % n)
        st.revived.clear()  # nobody writes before the next round's barrier
    ctx.call("close", {}, ctx.store.close)


def _create_doomed(ctx: WorkerContext, st: _State, me: str) -> None:
    st.seq += 1
    doomed = f"mix-done-{me}-{st.seq}"
    out = ctx.call("create", {"task": doomed, "doomed": True}, partial(
        ctx.store.create, task(doomed, status=TaskStatus.SUCCEEDED)))
    if out.ok:
        st.doomed.append(doomed)


def _revive(ctx: WorkerContext, st: _State, rng: random.Random, me: str) -> None:
    """Save one of our terminal tasks back to RUNNING, racing whoever prunes."""
    doomed = st.doomed.pop(rng.randrange(len(st.doomed)))
    snap = task(doomed, version=1, name=f"{me}-revive", status=TaskStatus.RUNNING)
    out = ctx.call("save", {"task": doomed, "expect": 0, "new": 1, "name": snap.name,
                            "revive": True}, partial(ctx.store.save, snap, expect_version=0))
    if out.ok:
        st.revived.append(doomed)


def _supervised(index: int, n: int) -> list[str]:
    """The tasks whose lease this worker writes (it is their only lease writer)."""
    return [t for i, t in enumerate(TASKS) if _lease_writer(i, n) == index]


def _renew(ctx: WorkerContext, st: _State, tid: str, me: str) -> None:
    st.seq += 1
    ctx.call("touch", {"task": tid, "lease": st.seq}, partial(
        ctx.store.touch, tid, lease_owner=me, lease_until=at(LEASE_BASE + st.seq),
        progress=Progress(done=st.seq, message=me)))


def _read_and_save(ctx: WorkerContext, st: _State, rng: random.Random, tid: str,
                   me: str) -> None:
    """What a controller does: read, compare-and-set (no lease in its snapshot), then
    write the transition through."""
    s = ctx.store
    got = ctx.call("get", {"task": tid}, partial(s.get, tid), summarize=snapshot_summary)
    if not got.ok or got.value is None:
        return
    v = got.value.status_version
    new = v + rng.choice((1, 1, 2))
    snap = task(tid, version=new, name=f"{me}-s{st.seq}", status=_CYCLE[new % 2],
                lease_owner=None, lease_until=None)
    out = ctx.call("save", {"task": tid, "expect": v, "new": new, "name": snap.name},
                   partial(s.save, snap, expect_version=v))
    if out.ok:
        ctx.call("append", {"task": tid, "version": new},
                 partial(s.append, transition(tid, new)))


def _opening_collision(ctx: WorkerContext, st: _State, r: int, n: int, me: str) -> None:
    """Right after the barrier: one worker prunes while the others revive their terminal
    tasks, and everybody replays one transition and claims -- the collisions a random mix
    makes too rarely to count on."""
    rng = random.Random(r * 31 + ctx.index)
    if ctx.index == r % n:
        ctx.call("prune", {"keep_terminal": 0}, partial(ctx.store.prune, keep_terminal=0),
                 summarize=lambda x: x)
    else:
        for _ in range(min(2, len(st.doomed))):
            _revive(ctx, st, rng, me)
    tid = TASKS[r % len(TASKS)]
    ctx.call("append", {"task": tid, "version": 1000 + r, "replay": True},
             partial(ctx.store.append, transition(tid, 1000 + r)))
    # Save the task the next worker supervises while that worker renews its lease.
    _read_and_save(ctx, st, rng, TASKS[(ctx.index + 1) % n % len(TASKS)], me)
    for own in _supervised(ctx.index, n):
        _renew(ctx, st, own, me)
    for c in logged_claim(ctx, r * STEP, LEASE, 1 + (r + ctx.index) % 2):
        st.held[c.command_id] = r * STEP + LEASE


def _random_call(ctx: WorkerContext, rng: random.Random, st: _State, now: float, me: str,
                 n: int) -> None:
    s = ctx.store
    k = rng.randrange(len(TASKS))
    tid = TASKS[k]
    held = st.held
    for cid in [c for c, until in held.items() if until <= now]:
        del held[cid]  # the lease is over: someone else may hold it now
    pick = rng.random()
    if pick < 0.22:
        _read_and_save(ctx, st, rng, tid, me)
    elif pick < 0.30:  # a replay of some earlier transition
        v = rng.randrange(1, 8)
        ctx.call("append", {"task": tid, "version": v, "replay": True},
                 partial(s.append, transition(tid, v)))
    elif pick < 0.42:
        mine = _supervised(ctx.index, n)
        if mine and rng.random() < 0.6:
            _renew(ctx, st, rng.choice(mine), me)
        else:
            ctx.call("touch", {"task": tid}, partial(s.touch, tid, heartbeat_at=at(now)))
    elif pick < 0.50:
        ctx.call("history", {"task": tid}, partial(s.history, tid, since_version=0),
                 summarize=transitions_summary)
    elif pick < 0.54:
        ctx.call("query", {}, partial(s.query), summarize=lambda ts: len(ts))
    elif pick < 0.57:
        ctx.call("counts", {}, s.counts, summarize=lambda c: sum(c.values()))
    elif pick < 0.67:
        shared = rng.random() < 0.3
        cid = f"mix-dup-r{ctx.round}" if shared else f"mix-c-{me}-{st.seq}"
        ctx.call("submit", {"id": cid, "shared": shared},
                 partial(s.submit_command, command(cid, tid, now + st.seq / 1000)))
    elif pick < 0.80:
        for c in logged_claim(ctx, now, LEASE, rng.randint(1, 3)):
            until = c.lease_until
            held[c.command_id] = now if until is None else (until - BASE).total_seconds()
    elif pick < 0.92 and held:
        cid = rng.choice(sorted(held))
        del held[cid]
        if rng.random() < 0.6:
            ctx.call("complete", {"id": cid}, partial(s.complete_command, cid, now=at(now),
                                                      outcome="ok"), now=at(now))
        else:
            ctx.call("release", {"id": cid}, partial(s.release_command, cid, now=at(now)),
                     now=at(now))
    elif pick < 0.94:  # a plain read (a cache that outlives other processes' writes)
        ctx.call("get", {"task": tid}, partial(s.get, tid), summarize=snapshot_summary)
    elif pick < 0.97 and st.doomed:
        _revive(ctx, st, rng, me)
    else:
        keep = rng.randrange(3)
        ctx.call("prune", {"keep_terminal": keep}, partial(s.prune, keep_terminal=keep),
                 summarize=lambda x: x)


def _check_reads(ctx: WorkerContext, revived: Sequence[str], *, full: bool) -> None:
    """Every worker reads the key tasks (its own view, caches included); one worker per
    round (``full``) also reads the history, ``counts()`` and ``query()``."""
    s = ctx.store
    for tid in revived:
        ctx.call("get", {"task": tid, "check": True, "revived": True}, partial(s.get, tid),
                 summarize=snapshot_summary)
    for tid in TASKS:
        ctx.call("get", {"task": tid, "check": True}, partial(s.get, tid),
                 summarize=snapshot_summary)
    if not full:
        return
    for tid in TASKS:
        ctx.call("history", {"task": tid, "check": True}, partial(s.history, tid),
                 summarize=transitions_summary)
    ctx.call("counts", {"check": True}, s.counts,
             summarize=lambda c: {st.value: n for st, n in c.items()})
    ctx.call("query", {"check": True}, partial(s.query),
             summarize=lambda ts: dict(Counter(t.status.value for t in ts)))


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """N workers, a seeded random mix of all 14 calls per round, then a read-only check."""
    n = h.profile.processes
    rounds = h.profile.rounds
    params = {"rounds": rounds, "seed": h.profile.seed, "processes": n}
    logs = h.run([WorkerSpec(i, "mixer", _worker, params) for i in range(n)])
    with h.store() as store:
        left = list(store.claim_commands(now=at(rounds * STEP + 10 * LEASE),
                                         lease_seconds=LEASE, limit=100_000))
    judge(h, logs, commands_summary(left))


# -- the verdict ----------------------------------------------------------------------------

def _slice(ops: Iterable[Op]) -> str:
    """The log lines that show an anomaly, in real-time order of invocation."""
    lines = []
    for o in sorted(ops, key=lambda o: o.t_invoke):
        end = ("pending" if o.pending else "ok" if o.ok else
               f"raised {(o.error or {}).get('type')}")
        shown = "" if not o.ok or o.value is None else f" -> {o.value}"
        lines.append(f"    w{o.worker} #{o.seq} {o.describe()}: {end}{shown}")
    return "\n" + "\n".join(lines)


class _Judge:
    def __init__(self, h: Harness, logs: Logs) -> None:
        self.h, self.logs = h, logs
        self.seed = h.profile.seed

    def flag(self, kind: str, message: str, ops: Sequence[Op], **evidence: Any) -> None:
        self.h.anomaly(kind, f"(seed {self.seed}) {message}{_slice(ops)}", seed=self.seed,
                       ops=[(o.worker, o.seq) for o in ops], **evidence)

    # -- tasks ------------------------------------------------------------------------------
    def creates(self) -> None:
        for tid in TASKS:
            won = [o for o in self.logs.done("create") if o.detail.get("task") == tid and o.ok]
            if len(won) != 1:
                self.flag("create-once", f"task {tid!r} was created {len(won)} times; every "
                          "worker tried once at the start, exactly one must succeed", won,
                          task=tid)
        shared = [o for o in self.logs.done("submit") if o.detail.get("shared") and o.ok]
        by_id: dict[str, list[Op]] = defaultdict(list)
        for o in shared:
            by_id[o.detail["id"]].append(o)
        for cid, ops in sorted(by_id.items()):
            if len(ops) > 1:
                self.flag("submit-once", f"command {cid!r} was submitted successfully "
                          f"{len(ops)} times; a duplicate id must raise StoreError", ops,
                          command=cid)

    def chains(self) -> dict[str, list[Op]]:
        """Per task the successful saves, checked to form one CAS chain from version 0."""
        chains: dict[str, list[Op]] = {}
        for tid in TASKS:
            saves = sorted((o for o in self.logs.done("save") if o.ok
                            and o.detail["task"] == tid and not o.detail.get("revive")),
                           key=lambda o: o.detail["expect"])
            chains[tid] = saves
            version, prev = 0, None
            for o in saves:
                if o.detail["expect"] != version:
                    same = prev is not None and prev.detail["expect"] == o.detail["expect"]
                    kind = "lost-update" if same else "broken-chain"
                    why = ("two saves succeeded from the same version" if same else
                           f"no save or create left version {o.detail['expect']} (the chain "
                           f"was at {version}): something else moved status_version")
                    self.flag(kind, f"task {tid!r}: {why}", [x for x in (prev, o) if x],
                              task=tid)
                    break
                version, prev = o.detail["new"], o
        return chains

    def lease_order(self) -> None:
        """A read invoked after the lease writer's renewal returned shows it or a later one:
        only that writer writes the lease, one renewal after the other."""
        n = self.h.profile.processes
        reported = 0
        for k, tid in enumerate(TASKS):
            lw = _lease_writer(k, n)
            renewals = [o for o in self.logs.ops.get(lw, []) if o.op == "touch" and o.ok
                        and "lease" in o.detail and o.detail["task"] == tid]
            for op in self.logs.done("get"):
                if reported >= 3 or not op.ok or op.value is None or op.detail["task"] != tid:
                    continue
                before = [o for o in renewals if (o.t_return or 0) < op.t_invoke]
                if not before:
                    continue
                seen = offset(op.value["lease_until"])
                floor = LEASE_BASE + before[-1].detail["lease"]
                if seen is None or seen < floor:
                    reported += 1
                    self.flag("lease-lost", f"task {tid!r}: worker {op.worker} read lease "
                              f"until {op.value['lease_until']} after its only lease writer's "
                              "renewal quoted had returned: a save or touch wrote an older "
                              "lease back", [before[-1], op], task=tid)

    def check_phase(self, chains: dict[str, list[Op]]) -> None:
        """Reads in a check phase must show every write acknowledged before it."""
        n = self.h.profile.processes
        touches = [o for o in self.logs.done("touch") if o.ok and "lease" in o.detail]
        appended = [o for o in self.logs.done("append") if o.ok]
        reported: Counter[str] = Counter()
        for op in self.logs.all_ops():
            if not op.detail.get("check") or not op.ok or op.round is None:
                continue
            r = op.round
            if op.op == "get" and op.detail.get("revived"):
                if op.value is None or op.value["v"] != 1:
                    saved = [o for o in self.logs.ops.get(op.worker, []) if o.op == "save"
                             and o.ok and o.detail["task"] == op.detail["task"]]
                    self.flag("revived-task-pruned", f"task {op.detail['task']!r} was saved "
                              f"back to RUNNING in round {r} and is "
                              f"{'gone' if op.value is None else op.value} at the barrier: a "
                              "prune deleted it after the save", [*saved, op],
                              task=op.detail["task"], round=r)
            elif op.op == "get":
                tid = op.detail["task"]
                k = TASKS.index(tid)
                done = [o for o in chains[tid] if (o.round or 0) <= r]
                want_v = done[-1].detail["new"] if done else 0
                snap = op.value
                stale = snap is None or snap["v"] != want_v or (
                    bool(done) and snap["name"] != done[-1].detail["name"])
                if stale and reported["stale"] < 3:
                    reported["stale"] += 1
                    self.flag("not-visible", f"task {tid!r} read in the check phase of "
                              f"round {r} is {snap and (snap['v'], snap['name'])}; the "
                              f"last acknowledged save wrote version {want_v}",
                              [op, *done[-1:]], task=tid, round=r)
                lw = _lease_writer(k, n)
                mine = [o for o in touches if o.worker == lw and o.detail["task"] == tid
                        and (o.round or 0) <= r]
                if mine and snap is not None:
                    want = LEASE_BASE + mine[-1].detail["lease"]
                    if offset(snap["lease_until"]) != want and reported["lease"] < 3:
                        reported["lease"] += 1
                        self.flag("lease-lost", f"task {tid!r} read in the check phase of "
                                  f"round {r} has lease {snap['lease_owner']!r} until "
                                  f"{snap['lease_until']}; its only lease writer, worker {lw}, "
                                  "last wrote the lease in the call quoted", [op, mine[-1]],
                                  task=tid, round=r)
            elif op.op == "history":
                tid = op.detail["task"]
                have = {row["v"] for row in op.value or []}
                lost = [o for o in appended if o.detail["task"] == tid and (o.round or 0) <= r
                        and not o.detail.get("replay") and o.detail["version"] not in have]
                if lost and reported["history"] < 3:
                    reported["history"] += 1
                    self.flag("history-lost", f"task {tid!r}: history read in the check phase "
                              f"of round {r} lacks acknowledged version(s) "
                              f"{sorted({o.detail['version'] for o in lost})}",
                              [op, *lost[:2]], task=tid, round=r)
            elif op.op == "counts":
                paired = next((q for q in self.logs.ops.get(op.worker, [])
                               if q.op == "query" and q.round == r and q.detail.get("check")
                               and q.ok), None)
                if paired is None:
                    continue
                counts = {s: c for s, c in (op.value or {}).items() if c}
                if counts != paired.value and reported["counts"] < 3:
                    reported["counts"] += 1
                    self.flag("counts-mismatch", f"round {r}: counts() {counts} but query() "
                              f"holds {paired.value}, with nobody writing", [op, paired],
                              round=r)

    def history_rows(self) -> None:
        first: dict[tuple[str, int], tuple[Op, dict[str, Any]]] = {}
        reported = 0
        for op in self.logs.done("history"):
            if not op.ok or reported >= 3:
                continue
            tid = op.detail["task"]
            versions = Counter(row["v"] for row in op.value or [])
            dup = sorted(v for v, c in versions.items() if c > 1)
            if dup:
                reported += 1
                self.flag("history-duplicated", f"task {tid!r}: one history read holds "
                          f"several rows for version(s) {dup}", [op], task=tid)
            for row in op.value or []:
                seen = first.setdefault((tid, row["v"]), (op, row))
                if seen[1] != row and reported < 3:
                    reported += 1
                    self.flag("history-changed", f"task {tid!r}: history row {row['v']} was "
                              f"{seen[1]} and later {row}; a row never changes", [seen[0], op],
                              task=tid, version=row["v"])

    # -- commands ---------------------------------------------------------------------------
    def commands(self, left: Sequence[dict[str, Any]]) -> None:
        claims = [o for o in self.logs.done("claim") if o.ok]
        ends: dict[tuple[str, int], list[Op]] = defaultdict(list)
        for o in self.logs.all_ops():
            if o.op in ("complete", "release") and not o.pending:
                ends[(o.detail["id"], o.worker)].append(o)
        holds: dict[str, list[tuple[Op, float, float, Op | None]]] = defaultdict(list)
        for o in claims:
            now = (o.round or 0) * STEP
            for c in o.value or []:
                until = offset(c["lease_until"])
                if until is None or abs(until - (now + LEASE)) > 1e-6:
                    self.flag("wrong-lease", f"command {c['id']!r} claimed at t+{now:g}s with "
                              f"lease {LEASE:g}s got lease_until {c['lease_until']}", [o],
                              command=c["id"])
                    continue
                end = next((e for e in ends.get((c["id"], o.worker), [])
                            if e.t_invoke > (o.t_return or 0)), None)
                holds[c["id"]].append((o, now, until, end))
        reported = 0
        for cid, hs in sorted(holds.items()):
            for a, a_now, a_until, a_end in hs:
                for b, b_now, _, _ in hs:
                    if b is a or reported >= 3:
                        continue
                    if not (a_now <= b_now < a_until):
                        continue
                    end_t = a_end.t_invoke if a_end is not None else float("inf")
                    if (a.t_return or 0) <= b.t_invoke and (b.t_return or 0) <= end_t:
                        reported += 1
                        self.flag("double-hold", f"command {cid!r} was claimed by worker "
                                  f"{b.worker} at t+{b_now:g}s while worker {a.worker} held "
                                  f"it (lease until t+{a_until:g}s, not yet released or "
                                  "completed)", [x for x in (a, b, a_end) if x], command=cid)
        completed = {o.detail["id"]: o for o in self.logs.done("complete") if o.ok}
        for cid, done in sorted(completed.items()):
            later = [b for b, *_ in holds.get(cid, []) if b.t_invoke > (done.t_return or 0)]
            if later:
                self.flag("claimed-after-complete", f"command {cid!r} was claimed again after "
                          "its holder's completion returned", [done, later[0]], command=cid)
        left_ids = {c["id"] for c in left}
        for cid in sorted(left_ids & set(completed)):
            self.flag("claimed-after-complete", f"command {cid!r} is claimable at the end "
                      "though its holder completed it", [completed[cid]], command=cid)
        self.released_claimable(claims, holds)
        submitted = {o.detail["id"]: o for o in self.logs.done("submit") if o.ok}
        claimed_ever = {cid for cid in holds}
        for cid, sub in sorted(submitted.items()):
            if cid not in completed and cid not in left_ids and reported < 6:
                reported += 1
                why = "was claimed and" if cid in claimed_ever else "was never"
                self.flag("command-lost", f"command {cid!r} {why} never completed, yet a claim "
                          "beyond every lease does not return it", [sub], command=cid)


    def released_claimable(self, claims: Sequence[Op],
                           holds: dict[str, list[tuple[Op, float, float, Op | None]]]) -> None:
        """A released command is claimable at once -- judged only where no correct store
        could have skipped it.

        Interleaving assumption: a claim may legitimately skip a command that *any*
        concurrent transaction holds locked at that instant (``SELECT ... FOR UPDATE SKIP
        LOCKED``: another claim scanning it, a complete or a release of it), and under READ
        COMMITTED it sees what was committed when its statement began. So a claim is a
        witness only if it was invoked after the release returned and overlapped, in real
        time, no other call that touches commands (claim, complete, release, submit) of any
        worker; and only if it came back short of its limit, without the command, while
        nobody claimed or completed the command between the release and that claim.
        Everything else the log cannot decide is left alone (the cross-process mixed
        workload is not the only check of RELEASE-NOT-COMPLETE).
        """
        reported = 0
        touching = [o for o in self.logs.all_ops()
                    if o.op in ("claim", "complete", "release", "submit")]
        completes = list(self.logs.done("complete"))
        for rel in self.logs.done("release"):
            if not rel.ok or rel.t_return is None or reported >= 3:
                continue
            cid = rel.detail["id"]
            after = sorted((c for c in claims if c.t_invoke > rel.t_return),
                           key=lambda c: c.t_invoke)
            if not after:
                continue
            first = after[0]
            got = {c["id"] for c in first.value or []}
            if cid in got or len(got) >= int(first.detail.get("limit", 0)):
                continue
            end = first.t_return or 0.0
            concurrent = [o for o in touching if o is not first and o.t_invoke < end
                          and (o.t_return is None or o.t_return > first.t_invoke)]
            if concurrent:
                continue  # a concurrent transaction may have held the row: a skip is allowed
            taken = any(b is not first and (b.t_return or 0) > rel.t_invoke and b.t_invoke < end
                        for b, *_ in holds.get(cid, []))
            finished = any(o.detail["id"] == cid and o.t_invoke < end for o in completes)
            if not taken and not finished:
                reported += 1
                self.flag("released-still-leased", f"command {cid!r} was released, and the "
                          f"next claim (limit {first.detail.get('limit')}), which ran alone, "
                          f"came back with only {len(got)} command(s) and without it, while "
                          "no other call touched any command: release_command kept the lease",
                          [rel, first], command=cid)


def judge(h: Harness, logs: Logs, left: Sequence[dict[str, Any]]) -> None:
    report_errors(h, (o for o in logs.all_ops()
                      if o.op not in ("save", "create", "submit")))
    report_errors(h, logs.done("save"), conflict_ok=True)
    report_errors(h, (o for o in logs.all_ops() if o.op in ("create", "submit")
                      and not (o.error or {}).get("store_error")))
    j = _Judge(h, logs)
    j.creates()
    chains = j.chains()
    j.check_phase(chains)
    j.lease_order()
    j.history_rows()
    j.commands(left)


SCENARIO = register(Scenario(name="mixed_workload", clause="XP-MIXED-WORKLOAD",
                             rule="random_mix_keeps_every_invariant", run=run))
