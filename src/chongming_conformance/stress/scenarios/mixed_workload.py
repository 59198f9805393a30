"""``mixed_workload`` proves XP-MIXED-WORKLOAD: a random mix of all 14 calls is linearizable.

The other scenarios each aim at one known race. This one looks for the unknown ones:
every worker issues a seeded random mix of all 14 calls on a small key space (eight
shared tasks, commands, terminal tasks of its own), recorded in full
(``ctx.record_calls``). Each round is a work phase (the random calls, colliding for
real) and a check phase in which nobody but the round's checker writes: every worker
reads the key tasks; then the checker alone reads their history, ``counts()`` and
``query()`` with every filter kind (:data:`CHECK_QUERIES`), claims every claimable command
(then releases them), reads ``counts()`` again and saves one key task, which every other
worker then reads again.
The work phase's queries draw every filter kind too, falsy values included (the run id
and name ``""``, bucket 0), alone or two combined (:func:`filters`). While the rounds run,
``crash_cycles`` extra workers each claim some commands and then write as fast as
they can until the parent SIGKILLs them in the middle of a call. Every worker also holds a
second store instance, which it closes and reopens now and then (closing one instance
must spare the other).

**The verdict is the linearizability checker** (``stress.lincheck``): can every
call be given one instant inside its interval so that the calls, run one at a
time in that order on the sequential model (``oracle.py``), give exactly the
answers the store gave? That holds of every correct store whatever the
interleaving; the guide's freedoms are nondeterminism of the model (see the
checker's package docstring). A call of a killed worker that never returned
has an unknown outcome: it may take effect at any instant after its invoke, or
never -- and may hold row locks for ever after.

Claims are judged under the **strict SKIP LOCKED policy**
(``check(..., skip="concurrent")``): a claim may leave out a claimable command
only if some call overlapping it may hold that command's row locked -- another
claim (it may lock rows it scans), a prune, a submit, complete or release of
that command, or such a call of unknown outcome. That is what ``FOR UPDATE SKIP
LOCKED`` skips; a store that skips anything else (a release that keeps the
lease, a claim that never takes an expired lease) starves a command, and the
check phase's claim, which overlaps no other command call, shows it. A lease
that ends exactly at the claim's ``now`` may be taken or left
(CLAIM-LEASE-BOUNDARY is a SHOULD), and a claim's list order is not judged.

What the model cannot express stays a hand-written rule: a call may raise only
what the guide allows there (``save``: ``ConcurrencyConflict``; ``create`` and
``submit_command``: ``StoreError`` for a duplicate id); anything else is
``unexpected-error`` or ``lock-contention`` -- for the checker an error is an
unknown outcome, so a store that raised on every call would otherwise pass.

Each failure names the seed (``StressProfile.seed``), the object whose history
cannot be linearized, the checker's minimal sub-history as a timeline and the
model's reason, then every worker's calls around it.

Inputs are chosen so that the verdict never depends on a SHOULD or on
something the guide leaves open: every append of a version carries the same
content (APPEND-FIRST-WINS is a SHOULD), versions only go up, leases and limits
are positive, appends go to tasks that exist (the key tasks are never pruned).
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from ...protocol.model import TaskQuery
from ..harness import Group, Harness, WorkerContext, WorkerSpec
from ..lincheck import Budget, Verdict, Violation, calls_from_logs, check
from ..log import Logs, Op
from ..records import at, command, snapshot_summary, transition, transitions_summary
from ._aimed import FREEZE_HOLD, FREEZERS, WorkloadAim, freezer
from ._common import logged_claim, report_errors
from ._mix_calls import (
    CHECK_QUERIES,
    LEASE,
    STEP,
    TASKS,
    State,
    create_doomed,
    key_task,
    quiet_driver_warnings,
    random_call,
    read_and_save,
    renew,
    revive,
    signal_file,
    supervised,
    wait_for_file,
)
from ._registry import Scenario, register

OPS_PER_ROUND = 16
#: Crashing workers of a run whose kills are aimed between two requests of a write
#: (``_aimed``; at least the profile's ``crash_cycles``).
AIMED_CRASHERS = 6
#: Seconds the mixers wait, at a check phase of an aimed run, for the freezes and the aimed
#: kills to be in place (the parent's ``aimed{r}``) before they read anyway: a freezer makes
#: its call at once, and a crashing worker writes without a pause, so they usually come
#: within milliseconds.
AIMED_WAIT = 3.0
#: The skip policy of the verdict (``lincheck.check``; see the module docstring).
SKIP = "concurrent"
#: What the checker may spend on one run; running out makes the scenario NOT VERIFIED.
BUDGET = Budget(max_states=2_000_000, max_seconds=60.0, minimise_seconds=20.0, reports=2)
#: Calls a crashing worker makes at most before it waits to be killed (it is killed
#: within 50 ms of its claim, long before).
CRASH_CALLS = 20_000


def _crash_round(k: int, cycles: int, rounds: int) -> int:
    """The round in which crashing worker ``k`` starts (spread over the run)."""
    return max(0, min(rounds - 1, (k + 1) * rounds // (cycles + 1)))


def _crash_rounds(p: Mapping[str, Any]) -> list[int]:
    """Every crashing worker's round, spread over the profile's rounds (in a fault run that
    turns quiet first, a crashing worker whose round never came is killed unstarted)."""
    return [_crash_round(k, p["crash_cycles"], p["rounds"]) for k in range(p["crash_cycles"])]


def _worker(ctx: WorkerContext) -> None:
    p = ctx.params
    n = p["processes"]
    st = State(f"w{ctx.index}", n, random.Random(p["seed"] * 1_000_003 + ctx.index))
    ctx.record_calls = True  # every call in full: the checker's input
    quiet_driver_warnings(p)
    crashes = _crash_rounds(p)
    with contextlib.ExitStack() as stack:
        st.stack = stack
        st.stores = [ctx.store, ctx.open_store(stack)]
        _rounds(ctx, st, crashes)


def _rounds(ctx: WorkerContext, st: State, crashes: Sequence[int]) -> None:
    p = ctx.params
    n = st.n
    end = p["rounds"]  # a fault run goes on until it turns quiet, then TAIL rounds more
    r = 0
    while r < end or (p.get("tail") is not None and end == p["rounds"]):
        ctx.round = r
        now = r * STEP
        if p.get("tail") is not None and end == p["rounds"]:
            if ctx.index == 0 and _quiet_now(p, r):
                signal_file(p["signals"], f"quiet{r}")  # before the barrier: all read it after
            ctx.sync()
            if (Path(p["signals"]) / f"quiet{r}").exists():
                _recover(ctx, st)
                end = r + p["tail"]
        ctx.sync()
        if r == 0 and ctx.index == 0:  # every worker has opened its stores: faults may begin
            signal_file(p["signals"], "started")
        if r == 0:  # every worker races to create every key task
            for tid in TASKS:
                ctx.call("create", {"task": tid}, partial(
                    ctx.store.create, key_task(tid, name=f"{st.me}-create")))
        if ctx.index == 0:  # after its creates returned: every key task exists
            for k in (k for k, at_round in enumerate(crashes) if at_round == r):
                signal_file(p["signals"], f"crash{k}")  # a crashing worker joins in now
        _opening_collision(ctx, st, r)
        for _ in range(2):  # terminal tasks of our own, for the prunes
            create_doomed(ctx, st)
        for _ in range(OPS_PER_ROUND):
            random_call(ctx, st, now, crashing=False)
        ctx.sync()  # check phase: nobody writes but the round's checker
        if ctx.index == 0:  # an aimed kill waits for it: the check reads follow at once
            signal_file(p["signals"], f"check{r}")
        if p.get("aimed"):  # the check reads what the freezes and the aimed kills left
            wait_for_file(ctx, p["signals"], f"aimed{r}", limit=AIMED_WAIT)
        _check_phase(ctx, st, r, checker=ctx.index == r % n)
        r += 1
    ctx.round = r
    if p.get("aimed") and ctx.index == 0:  # the freezers leave before the drain
        signal_file(p["signals"], "drain")
        for j in range(p.get("freezers", 0)):
            wait_for_file(ctx, p["signals"], f"freezer-exit{j}", limit=AIMED_WAIT + FREEZE_HOLD)
    ctx.sync()  # the drain: beyond every lease, nobody else calls the store
    if ctx.index == 0:
        logged_claim(ctx, r * STEP + 10 * LEASE, LEASE, 100_000)
    ctx.sync()
    ctx.call("close", {}, ctx.store.close)


def _crasher(ctx: WorkerContext) -> None:
    """Joins the run at its round, claims, then writes until the parent SIGKILLs it.

    It waits and signals through files, never a lock, event or barrier: a process
    SIGKILLed inside one leaves it broken for the others (a multiprocessing Condition
    waits for ever for a dead sleeper to acknowledge a notify).

    It never prunes, and claims only before it tells the parent to kill it: a claim or
    prune of unknown outcome may hold any command row locked for ever after, which would
    leave every later claim unjudged under the strict skip policy. So its pending call
    is a write to one object (or a read).
    """
    p = ctx.params
    quiet_driver_warnings(p)
    k = p["crash"]
    if not wait_for_file(ctx, p["signals"], f"crash{k}"):
        return
    r = _crash_rounds(p)[k]
    ctx.round = r
    now = r * STEP
    st = State(f"x{k}", p["processes"], random.Random(p["seed"] * 7_000_003 + k))
    ctx.record_calls = True
    for c in logged_claim(ctx, now, LEASE, 3):
        st.held[c.command_id] = now + LEASE  # held until the kill, then until the lease ends
    signal_file(p["signals"], f"busy{k}")
    for _ in range(CRASH_CALLS):
        random_call(ctx, st, now, crashing=True)
    while ctx.remaining() > 0:  # the parent kills it first
        time.sleep(0.05)


def _quiet_now(p: Mapping[str, Any], r: int) -> bool:
    """A fault run turns quiet at round ``r`` (worker 0 decides) once the parent says the
    faults have run long enough (``fault_seconds``) and a round is done -- time, not
    rounds, bounds the fault phase, so a loaded machine or a slow store shortens it
    instead of running into the deadline -- or after ten times the profile's rounds."""
    if r < 1:
        return False
    return (Path(p["signals"]) / "enough").exists() or r >= 10 * p["rounds"]


