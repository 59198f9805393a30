"""``fault_workload`` proves XP-FAULT-SAFETY, -RECOVERY, -NO-HANG and -DURABILITY: the mixed
workload under a nemesis.

The mixed workload (``mixed_workload``: every worker a seeded random mix of all 14
calls, crashing workers SIGKILLed mid-call, every call recorded) runs while the nemesis
(``faults.nemesis``) breaks the world around it with the seed's fault sequence: TCP
resets at random instants (some between a COMMIT and its reply), blackholes (a server
that stops answering without closing the socket), latency spikes, replies cut
mid-stream, the server down, and worker processes paused (SIGSTOP) mid-call; with
``faults="deployment"`` also the deployment's own actions (``faults.deployment``: a
server crashed and started again, a failover). Network faults need the store's
connections routed through the kit's proxies (the ``network`` keyword of
``make_shared_store``, docs/faults.md); pauses need nothing; deployment actions need the
store's module to offer them (``chongming_deployment()``).

Three phases. **Faults**: ``fault_seconds`` of the profile (and at least one round),
the nemesis applying one fault after another. **Recovery**: worker 0
tells the parent, which stops the nemesis and heals everything; every worker then reads
through each of its store instances for :data:`RECOVERY_SECONDS` (or the longest
``recovery_seconds`` a deployment action asks for; a call may fail there: a connection
the last fault broke is found out by using it). With crash actions offered, the faults go
on past ``fault_seconds`` until at least one crash has been applied. **Healthy tail**:
:data:`TAIL_ROUNDS` more rounds, with their check phases and the final drain.

The verdicts, each on its own clause:

* **safety** (XP-FAULT-SAFETY): the linearizability checker on the whole history, with
  every call that raised taken as an unknown effect -- it may have happened or not --
  and every answer taken at its word: a ``ConcurrencyConflict`` says the save had no
  effect, a returned ``complete`` says the command is finished. So a save retried after
  a lost reply that reports a conflict, or a write that swallowed its error and said
  "done", cannot be linearized. Errors during the fault and recovery phases are
  unknown effects, never anomalies by themselves; before the first fault the healthy
  rules of the mixed workload apply.
* **recovery** (XP-FAULT-RECOVERY): after the recovery window every call succeeds again
  (the healthy rules: only a save's conflict and a duplicate id's StoreError); a store
  that keeps a dead connection fails every call there.
* **durability** (XP-FAULT-DURABILITY): the same checker, same history. The violations
  are durability's when the history up to the first crash is linearizable and the whole
  history is not: the store was right until its server crashed, and came back without
  what it had acknowledged (``synchronous_commit = off``,
  ``innodb_flush_log_at_trx_commit = 0``); otherwise they are safety's. Judged only in a
  run where a crash action ran.
* **no hang** (XP-FAULT-NO-HANG): no call takes longer than :data:`NO_HANG_SECONDS`. A
  call still pending that long is reported at once and its worker killed (its effect is
  then unknown), so a store with no client-side timeout fails this clause in seconds
  instead of running into the scenario's deadline; the run then ends early and recovery
  is not judged (a knock-on).

Interleaving assumption: none beyond the mixed workload's. A fault never makes an
answer wrong by itself: a correct store raises (unknown effect) or answers truthfully,
whatever the fault and whenever it lands.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from ...faults.aim import Aimer
from ...faults.applied import LOG_NAME, Applied
from ...faults.nemesis import DEPLOYMENT_PREFIX, NETWORK_KINDS, Nemesis, kinds_for
from ...faults.plan import WRITES, Planner
from ..fault_coverage import NO_HANG, RECOVERY, SAFETY, cells_for, matrix, unproven
from ..harness import Group, Harness
from ..lincheck import Call, Outcome, Verdict, Violation, calls_from_logs, check
from ..log import Logs, Op
from . import mixed_workload as mixed
from ._registry import Scenario, register

DURABILITY = "XP-FAULT-DURABILITY"
#: How much of a worker log's end is read to see whether it is inside a call.
_TAIL_BYTES = 4096

#: Seconds after the heal in which a call may still fail; every later call must succeed.
#: A pool whose connects hung in a blackhole finds out at its connect timeout (5 s in the
#: reference stores' fault wiring) and then backs off (psycopg_pool: 1 s, then 2 s): ten
#: seconds holds a pool that heals, and no pool that never does.
RECOVERY_SECONDS = 10.0
#: Seconds a call may take, whatever the fault (a blackhole, the server down, a pause).
NO_HANG_SECONDS = 20.0
#: Healthy rounds after the recovery window.
TAIL_ROUNDS = 3
#: How much longer than the profile's ``fault_seconds`` (as a share of it) the faults may go
#: on while a cell the clauses need is short (``stress.fault_coverage``); past it the run
#: turns quiet and the short clauses are NOT VERIFIED. The cells come in stages (the claims
#: and prunes last), and a loaded machine makes fewer calls a second: as long again.
OVERTIME = 1.0
#: How often the hang watch reads the workers' logs (seconds).
WATCH_EVERY = 1.0
#: Seconds a call may be pending before the nemesis holds off (applies no further fault):
#: longer than any fault lasts. A later reset would free a call a blackhole left stuck,
#: hiding a store that has no client timeout at all; held, it stays stuck until the no-hang
#: bound. (A correct store whose call waits this long -- its client timeout, then a wait for
#: a connection -- only gets fewer faults after it; the report says when it held.)
HOLD_SECONDS = 6.0


def run(h: Harness) -> None:
    """The mixed workload with the nemesis; see the module docstring."""
    mode = h.profile.faults
    seed = h.profile.seed
    actions = dict(h.deployment.actions) if h.deployment is not None and \
        mode == "deployment" else {}
    kinds = kinds_for(mode, network=h.network is not None, actions=list(actions))
    unrouted = _unrouted(h, mode)
    n, cycles = h.profile.processes, h.profile.crash_cycles
    recovery = max([RECOVERY_SECONDS, *(a.recovery_seconds for a in actions.values())])
    routed = h.network is not None and bool(set(kinds) & set(NETWORK_KINDS))
    aimer = Aimer() if routed else None
    if aimer is not None:
        h.network.aim(aimer)
    group = mixed.launch(h, tail=TAIL_ROUNDS, recovery=recovery)
    if aimer is not None:
        aimer.attach(group.board)
    required = cells_for(mode, network=routed)
    planner = Planner(seed, kinds, [c for cells in required.values() for c in cells],
                      aimable=frozenset({"pause", *(NETWORK_KINDS if routed else ())}))
    nemesis = Nemesis(
        planner, network=h.network,
        pausable=lambda: {i: p.pid for i, p in group.procs.items()
                          if i < n and p.pid is not None and p.is_alive()},
        log_path=h.logdir / LOG_NAME, actions=actions, aimer=aimer,
        calls=lambda: _in_calls(group, range(n)))
    need_crash = any(a.crash for a in actions.values())
    watch = HangWatch(h, group, range(n), on_stuck=nemesis.hold)
    # Faults begin once every worker has opened its stores (worker 0 passed the first
    # barrier): opening is the factory's business, not the workload's.
    mixed.await_signal(h, group, mixed.signals_of(h) / "started", 0, range(n))
    began = time.monotonic()
    nemesis.start()
    try:
        _fault_phase(h, group, watch, n, cycles, seed,
                     crashed=(lambda: bool(nemesis.crashes())) if need_crash else None,
                     covered=lambda: not planner.short(nemesis.tally()))
    finally:
        healed = nemesis.stop()  # also when the phase raised: never leave a worker stopped
        if aimer is not None:
            aimer.detach()
            h.network.aim(None)
    signals = mixed.signals_of(h)
    (signals / "healed.tmp").write_text(repr(healed), encoding="utf-8")
    (signals / "healed.tmp").replace(signals / "healed")
    logs = group.finish(watch=watch.tick)
    watch.final(logs)
    _cover(h, mode, kinds, nemesis, began, healed)
    h.fault_coverage = matrix(nemesis.applied, logs, required, mode=mode, seed=seed,
                              round_trips=aimer.learned() if aimer is not None else None)
    if nemesis.error:
        h.errors.append(nemesis.error)
    crashes = nemesis.crashes()
    judge(h, logs, began=min([began, *(a.start for a in nemesis.applied)]),
          healed=healed, hung=bool(watch.hung), recovery=recovery, crashes=crashes)
    if not watch.hung:  # a hang ended the run early: what it did not reach is a knock-on
        h.unproven.update(unproven(h.fault_coverage))
    if unrouted and not h.anomalies:
        h.not_verified(unrouted)
    if need_crash and not crashes and not h.anomalies:
        h.not_verified("the deployment offers a crash action, but none was applied before "
                       "the run had to end, so durability was not judged")


def _in_calls(group: Group, workers: Sequence[int]) -> dict[int, tuple[int, int, str]]:
    """Worker index -> (pid, seq, method) of each of ``workers`` the call board shows inside
    a call now."""
    out = {}
    for i in workers:
        slot = group.board.read(i)
        if slot is not None and slot.in_call and slot.method is not None:
            out[i] = (slot.pid, slot.seq, slot.method)
    return out


def inside_write(log: Path) -> bool:
    """Whether the worker that writes ``log`` is inside a write call now: the last line it
    logged is the invoke of a write (read from the file's end, cheaply, many times a
    second)."""
    try:
        with log.open("rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(size - _TAIL_BYTES, 0))
            chunk = f.read()
    except OSError:
        return False
    lines = chunk.rstrip(b"\n").rsplit(b"\n", 1)
    try:
        last = json.loads(lines[-1])
    except ValueError:
        return False  # a line half written, or cut by the window: not known to be inside
    if not isinstance(last, dict) or last.get("ev") != "inv":
        return False
    return (last.get("call") or {}).get("method") in WRITES


def _unrouted(h: Harness, mode: str) -> str | None:
    """Why network faults were asked for and none could reach the store (None: they could,
    were not asked for, or the store declares it has no network)."""
    if mode != "network" or h.network_absent is not None:
        return None
    if h.network is None:
        return ("faults: network was requested, but make_shared_store() takes no 'network' "
                "keyword, so no network fault could reach the store (only pauses ran): route "
                "the workers' connections through network.route(host, port) (docs/faults.md), "
                "or declare CHONGMING_CAPABILITIES = {'unsupported': {'network': REASON}} if "
                "the store talks to no server")
    return None


def _fault_phase(h: Harness, group: Group, watch: HangWatch, n: int, cycles: int,
                 seed: int, *, crashed: Callable[[], bool] | None = None,
                 covered: Callable[[], bool] = lambda: True) -> None:
    """Until worker 0 reaches the quiet round: kill each crashing worker once it is busy,
    and watch for hung calls. ``crashed``: whether a crash action has been applied yet;
    the faults go on until one has (or the deadline). ``covered``: whether every cell the
    clauses need has its minimum; the faults go on until they do, for at most
    :data:`OVERTIME` more of the profile's ``fault_seconds``."""
    signals = mixed.signals_of(h)
    rng = random.Random(seed)
    kill_at: dict[int, float] = {}
    done: set[int] = set()
    mixers = [group.procs[i] for i in range(n)]
    enough_at = time.monotonic() + h.profile.fault_seconds
    latest = enough_at + OVERTIME * h.profile.fault_seconds
    while h.remaining() > 0 and any(p.is_alive() for p in mixers):
        if (signals / "quiet").exists():
            break
        now = time.monotonic()
        if now >= enough_at and not (signals / "enough").exists() \
                and (crashed is None or crashed()) and (now >= latest or covered()):
            (signals / "enough").touch()  # worker 0 turns the run quiet at its next round
        for k in range(cycles):
            if k in done:
                continue
            if k not in kill_at and (signals / f"busy{k}").exists():
                kill_at[k] = time.monotonic() + rng.uniform(0.0, 0.05)
            if k in kill_at and time.monotonic() >= kill_at[k]:
                group.kill(n + k)
                done.add(k)
        watch.tick()
        time.sleep(0.01)
    for k in range(cycles):  # a crasher that never got busy is killed unstarted
        if k not in done:
            group.kill(n + k)


