"""The mixed workload's aim: crashes and freezes between two requests of a write, when the
store's connections go through the kit's proxies.

The mixed workload SIGKILLs crashing workers a few milliseconds after they start writing:
the kill lands inside a call (15 of 16), but rarely *between two requests of one call*,
the window where a store whose one logical write is several physical writes (a record,
then its index entries, in a key-value store without multi-key transactions) shows a
half-written state -- a window of about 2 ms, which the gate's run met by luck
(docs/benchmarks.md: such teeth needed up to 386 s of soak). With the network seam, the
proxy sees each request of each call (``faults.aim``), so the window can be held open
while the round's checker reads every filter kind:

* **freezes, every round, sweeping every gap**: :data:`FREEZERS` extra workers (the
  *freezers*, :func:`freezer`) make the random mix outside the mixers' barrier; when a
  round's check phase begins, the parent picks for each freezer a write method and a
  request *k* (2 <= *k* <= the method's learned round trips), the freezer makes one call
  of that method, and the proxy holds its request *k* back -- the call stands still after
  *k - 1* requests -- while the mixers read every key task and the round's checker reads
  everything (``aimed{r}``: the mixers wait for the freezes, at most
  ``mixed_workload.AIMED_WAIT``); the checker says when it has read (``checked{r}``) and
  the proxy lets the request go (at most :data:`FREEZE_HOLD` later, so that a checker
  waiting on a row a frozen transaction holds is never stuck). The picks sweep the gaps
  of every method that makes several requests (:class:`Sweep`), the gaps a run has frozen
  least first, so a run's freezes cover every gap of every write once the rounds suffice
  (the ci profile's 30 rounds and three freezers: 90 freezes) -- the proxy cannot tell
  which request changes state, so none is left out. Then the request goes on and the
  call ends as it would;
* **aimed crashes**: a crashing worker is killed at the moment its write's request *k*
  reaches the proxy, and that request is dropped -- the call stops after *k - 1* requests
  for good; consecutive kills aim at consecutive *k* (from a seeded start). The kill is
  armed at the round's check phase too, so the check reads what it left before any mixer
  writes the task again. More crashing workers run than the profile's ``crash_cycles``
  (``mixed_workload.AIMED_CRASHERS``): each is one more window, for the price of a
  short-lived process.

Neither is a fault: a killed worker is what the scenario already does, and a request held
back is latency, which never makes a correct store wrong; the verdict stays the mixed
workload's. Without the seam (a store on a local file, or one whose factory takes no
``network``) the kills stay as they were and nothing is frozen. The report's coverage line
says what ran: the kills and the freezes, by method and request.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path

from ...faults.aim import Aimer, Hit, Trigger
from ...faults.plan import WRITES
from ..harness import Group, Harness, WorkerContext
from ._mix_calls import (
    DESIGNATED,
    STEP,
    State,
    designated_call,
    quiet_driver_warnings,
    signal_file,
    wait_for_file,
)

__all__ = ["FREEZERS", "Sweep", "WorkloadAim", "freezer"]

#: Seconds a crashing worker is given to reach an aimed request before it is killed anyway.
KILL_WAIT = 1.5
#: Freezing workers of an aimed run: each freezes one write per round, so a run freezes
#: rounds x FREEZERS writes (quick: 30, ci: 90), a few times the gaps a store's writes have.
FREEZERS = 3
#: The longest a frozen request is held (seconds): the checker's reads end it sooner.
FREEZE_HOLD = 3.0
#: Seconds the parent waits for a freezer's call to reach its frozen request (it makes the
#: call at once; a call that makes fewer requests than planned never does).
FREEZE_WAIT = 1.0
#: A gap two freezes missed (the calls of its method seldom make that many requests) is
#: left for the next sweep.
_MISSES = 2
#: The requests of one call a sweep freezes at most: a call of many requests repeats the
#: same few per item (a prune deleting task after task, each record and then its index
#: entries), and its first gaps stand for the rest; a method of a hundred requests must not
#: take the rounds every other write needs.
MAX_GAPS = 16


# -- the freezer's side ---------------------------------------------------------------------

def freezer(ctx: WorkerContext) -> None:
    """Makes one write per round, when the round's check phase begins (``check{r}``): the
    one the parent names (``freeze{r}-{j}``: a protocol method, or ``-`` for none), built
    as the random mix builds it -- the proxy holds one of its requests back while the
    round's checker reads -- or says it cannot (``freeze{r}-{j}.skip``: nothing to complete).
    Idle otherwise; leaves at the drain, before the final claim."""
    p = ctx.params
    quiet_driver_warnings(p)
    j = p["freezer"]
    signals = p["signals"]
    st = State(f"z{j}", p["processes"], random.Random(p["seed"] * 9_000_011 + j))
    ctx.record_calls = True
    folder = Path(signals)
    try:
        r = 0
        while ctx.remaining() > 0:
            while not (folder / f"check{r}").exists():
                if (folder / "drain").exists() or ctx.remaining() <= 0:
                    return
                time.sleep(0.002)
            ctx.round = r
            if wait_for_file(ctx, signals, f"freeze{r}-{j}", limit=FREEZE_WAIT + KILL_WAIT):
                method = (folder / f"freeze{r}-{j}").read_text(encoding="utf-8").strip()
                if method in DESIGNATED and not designated_call(ctx, st, r * STEP, method):
                    signal_file(signals, f"freeze{r}-{j}.skip")
            r += 1
    finally:
        signal_file(signals, f"freezer-exit{j}")


# -- the parent's side ----------------------------------------------------------------------

class Sweep:
    """Which (method, request) a run freezes next: every request *k* >= 2 of every method
    that makes several (``learned``: method -> its usual round trips), the ones frozen the
    fewest times first, so the freezes of a run spread over every gap of every write."""

    def __init__(self, seed: int) -> None:
        self._done: Counter[tuple[str, int]] = Counter()
        self._missed: Counter[tuple[str, int]] = Counter()
        self._rng = random.Random(f"chongming-freeze-{seed}")

    def picks(self, learned: Mapping[str, int], count: int) -> list[tuple[str, int]]:
        """Up to ``count`` distinct (method, request) to freeze now."""
        gaps = [(m, k) for m in DESIGNATED
                for k in range(2, min(learned.get(m, 0), MAX_GAPS + 1) + 1)]
        if not gaps:
            return []
        self._rng.shuffle(gaps)  # ties in a seeded order
        gaps.sort(key=lambda g: (self._done[g] + (self._missed[g] >= _MISSES), self._done[g]))
        out: list[tuple[str, int]] = []
        for gap in gaps:
            if gap[0] not in {m for m, _ in out}:  # one call per method per round
                out.append(gap)
            if len(out) == count:
                break
        return out

    def hit(self, gap: tuple[str, int]) -> None:
        self._done[gap] += 1

    def miss(self, gap: tuple[str, int]) -> None:
        self._missed[gap] += 1

    def frozen(self) -> Counter[tuple[str, int]]:
        return Counter(self._done)


class WorkloadAim:
    """The aim of one mixed workload run (see the module docstring)."""

    def __init__(self, h: Harness, group: Group, *, mixers: int, freezers: range,
                 seed: int) -> None:
        self._h = h
        self._network = h.network
        self._rng = random.Random(f"chongming-workload-aim-{seed}")
        self._mixers = frozenset(range(mixers))
        self._freezers = freezers
        self._signals = Path(h.logdir) / "signals"
        self._aimer = Aimer()
        self._network.aim(self._aimer)
        self._aimer.attach(group.board)
        self._number = 0
        #: Kills take consecutive picks from a seeded start: consecutive gaps of a method's
        #: requests, not the same gap twice by chance.
        self._first_pick = self._rng.randrange(1_000_000)
        self._kills_armed = 0
        self._lock = threading.Lock()
        self.kills: list[Hit] = []
        self.kills_missed = 0
        self.sweep = Sweep(seed)
        self.freezes_missed = 0

    def _next_number(self) -> int:
        with self._lock:
            self._number += 1
            return self._number

    def check_phase(self, r: int, kill: Callable[[], None]) -> None:
        """Round ``r``'s check phase has begun: freeze each freezer's next write at a gap
        of the sweep, run ``kill`` (the crashes of this round), and wait for the freezes to
        be in place -- then the mixers may read (``aimed{r}``); once the checker has read
        (``checked{r}``), let the frozen requests go."""
        armed = self._arm_freezes(r)
        kill()
        frozen = self._await_freezes(r, armed)
        (self._signals / f"aimed{r}").touch()
        until = time.monotonic() + FREEZE_HOLD
        while frozen and time.monotonic() < until and self._h.remaining() > 0 and \
                not (self._signals / f"checked{r}").exists():
            time.sleep(0.002)
        proxies = {p.name: p for p in self._network.proxies}
        for hit in frozen:
            proxy = proxies.get(hit.proxy)
            if proxy is not None:
                with contextlib.suppress(RuntimeError):  # the proxy stopped: nothing held
                    proxy.release(hit.connection)

    def _arm_freezes(self, r: int) -> list[tuple[int, int, tuple[str, int]]]:
        picks = self.sweep.picks(self._aimer.learned(), len(self._freezers))
        armed = []
        for worker, gap in zip(self._freezers, picks, strict=False):
            number = self._next_number()
            method, k = gap
            self._aimer.arm(Trigger(number, "freeze", "hold", "upstream", frozenset({method}),
                                    k, frozenset({worker}), hold=FREEZE_HOLD))
            armed.append((worker, number, gap))
            _write(self._signals / f"freeze{r}-{worker - self._freezers.start}", method)
        for worker in self._freezers[len(armed):]:  # nothing to freeze (yet): a plain round
            _write(self._signals / f"freeze{r}-{worker - self._freezers.start}", "-")
        return armed

    def _await_freezes(self, r: int, armed: list[tuple[int, int, tuple[str, int]]]
                       ) -> list[Hit]:
        until = time.monotonic() + FREEZE_WAIT
        waiting = list(armed)
        while waiting and time.monotonic() < until and self._h.remaining() > 0:
            for item in list(waiting):
                worker, number, gap = item
                skipped = (self._signals /
                           f"freeze{r}-{worker - self._freezers.start}.skip").exists()
                if self._aimer.fired(number) or skipped:
                    waiting.remove(item)
            time.sleep(0.001)
        frozen: list[Hit] = []
        for _worker, number, gap in armed:
            self._aimer.disarm(number)
            hits = self._aimer.fired(number)
            if hits:
                self.sweep.hit(gap)
                frozen.append(hits[0])
            else:
                self.sweep.miss(gap)
                self.freezes_missed += 1
        return frozen

    def kill(self, worker: int) -> bool:
        """SIGKILL ``worker`` (a crashing one) between two requests of its next write that
        makes several (waiting up to :data:`KILL_WAIT`); False when none came (the caller
        kills it anyway)."""
        number = self._next_number()
        self._aimer.arm(Trigger(number, "kill", "kill", "upstream", frozenset(WRITES),
                                "between", frozenset({worker}),
                                pick=self._first_pick + self._kills_armed))
        self._kills_armed += 1
        until = time.monotonic() + KILL_WAIT
        while time.monotonic() < until and self._h.remaining() > 0:
            hits = self._aimer.fired(number)
            if hits:
                self.kills.append(hits[0])
                return True
            time.sleep(0.001)
        self._aimer.disarm(number)
        hits = self._aimer.fired(number)
        if hits:
            self.kills.append(hits[0])
            return True
        self.kills_missed += 1
        return False

    def stop(self) -> None:
        """Let go of the proxies, and say what the aim did (coverage)."""
        self._aimer.detach()
        self._network.aim(None)
        killed = Counter(h.method for h in self.kills)
        kills = ", ".join(f"{m}×{n}" for m, n in sorted(killed.items())) or "none"
        frozen = self.sweep.frozen()
        by_method: dict[str, list[int]] = {}
        for (method, k), times in sorted(frozen.items()):
            by_method.setdefault(method, []).extend([k] * times)
        freezes = "; ".join(f"{m} at request {', '.join(map(str, ks))}"
                            for m, ks in by_method.items()) or "none"
        learned = self._aimer.learned()
        self._h.coverage.append(
            f"aimed through the network seam: {sum(frozen.values())} write(s) frozen "
            "between two requests while the round's checker read "
            f"({freezes}; {self.freezes_missed} found no such call), "
            f"{len(self.kills)} crash(es) between two requests of a write ({kills}; "
            f"{self.kills_missed} found none and were killed at once); round trips "
            "learned: " + ", ".join(f"{m} {n}" for m, n in learned.items()))
        self._h.stats.update(aimed_kills=len(self.kills), aimed_kills_missed=self.kills_missed,
                             aimed_freezes=sum(frozen.values()),
                             aimed_freezes_missed=self.freezes_missed,
                             aimed_gaps=sum(max(n - 1, 0) for m, n in learned.items()
                                            if m in DESIGNATED),
                             aimed_gaps_frozen=len(frozen))


def _write(path: Path, text: str) -> None:
    """Write a signal file whole (a reader never sees it half written)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    with contextlib.suppress(FileNotFoundError):
        tmp.replace(path)