def _recover(ctx: WorkerContext, st: State) -> None:
    """A fault run's turn to health (every worker, at the same round): worker 0 tells the
    parent to stop the nemesis; every worker waits until the parent says from when the
    network is healthy (a file holding that ``time.monotonic()`` instant), then reads a
    key task through each of its store instances until the recovery window after that
    instant has passed. A call in the window may still fail (a connection broken by the
    last fault is found out by using it); every call after it must succeed
    (``fault_workload``'s recovery verdict)."""
    p = ctx.params
    if ctx.index == 0:
        signal_file(p["signals"], "quiet")
    if not wait_for_file(ctx, p["signals"], "healed"):
        return
    healed = float((Path(p["signals"]) / "healed").read_text(encoding="utf-8"))
    probe = TASKS[0]
    while time.monotonic() < healed + p["recovery"] and ctx.remaining() > 0:
        for k, store in enumerate(st.stores):
            ctx.call("get", {"task": probe, "recovery": True, "instance": k},
                     partial(store.get, probe), summarize=snapshot_summary)
        time.sleep(0.05)


def _opening_collision(ctx: WorkerContext, st: State, r: int) -> None:
    """Right after the barrier: everybody replays one transition at once; after another
    barrier one worker prunes while the others revive their terminal tasks; then everybody
    saves the task the next worker supervises while that worker renews its lease, and
    claims -- the collisions a random mix makes too rarely to count on."""
    n = st.n
    tid = TASKS[r % len(TASKS)]
    ctx.call("append", {"task": tid, "version": 1000 + r, "replay": True},
             partial(ctx.store.append, transition(tid, 1000 + r)))
    ctx.sync()  # the prune and the revives start together too
    if ctx.index == r % n:
        ctx.call("prune", {"keep_terminal": 0}, partial(ctx.store.prune, keep_terminal=0),
                 summarize=lambda x: x)
    else:
        for _ in range(min(2, len(st.doomed))):
            revive(ctx, st)
    read_and_save(ctx, st, TASKS[(ctx.index + 1) % n % len(TASKS)])
    for own in supervised(ctx.index, n):
        renew(ctx, st, own)
    for c in logged_claim(ctx, r * STEP, LEASE, 1 + (r + ctx.index) % 2):
        st.held[c.command_id] = r * STEP + LEASE