class _Tail:
    """One worker's log, read as it grows: the calls it has invoked and not returned."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.pending: dict[int, float] = {}  # seq -> t_invoke

    def read(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return
        complete = chunk[: chunk.rfind(b"\n") + 1]
        self.offset += len(complete)
        for line in complete.splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("ev") == "inv":
                self.pending[rec["seq"]] = rec["t"]
            elif rec.get("ev") == "ret":
                self.pending.pop(rec.get("seq"), None)

    def oldest(self) -> tuple[int, float] | None:
        """(seq, t_invoke) of the call pending longest, if any."""
        return min(self.pending.items(), key=lambda x: x[1]) if self.pending else None


class HangWatch:
    """Reads the mixers' logs every second as they grow (only the new lines); a call pending
    longer than the no-hang bound is an anomaly, and its worker is killed (the others then
    leave at the broken barrier). A call pending longer than :data:`HOLD_SECONDS` holds the
    nemesis (``on_stuck``)."""

    def __init__(self, h: Harness, group: Group, workers: Sequence[int], *,
                 on_stuck: Callable[[], None] = lambda: None) -> None:
        self._h = h
        self._group = group
        self._tails = {i: _Tail(group.paths[i]) for i in workers}
        self._on_stuck = on_stuck
        self._next = 0.0
        #: Worker -> (seq of the call it hung in, seconds it had waited when killed).
        self.hung: dict[int, tuple[int, float]] = {}

    def tick(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + WATCH_EVERY
        for i, tail in self._tails.items():
            if i in self.hung:
                continue
            tail.read()
            oldest = tail.oldest()
            if oldest is None:
                continue
            seq, invoked = oldest
            if now - invoked > HOLD_SECONDS:
                self._on_stuck()
            if now - invoked > NO_HANG_SECONDS:
                self.hung[i] = (seq, now - invoked)
                self._group.kill(i)
                self._group.barrier.abort()

    def final(self, logs: Logs) -> None:
        """The anomalies, on the calls of the logs the report quotes: each call the watch
        killed a worker in, and any call that ended after the bound (a tick can miss a call
        that returned between two reads)."""
        for i in self._tails:
            if i in self.hung:
                seq, waited = self.hung[i]
                op = next((o for o in logs.ops.get(i, []) if o.seq == seq), None)
                if op is not None:
                    self._report(op, f"had not returned {waited:.1f} s after it was called "
                                 "(worker killed)")
                continue
            for op in logs.ops.get(i, []):
                if op.t_return is not None and op.t_return - op.t_invoke > NO_HANG_SECONDS:
                    self._report(op, f"took {op.t_return - op.t_invoke:.1f} s")
                    self.hung[i] = (op.seq, op.t_return - op.t_invoke)
                    break

    def _report(self, op: Op, what: str) -> None:
        self._h.anomaly(
            "hang",
            f"worker {op.worker}: {op.describe()} {what}; a call must end -- return or raise "
            f"StoreError -- within {NO_HANG_SECONDS:g} s even when the server stops answering "
            "(give the store a client-side timeout: TCP keepalives do not fire while the "
            "peer's kernel still acknowledges)",
            cites=[op], clause=NO_HANG, worker=op.worker, op=op.op)


def _cover(h: Harness, mode: str, kinds: Sequence[str], nemesis: Nemesis, began: float,
           healed: float) -> None:
    """What the run covered, for every report of it (seed, kinds, faults applied, proxies)."""
    counts = Counter(a.fault.kind for a in nemesis.applied)
    applied = ", ".join(f"{k}×{counts[k]}" for k in sorted(counts)) or "none"
    network = ("no network (declared: " + h.network_absent + ")" if h.network_absent
               else "routed: " + "; ".join(h.network.endpoints()) if h.network is not None
               and h.network.proxies else "not routed")
    held = ("" if nemesis.held_at is None else
            f", held from {nemesis.held_at - began:.1f} s (a call was stuck)")
    h.coverage.append(f"faults {mode} (seed {h.profile.seed}): kinds {', '.join(kinds)}; "
                      f"{len(nemesis.applied)} applied in {healed - began:.1f} s ({applied}"
                      f"{held}); network {network}; replay with the same seed and profile")
    h.coverage.append(_deployment_line(h, mode, nemesis))
    h.stats.update(fault_seed=h.profile.seed, fault_mode=mode, faults_applied=dict(counts),
                   fault_seconds=round(healed - began, 2))
    if mode == "network" and h.network is not None and not h.network.proxies:
        h.not_verified("make_shared_store() took the 'network' keyword but routed no "
                       "connection through network.route(host, port): no network fault "
                       "reached the store")


def _deployment_line(h: Harness, mode: str, nemesis: Nemesis) -> str:
    """What the run covered of the deployment: its topology, the actions it offers and the
    ones applied, and whether durability was judged."""
    d = h.deployment
    if d is None:
        return ("deployment: not described (the store's module has no chongming_deployment()): "
                "no deployment action ran, durability after a server crash not judged")
    used = Counter(a.fault.kind[len(DEPLOYMENT_PREFIX):] for a in nemesis.applied
                   if a.fault.kind.startswith(DEPLOYMENT_PREFIX))
    applied = ", ".join(f"{k}×{used[k]}" for k in sorted(used)) or "none"
    if mode != "deployment":
        judged = (f"not applied (--chongming-faults={mode}; deployment actions need "
                  "--chongming-faults=deployment)")
    elif not d.crashes:
        judged = f"applied {applied}; no crash action offered: durability not judged"
    else:
        judged = f"applied {applied}; durability judged across {len(nemesis.crashes())} crash(es)"
    return f"deployment: {d.describe()}; {judged}"


def durability_or_safety(logs: Logs, crashes: Sequence[Applied]) -> Callable[[Violation], str]:
    """The clause the violations of a run with crashes are evidence against.

    Durability's when the history up to the first crash is linearizable -- every call
    that returned before the server first went down, the calls in flight then taken as
    unknown effects -- and the whole history is not: the store was right until its
    server crashed, and what it answered after contradicts what it had acknowledged
    before. Safety's when the store was already wrong before any crash (a lost write
    cannot explain that), or when the check of the prefix could not finish.

    Read from the history, not from what was lost: a different bug that first shows
    right after a crash would be charged to durability (docs/faults.md says so); the
    timeline in the report shows the crash among the calls.
    """
    first = min(c.start for c in crashes)
    prefix: list[Call] = []
    for call in calls_from_logs(logs):
        if call.t_invoke >= first:
            continue
        if call.t_return is None or call.t_return >= first:
            call = replace(call, outcome=Outcome.PENDING, t_return=None, result=None)
        prefix.append(call)
    before = check(prefix, skip=mixed.SKIP, budget=mixed.BUDGET)
    clause = DURABILITY if before.verdict is Verdict.LINEARIZABLE else SAFETY
    return lambda violation: clause


def judge(h: Harness, logs: Logs, *, began: float, healed: float, hung: bool,
          recovery: float = RECOVERY_SECONDS, crashes: Sequence[Applied] = ()) -> None:
    """Errors by phase, then the checker's verdict on the whole history (see the module
    docstring); ``hung``: a worker was killed for hanging, so recovery cannot be judged;
    ``recovery``: seconds after the heal in which calls may fail; ``crashes``: the crash
    actions applied (a violation across one is durability's)."""
    window_end = healed + recovery
    ops = list(logs.all_ops())
    before = [o for o in ops if _ended_before(o, began)]
    after = [o for o in ops if o.t_invoke >= window_end]
    mixed.report_disallowed_errors(h, before, clause=SAFETY)
    if not hung:
        mixed.report_disallowed_errors(h, after, kind="not-recovered", clause=RECOVERY)
    mixed.verdict(h, logs, h.profile.seed, clause=SAFETY,
                  classify=durability_or_safety(logs, crashes) if crashes else None)


def _ended_before(op: Op, instant: float) -> bool:
    return op.t_return is not None and op.t_return < instant


SCENARIO = register(Scenario(name="fault_workload", clause=SAFETY,
                             rule="history_linearizable_under_faults", run=run,
                             also=(RECOVERY, NO_HANG, DURABILITY), faults=True))
