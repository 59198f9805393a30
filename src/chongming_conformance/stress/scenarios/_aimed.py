"""The mixed workload's aim: its crashes between two requests of a write, and latency inside
the writes, when the store's connections go through the kit's proxies.

The mixed workload SIGKILLs crashing workers a few milliseconds after they start writing:
the kill lands inside a call (15 of 16), but rarely *between two requests of one call*,
the window where a store whose one logical write is several physical writes (a record,
then its index entries, in a key-value store without multi-key transactions) leaves a
half-written state for good -- a window of about 2 ms, which the gate's run met by luck
(docs/benchmarks.md: such teeth needed up to 386 s of soak). With the network seam, the
proxy sees each request of each call (``faults.aim``), so:

* **aimed crashes**: a crashing worker is killed at the moment its write's request *k*
  (2 <= *k* <= the method's round trips) reaches the proxy, and that request is dropped
  -- the call stops after *k - 1* requests; consecutive kills aim at consecutive *k*
  (from a seeded start), so a run's kills cover the gaps of a call, not one gap twice. The kill
  is armed when the round's check phase begins (the mixed workload waits for it), so the
  check's reads of every filter kind come before any mixer writes the task again, and the
  mixers wait at it for the kill (``aimed{r}``, at most ``mixed_workload.AIMED_WAIT``):
  a half-written state a later write would repair is read while it lasts. More crashing
  workers run than the profile's ``crash_cycles`` (``mixed_workload.AIMED_CRASHERS``):
  each is one more window, for the price of a short-lived process;
* **held writes**: now and then one request inside a mixer's write (again between two of
  its requests) is held back for 20-100 ms, so the others' reads land in the window the
  writer's half-done state is visible in (a count read from an index the writer has
  updated and its record not yet).

Neither is a fault: a killed worker is what the scenario already does, and latency never
makes a correct store wrong; the verdict stays the mixed workload's. Without the seam
(a store on a local file, or one whose factory takes no ``network``), the kills stay as
they were and nothing is held. The report's coverage line says which ran.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

from ...faults.aim import Aimer, Hit, Trigger
from ...faults.plan import WRITES
from ..harness import Group, Harness

__all__ = ["WorkloadAim"]

#: Seconds a crashing worker is given to reach an aimed request before it is killed anyway.
KILL_WAIT = 1.5
#: How long a held request is held (seconds), and the health between two holds.
HOLD = (0.02, 0.1)
GAP = (0.1, 0.4)
#: Seconds a hold waits for a write to hold before the next one is armed.
HOLD_WAIT = 1.0


class WorkloadAim:
    """The aim of one mixed workload run (see the module docstring)."""

    def __init__(self, h: Harness, group: Group, *, mixers: int, seed: int) -> None:
        self._h = h
        self._network = h.network
        self._rng = random.Random(f"chongming-workload-aim-{seed}")
        self._mixers = frozenset(range(mixers))
        self._aimer = Aimer()
        self._network.aim(self._aimer)
        self._aimer.attach(group.board)
        self._stop = threading.Event()
        self._number = 0
        #: Kills take consecutive picks from a seeded start: consecutive gaps of a method's
        #: requests, not the same gap twice by chance.
        self._first_pick = self._rng.randrange(1_000_000)
        self._kills_armed = 0
        self._lock = threading.Lock()
        self.kills: list[Hit] = []
        self.kills_missed = 0
        self.holds: list[Hit] = []
        self._thread = threading.Thread(target=self._hold_loop, name="chongming-aim",
                                        daemon=True)
        self._thread.start()

    def _next_number(self) -> int:
        with self._lock:
            self._number += 1
            return self._number

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

    def _hold_loop(self) -> None:
        try:
            while not self._stop.wait(self._rng.uniform(*GAP)):
                number = self._next_number()
                self._aimer.arm(Trigger(number, "hold", "hold", "upstream", frozenset(WRITES),
                                        "between", self._mixers,
                                        hold=self._rng.uniform(*HOLD),
                                        pick=self._rng.randrange(1_000_000)))
                until = time.monotonic() + HOLD_WAIT
                while time.monotonic() < until and not self._stop.is_set():
                    if self._aimer.fired(number):
                        break
                    time.sleep(0.002)
                self._aimer.disarm(number)
                self.holds += self._aimer.fired(number)
        except Exception as exc:  # the aim must never take the run with it
            self._h.errors.append(f"the workload's aim stopped: {type(exc).__name__}: {exc}")

    def stop(self) -> None:
        """Stop holding, let go of the proxies, and say what the aim did (coverage)."""
        self._stop.set()
        self._thread.join(5.0)
        self._aimer.detach()
        self._network.aim(None)
        killed = Counter(h.method for h in self.kills)
        held = Counter(h.method for h in self.holds)
        kills = ", ".join(f"{m}×{n}" for m, n in sorted(killed.items())) or "none"
        holds = ", ".join(f"{m}×{n}" for m, n in sorted(held.items())) or "none"
        self._h.coverage.append(
            f"aimed through the network seam: {len(self.kills)} crash(es) between two "
            f"requests of a write ({kills}; {self.kills_missed} found none and were killed "
            f"at once), {len(self.holds)} write(s) held {HOLD[0] * 1000:.0f}-"
            f"{HOLD[1] * 1000:.0f} ms between two requests "
            f"({holds}); round trips learned: "
            + ", ".join(f"{m} {n}" for m, n in self._aimer.learned().items()))
        self._h.stats.update(aimed_kills=len(self.kills), aimed_kills_missed=self.kills_missed,
                             aimed_holds=len(self.holds))