def _check_phase(ctx: WorkerContext, st: State, r: int, *, checker: bool) -> None:
    """Three steps, a barrier apart. (1) Every worker reads the key tasks (its own view, caches
    included), the terminal tasks it saved back to RUNNING this round (a prune racing
    the save must have spared them) and the tasks carrying its own tag (every one it
    created and nobody pruned: a create is all or nothing) while nobody writes. (2) The
    round's checker alone reads their history, ``counts()`` and ``query()``, submits a
    command and claims every claimable command -- that one at least; a claim no other
    command call overlaps, so it must return every command that is claimable (the strict
    skip policy) -- releases them, reads ``counts()`` once more (two counts that do not
    overlap: a task counted twice in both was not moved by one write) and saves one key
    task. (3)
    Every other worker reads that task again: it must see the save (a private cache
    would not)."""
    s = ctx.store
    now = r * STEP
    probe = TASKS[r % len(TASKS)]
    for tid in [*TASKS, *st.revived]:  # and the tasks it revived: a prune must spare them
        ctx.call("get", {"task": tid, "check": True}, partial(s.get, tid),
                 summarize=snapshot_summary)
    st.revived.clear()
    ctx.call("query", {"check": True, "tag": st.own_tag},
             partial(s.query, TaskQuery(tag=st.own_tag)), summarize=lambda ts: len(ts))
    ctx.sync()
    if checker:
        for tid in TASKS:
            ctx.call("history", {"task": tid, "check": True}, partial(s.history, tid),
                     summarize=transitions_summary)
        ctx.call("counts", {"check": True}, s.counts,
                 summarize=lambda c: {st.value: n for st, n in c.items()})
        for q in CHECK_QUERIES:
            ctx.call("query", {"check": True}, partial(s.query, q),
                     summarize=lambda ts: len(ts))
        # A command of its own first, so the claim always has one to lease: a claim that
        # answers [] then says nothing is claimable, which the strict skip policy refutes.
        cid = f"mix-check-r{r}"
        ctx.call("submit", {"id": cid, "check": True},
                 partial(s.submit_command, command(cid, probe, now)))
        for c in logged_claim(ctx, now, LEASE, 100_000, qualifier="all"):
            ctx.call("release", {"id": c.command_id, "check": True},
                     partial(s.release_command, c.command_id, now=at(now)), now=at(now),
                     qualifier="held")
        # counts() again: a store may count a task moved inside one call under two
        # statuses, but a write lands once -- an entry still counted twice here, with
        # nothing new in flight, was left behind (``lincheck.ranges._moved_once``).
        ctx.call("counts", {"check": True}, s.counts,
                 summarize=lambda c: {st.value: n for st, n in c.items()})
        if ctx.params.get("aimed"):  # read: the frozen writes may go on (``_aimed``)
            signal_file(ctx.params["signals"], f"checked{r}")
        read_and_save(ctx, st, probe)
    ctx.sync()
    if not checker:
        ctx.call("get", {"task": probe, "check": True}, partial(s.get, probe),
                 summarize=snapshot_summary)


# -- setup and run --------------------------------------------------------------------------

def run(h: Harness) -> None:
    """N workers, a seeded random mix of all 14 calls per round, crashing workers killed
    mid-call -- between two requests of a write when the network seam lets the kill be
    aimed, and freezers held there at every check phase (``_aimed``) -- then the history
    checked for linearizability."""
    cycles = crashers(h)
    aimed = h.network is not None
    group = launch(h, crash_cycles=cycles, aimed=aimed, freezers=FREEZERS if aimed else 0)
    n = h.profile.processes
    rounds = _crash_rounds({"crash_cycles": cycles, "rounds": h.profile.rounds})
    if not aimed:
        rng = random.Random(h.profile.seed)
        for k in range(cycles):
            if await_signal(h, group, signals_of(h) / f"busy{k}", n + k, range(n)):
                time.sleep(rng.uniform(0.0, 0.05))  # the kill lands amid its writes
            group.kill(n + k)
        judge(h, group.finish())
        return
    aim = WorkloadAim(h, group, mixers=n, freezers=range(n + cycles, n + cycles + FREEZERS),
                      seed=h.profile.seed)
    try:
        for r in range(h.profile.rounds):
            # At the check phase of each round, so that the check's reads -- every filter
            # kind -- meet what a frozen or killed write left before any mixer writes again.
            if not await_signal(h, group, signals_of(h) / f"check{r}", 0, range(n)):
                break
            aim.check_phase(r, partial(_aimed_kills, h, group, aim,
                                       [k for k in range(cycles) if rounds[k] == r]))
        for k in range(cycles):  # a crashing worker whose round never came
            group.kill(n + k)
        logs = group.finish()
    finally:
        aim.stop()
    judge(h, logs)


def _aimed_kills(h: Harness, group: Group, aim: WorkloadAim, crashing: Sequence[int]) -> None:
    """Kill each of the ``crashing`` workers (by their crash number) between two requests of
    its next write, once it is busy."""
    n = h.profile.processes
    for k in crashing:
        if await_signal(h, group, signals_of(h) / f"busy{k}", n + k, range(n)):
            aim.kill(n + k)
        group.kill(n + k)


def crashers(h: Harness) -> int:
    """How many crashing workers the run starts: the profile's ``crash_cycles``, and at
    least :data:`AIMED_CRASHERS` when the kills are aimed (the network seam is there):
    each aimed kill tries one more window between two requests of a write, for the
    price of one short-lived process."""
    if h.network is None:
        return h.profile.crash_cycles
    return max(h.profile.crash_cycles, AIMED_CRASHERS)


def signals_of(h: Harness) -> Path:
    """The folder the workers and the parent signal each other through (files, not
    events: see ``_crasher``)."""
    return h.logdir / "signals"


def launch(h: Harness, **extra: Any) -> Group:
    """Start the mixers (``profile.processes``, racing on one barrier) and the crashing
    workers (``profile.crash_cycles``, indexes after the mixers'); ``extra`` goes into
    every worker's parameters (a fault run's ``tail`` and ``recovery``: it goes on past the
    profile's rounds until it turns quiet, then ``tail`` rounds more)."""
    n = h.profile.processes
    cycles = extra.pop("crash_cycles", h.profile.crash_cycles)
    signals = signals_of(h)
    signals.mkdir(parents=True, exist_ok=True)
    params = {"rounds": h.profile.rounds, "seed": h.profile.seed, "processes": n,
              "crash_cycles": cycles, "signals": str(signals), **extra}
    specs = [WorkerSpec(i, "mixer", _worker, params) for i in range(n)]
    specs += [WorkerSpec(n + k, "crasher", _crasher, {**params, "crash": k})
              for k in range(cycles)]
    specs += [WorkerSpec(n + cycles + j, "freezer", freezer, {**params, "freezer": j})
              for j in range(extra.get("freezers", 0))]
    group = h.group(specs, barrier_parties=n)
    group.start()
    return group


def await_signal(h: Harness, group: Group, signal: Path, setter: int,
                 others: Iterable[int]) -> bool:
    """Wait for worker ``setter``'s ``signal`` file; False once it, or every one of
    ``others`` (who start it), has exited, or at the deadline."""
    crowd = [group.procs[i] for i in others]
    while h.remaining() > 0:
        if signal.exists():
            return True
        if not group.procs[setter].is_alive() or not any(p.is_alive() for p in crowd):
            break
        time.sleep(0.005)
    return signal.exists()


# -- the verdict ----------------------------------------------------------------------------

def judge(h: Harness, logs: Logs) -> None:
    """Errors a correct store does not raise here; then the linearizability verdict."""
    report_disallowed_errors(h, list(logs.all_ops()))
    verdict(h, logs, h.profile.seed)


def report_disallowed_errors(h: Harness, ops: Sequence[Op], *, kind: str | None = None,
                             clause: str | None = None) -> None:
    """Every call in ``ops`` that raised what a healthy store does not raise here.

    Interleaving assumption: none -- a healthy store raises nothing here but a save's
    ConcurrencyConflict and StoreError for a duplicate create or submit id. ``kind`` and
    ``clause`` re-label the anomalies (a fault run's calls after the recovery window).
    """
    report_errors(h, (o for o in ops if o.op not in ("save", "create", "submit")),
                  kind=kind, clause=clause)
    report_errors(h, (o for o in ops if o.op == "save" and not o.pending), conflict_ok=True,
                  kind=kind, clause=clause)
    report_errors(h, (o for o in ops if o.op in ("create", "submit")
                      and not (o.error or {}).get("store_error")), kind=kind, clause=clause)


def verdict(h: Harness, logs: Logs | Sequence[tuple[str, Logs]], seed: int, *,
            clause: str | None = None,
            classify: Callable[[Violation], str] | None = None) -> None:
    """The checker's verdict on the recorded history, as anomalies (a violation: FAIL)
    or a reason it is NOT VERIFIED (the budget ran out first). ``classify`` names the
    clause each violation is evidence against (a fault run: a lost write across a server
    crash is durability's); the violations not minimised (no calls to tell by) go to the
    one clause the shown ones all have, else to ``clause``.

    Interleaving assumption: none beyond the guide's -- the checker tries every order
    real time allows, with the strict SKIP LOCKED policy for claims.
    """
    result = check(calls_from_logs(logs), skip=SKIP, budget=BUDGET)
    unshown = [v for v in result.violations if not v.calls]
    shown_clauses: set[str | None] = set()
    for v in result.violations:
        if not v.calls:
            continue
        text = str(v)
        body = text[len(f"[{v.kind}] "):] if text.startswith(f"[{v.kind}] ") else text
        against = clause if classify is None else classify(v)
        shown_clauses.add(against)
        h.anomaly(v.kind, f"(seed {seed}) {body}",
                  cites=[c.source for c in v.calls if c.source is not None],
                  context=[c.source for c in v.context if c.source is not None],
                  clause=against, seed=seed, where=v.where, stuck=v.explanation)
    if len(shown_clauses) == 1:
        clause = shown_clauses.pop()
    if unshown:
        names = ", ".join(v.where for v in unshown[:8])
        more = f" and {len(unshown) - 8} more" if len(unshown) > 8 else ""
        h.anomaly("not-linearizable", f"(seed {seed}) {len(unshown)} more object(s) whose "
                  f"history cannot be linearized either (not minimised): {names}{more}",
                  clause=clause, seed=seed, where=[v.where for v in unshown])
    if result.verdict is Verdict.INCONCLUSIVE:
        h.not_verified(
            f"(seed {seed}) the linearizability checker ran out of its budget: "
            f"{result.summary()}. Check the kept logs with a bigger one: python -m "
            f"chongming_conformance.stress lincheck --skip {SKIP} --max-states "
            f"{BUDGET.max_states * 10} --max-seconds {BUDGET.max_seconds * 10:g} LOGDIR")
    h.stats.update(checker_verdict=result.verdict.value, checker_calls=result.calls,
                   checker_partitions=result.partitions, checker_states=result.states,
                   checker_seconds=round(result.seconds, 3))


SCENARIO = register(Scenario(name="mixed_workload", clause="XP-MIXED-WORKLOAD",
                             rule="random_mix_keeps_every_invariant", run=run, aims=True))
