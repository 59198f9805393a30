"""The nemesis: a seeded, replayable sequence of faults, applied while the workload runs.

Jepsen splits a test into a client (the workers and their calls), a nemesis (what
breaks the world around them) and a checker (the verdict on the recorded history);
this module is the second part. :func:`plan` turns a seed into an endless sequence of
:class:`Fault` s -- which kind, how long after the last one, for how long, how hard,
which connection or worker -- and :class:`Nemesis` applies them one after another in a
thread of the parent process until it is stopped, then heals everything. The same seed
gives the same sequence; how many of them land depends on how long the workload runs,
and every applied fault is logged with its real interval (``nemesis.jsonl`` in the run's
log folder), which is what the verdicts and the timeline read.

The kinds, after Toxiproxy's toxics (``faults.toxics``) plus one of Jepsen's:

* ``lost-reply`` -- the next reply of every connection (or of one call in flight: a
  request went up, no reply has come down) is dropped and the connection closed. The
  server has run the request -- committed it -- and the client only sees the connection
  die: the call raises, its effect happened;
* ``lost-request`` -- every live connection (or the next call on one busy one, such as
  the append after a save) drops what the client sends for a moment, then closes: the
  calls raise quickly and none of them reached the server;
* ``reset`` -- every connection (or one) gets a TCP RST at a random instant, so some
  land between a COMMIT and its reply: the call raises, its effect is unknown;
* ``blackhole`` -- nothing is forwarded for a few seconds and what was sent is lost
  (a server that stops answering without closing the socket); a call in flight then
  waits for a reply that never comes, until the store's own client timeout;
* ``latency`` -- replies delayed by hundreds of milliseconds, with jitter;
* ``cut`` -- a reply cut after a few bytes and the connection closed (``limit_data``);
* ``down`` -- the server unreachable: every connection reset, new ones refused;
* ``pause`` -- a worker process stopped (SIGSTOP) for up to 1.5 s, then continued
  (SIGCONT): a holder that stops in the middle of a call, its connection idle and its row
  locks held. Aimed at a worker inside a write when one shows up within 0.3 s (``writing``),
  so a store whose one logical write is several physical writes (a record, then its index
  entries) is frozen between them while the others keep reading; else any worker. Needs
  no network, so a store on a local file gets it too;
* ``deployment:NAME`` -- one of the store's own deployment actions (``faults.deployment``:
  crash a server and start it again, fail over): ``begin`` is called, then ``end`` after
  the planned 0.5-2 s. Only with ``--chongming-faults=deployment``.

Kills stay the workload's own (the mixed workload's crashing workers).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .deployment import Action
from .network import Network
from .toxics import Latency, LimitData, Timeout

__all__ = [
    "DEPLOYMENT_PREFIX",
    "NETWORK_KINDS",
    "PAUSE_KINDS",
    "Applied",
    "Fault",
    "Nemesis",
    "kinds_for",
    "plan",
    "read_nemesis_log",
]

NETWORK_KINDS = ("lost-reply", "lost-request", "reset", "blackhole", "latency", "cut", "down")
PAUSE_KINDS = ("pause",)
#: A deployment action's fault kind is this prefix and the action's name.
DEPLOYMENT_PREFIX = "deployment:"
#: The file a nemesis logs its applied faults to, in the run's log folder.
LOG_NAME = "nemesis.jsonl"
#: Relative weights. The faults aimed at calls in flight come first: they are what a store
#: mishandles (an unknown effect taken for a known one), and they cost the run nothing. A
#: blackhole holds every worker for the store's client timeout, so it comes seldom.
_WEIGHTS = {"lost-reply": 8, "lost-request": 4, "reset": 2, "blackhole": 1, "latency": 1,
            "cut": 1, "down": 1, "pause": 1}
#: The weight of each deployment action: a crash is the fault a durability verdict needs,
#: and it is preceded by seconds of health (``plan``), so it may be drawn often.
DEPLOYMENT_WEIGHT = 4


def kinds_for(mode: str, *, network: bool, actions: Sequence[str] = ()) -> tuple[str, ...]:
    """The fault kinds of a ``StressProfile.faults`` mode: ``pause`` only; with ``network``
    (and a network to break) the network kinds too; with ``deployment`` also the store's
    own ``actions`` (their names)."""
    if mode not in ("pause", "network", "deployment"):
        return ()
    kinds: tuple[str, ...] = PAUSE_KINDS
    if mode in ("network", "deployment") and network:
        kinds = (*NETWORK_KINDS, *kinds)
    if mode == "deployment":
        kinds = (*kinds, *(DEPLOYMENT_PREFIX + a for a in actions))
    return kinds


@dataclass(frozen=True, slots=True)
class Fault:
    """One planned fault. ``gap``: seconds of health before it; ``duration``: seconds it
    lasts (0: an instant); ``every``: all connections (or workers) or one, ``pick`` says
    which (an index taken modulo what is live then); ``amount``: milliseconds of latency,
    bytes before a cut."""

    number: int
    kind: str
    gap: float
    duration: float
    every: bool
    pick: int
    amount: float = 0.0

    def describe(self) -> str:
        who = "every connection" if self.every else "one connection"
        if self.kind == "lost-reply":
            return ("lose the next reply on every connection" if self.every
                    else "lose the next reply of one call in flight")
        if self.kind == "lost-request":
            who = "every live connection" if self.every else "the next call of one busy one"
            return f"lose requests on {who} for {self.amount:.0f} ms, then close"
        if self.kind == "reset":
            return f"reset {who}"
        if self.kind == "blackhole":
            return f"blackhole {who} for {self.duration:.1f} s"
        if self.kind == "latency":
            return f"latency {self.amount:.0f}±{self.amount / 4:.0f} ms on {who} for " \
                   f"{self.duration:.1f} s"
        if self.kind == "cut":
            return f"cut replies after {self.amount:.0f} bytes on {who} for {self.duration:.1f} s"
        if self.kind == "down":
            return f"server down for {self.duration:.1f} s"
        return f"pause one worker for {self.duration:.1f} s"


def plan(seed: int, kinds: Sequence[str]) -> Iterator[Fault]:
    """The endless fault sequence of ``seed`` over ``kinds`` (none: an empty sequence).

    Its random stream is its own (not the workers'), so a replay with the same seed and
    kinds plans the same faults in the same order.
    """
    if not kinds:
        return
    rng = random.Random(f"chongming-nemesis-{seed}")
    weights = [_WEIGHTS.get(k, DEPLOYMENT_WEIGHT) for k in kinds]
    number = 0
    while True:
        number += 1
        kind = rng.choices(list(kinds), weights)[0]
        # A lost reply or request on one connection costs the run that connection and one
        # call: it may come often. The others hold every worker up for a while.
        targeted = kind in ("lost-reply", "lost-request")
        gap = rng.uniform(0.02, 0.15) if targeted else rng.uniform(0.1, 0.8)
        # A lost reply on one busy connection usually lands on the call *after* the one in
        # flight (the toxic is in place a moment later): a worker's next call on the same
        # connection, such as the save after its read. On every connection it lands on each
        # one's next call, mostly reads.
        every = rng.random() < {"reset": 0.5, "latency": 0.5, "cut": 0.5, "lost-reply": 0.2,
                                "lost-request": 0.2, "blackhole": 0.25}.get(kind, 1.0)
        pick = rng.randrange(1_000_000)
        if kind == "lost-reply":
            yield Fault(number, kind, gap, 1.0, every, pick)
        elif kind == "lost-request":
            yield Fault(number, kind, gap, 0.0, every, pick, float(rng.randrange(50, 250, 25)))
        elif kind == "reset":
            yield Fault(number, kind, gap, 0.0, every, pick)
        elif kind == "blackhole":
            yield Fault(number, kind, gap, rng.uniform(0.5, 2.0), every, pick)
        elif kind == "latency":
            yield Fault(number, kind, gap, rng.uniform(0.5, 2.0), every, pick,
                        float(rng.randrange(100, 800, 50)))
        elif kind == "cut":
            yield Fault(number, kind, gap, rng.uniform(0.3, 1.0), every, pick,
                        float(rng.randrange(1, 200)))
        elif kind == "down":
            yield Fault(number, kind, gap, rng.uniform(0.3, 1.0), True, pick)
        elif kind.startswith(DEPLOYMENT_PREFIX):
            # Seconds of health first: a store recovering from the last crash is judged on
            # its way back (the workers' check phases and rounds go on), not crashed again
            # before it has reconnected.
            yield Fault(number, kind, rng.uniform(3.0, 6.0), rng.uniform(0.5, 2.0), True, pick)
        else:
            yield Fault(number, "pause", gap, rng.uniform(0.2, 1.5), False, pick)


@dataclass(frozen=True, slots=True)
class Applied:
    """A fault as it was applied: its real interval (``time.monotonic()``, the clock of the
    workers' logs) and what it hit."""

    fault: Fault
    start: float
    end: float
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"fault": asdict(self.fault), "start": self.start, "end": self.end,
                "detail": self.detail}


class Nemesis:
    """Applies a plan in a thread until :meth:`stop`; see the module docstring.

    ``pausable`` gives the worker processes a pause may stop (index -> pid), asked at
    the moment of the pause, so a worker that has exited is never signalled.
    """

    def __init__(
        self,
        faults: Iterator[Fault],
        *,
        network: Network | None,
        pausable: Callable[[], Mapping[int, int]],
        log_path: Path,
        actions: Mapping[str, Action] | None = None,
        writing: Callable[[], Mapping[int, int]] | None = None,
    ) -> None:
        self._faults = faults
        self._network = network
        self._actions = dict(actions or {})
        self._writing = writing
        self._pausable = pausable
        self._log_path = log_path
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._paused: set[int] = set()
        self._lock = threading.Lock()
        self.applied: list[Applied] = []
        #: Why the nemesis stopped early (an error applying a fault), if it did.
        self.error: str | None = None
        #: When :meth:`hold` stopped it (``time.monotonic()``), if it did.
        self.held_at: float | None = None
        #: Whether the current fault has done all it will do (a targeted toxic has fired:
        #: its connection is gone), so the next may begin; None: it lasts its duration.
        self._ended: Callable[[], bool] | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="chongming-nemesis", daemon=True)
        self._thread.start()

    def stop(self) -> float:
        """Stop applying faults, undo the current one, heal everything; return the instant
        (``time.monotonic()``) from which the network and every worker are healthy."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30.0)
        self._heal()
        return time.monotonic()

    # -- the loop ---------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            for fault in self._faults:
                if self._stop.wait(fault.gap):
                    return
                start = time.monotonic()
                detail, undo = self._begin(fault)
                until = start + fault.duration
                while time.monotonic() < until and not self._stop.is_set():
                    if self._ended is not None and self._ended():
                        break  # a lost reply has been lost: the fault is over
                    self._stop.wait(min(0.005, max(until - time.monotonic(), 0.0)))
                self._ended = None
                undo()
                self._record(Applied(fault, start, time.monotonic(), detail))
        except Exception as exc:  # a nemesis that breaks must not take the run with it
            self.error = f"the nemesis stopped: {type(exc).__name__}: {exc}"

    def _record(self, applied: Applied) -> None:
        self.applied.append(applied)
        with self._log_path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(applied.to_json(), separators=(",", ":")) + "\n")

    def _heal(self) -> None:
        with self._lock:
            paused, self._paused = set(self._paused), set()
        for pid in paused:
            _signal(pid, signal.SIGCONT)
        if self._network is not None:
            self._network.heal()

    # -- one fault --------------------------------------------------------------------------
    def crashes(self) -> list[Applied]:
        """The applied deployment actions that crash a server (``Action.crash``)."""
        return [a for a in list(self.applied) if a.fault.kind.startswith(DEPLOYMENT_PREFIX)
                and self._actions[a.fault.kind[len(DEPLOYMENT_PREFIX):]].crash]

    def _begin(self, fault: Fault) -> tuple[str, Callable[[], None]]:
        if fault.kind == "pause":
            return self._pause(fault)
        if fault.kind.startswith(DEPLOYMENT_PREFIX):
            return self._deployment(fault)
        proxies = self._network.proxies if self._network is not None else []
        if not proxies:
            return "no proxy to act on", _nothing
        if fault.kind == "lost-reply":
            return self._lose_reply(fault, proxies)
        if fault.kind == "lost-request":
            # Live connections drop their requests for a moment, then close: the calls sent
            # meanwhile fail and none of them reached the server. (New connections are
            # spared: a pool that reconnects at once is not held up.) On one busy connection
            # the request lost is that of the next call on it, such as the append after a
            # save, or the complete after a claim.
            live = ([(p, c) for p in proxies for c in p.connections()] if fault.every
                    else self._one_busy(fault, proxies, 0.5))
            for p, c in live:
                p.add_toxic(f"nemesis-{fault.number}-c{c}", Timeout(fault.amount),
                            direction="upstream", connection=c)
            time.sleep(fault.amount / 1000 + 0.05)  # the closes have happened
            if not live:
                return "no call in flight", _nothing
            return (f"requests lost for {fault.amount:.0f} ms on connection(s) "
                    f"{', '.join(str(c) for _, c in live)}", _nothing)
        if fault.kind == "reset":
            if fault.every:
                n = sum(p.reset() for p in proxies)
                return f"reset {n} connection(s)", _nothing
            proxy, conn = self._one_connection(fault, proxies)
            if conn is None:
                return "no live connection to reset", _nothing
            proxy.reset(conn)
            return f"reset connection {conn} of {proxy.address[1]}", _nothing
        if fault.kind == "down":
            for p in proxies:
                p.down()

            def up() -> None:
                for p in proxies:
                    p.up()

            return f"{len(proxies)} endpoint(s) down", up
        name = f"nemesis-{fault.number}"
        if fault.every:
            targets: list[tuple[Any, int | None]] = [(p, None) for p in proxies]
        else:
            proxy, conn = self._one_connection(fault, proxies)
            if conn is None:
                return "no live connection to act on", _nothing
            targets = [(proxy, conn)]
        added: list[tuple[Any, str]] = []
        for proxy, conn in targets:
            if fault.kind == "blackhole":
                for direction in ("upstream", "downstream"):
                    proxy.add_toxic(f"{name}-{direction}", Timeout(0.0),
                                    direction=direction, connection=conn)
                    added.append((proxy, f"{name}-{direction}"))
            elif fault.kind == "latency":
                proxy.add_toxic(name, Latency(fault.amount, fault.amount / 4),
                                direction="downstream", connection=conn)
                added.append((proxy, name))
            elif fault.kind == "cut":
                proxy.add_toxic(name, LimitData(int(fault.amount)), direction="downstream",
                                connection=conn)
                added.append((proxy, name))
        where = "every connection" if fault.every else f"connection {targets[0][1]}"

        def undo() -> None:
            for proxy, toxic in added:
                proxy.remove_toxic(toxic)

        return f"{fault.kind} on {where}", undo

    def _lose_reply(self, fault: Fault, proxies: Sequence[Any]) -> tuple[str, Callable[[], None]]:
        """The next reply of every live connection (or of one busy one) is lost and the
        connection closed: the server has run the request -- committed it -- and the client
        never hears so. Each connection loses exactly one reply: whichever call it carries
        next, a write as likely as a read."""
        if fault.every:
            busy = [(p, c) for p in proxies for c in p.connections()]
        else:
            busy = self._one_busy(fault, proxies, fault.duration)
        if not busy:
            return "no call in flight", _nothing
        for proxy, conn in busy:
            proxy.add_toxic(f"nemesis-{fault.number}-c{conn}", LimitData(0),
                            direction="downstream", connection=conn)

        def undo() -> None:
            for proxy, conn in busy:  # (gone already once its connection closed)
                proxy.remove_toxic(f"nemesis-{fault.number}-c{conn}")

        self._ended = lambda: all(conn not in p.connections() for p, conn in busy)
        where = ", ".join(str(c) for _, c in busy)
        return f"next reply lost on connection(s) {where}", undo

    def _one_busy(self, fault: Fault, proxies: Sequence[Any], wait: float
                  ) -> list[tuple[Any, int]]:  # (proxy, connection id)
        """One connection with a call in flight (``fault.pick`` chooses), waiting up to
        ``wait`` seconds for one: the workers may all be at a barrier for a moment."""
        until = time.monotonic() + wait
        busy = [(p, c) for p in proxies for c in p.busy_connections()]
        while not busy and time.monotonic() < until and not self._stop.is_set():
            time.sleep(0.002)
            busy = [(p, c) for p in proxies for c in p.busy_connections()]
        return [busy[fault.pick % len(busy)]] if busy else []

    def _one_connection(self, fault: Fault, proxies: Sequence[Any]) -> tuple[Any, int | None]:
        """The connection a fault on "one connection" hits: one with a call in flight if
        one shows up within 0.2 s (an idle pooled connection would hide the fault from
        every call), else any live one; ``fault.pick`` chooses."""
        busy = self._one_busy(fault, proxies, 0.2)
        if busy:
            return busy[0]
        live = [(p, c) for p in proxies for c in p.connections()]
        if not live:
            return proxies[0], None
        proxy, conn = live[fault.pick % len(live)]
        return proxy, conn

    def hold(self) -> None:
        """Apply no further fault (the current one is undone as planned); :meth:`stop` still
        heals. The fault run holds the nemesis while a call is stuck, so that a store with no
        client-side timeout stays stuck instead of being freed by a later reset."""
        if not self._stop.is_set():
            self.held_at = time.monotonic()
        self._stop.set()

    def _deployment(self, fault: Fault) -> tuple[str, Callable[[], None]]:
        """One of the store's own actions: ``begin`` now, ``end`` (if any) when it is undone.
        Either raising stops the nemesis (its error is the run's): the deployment's own
        tooling broke, which says nothing about the store."""
        name = fault.kind[len(DEPLOYMENT_PREFIX):]
        action = self._actions[name]
        action.begin()
        if action.end is None:
            return f"{name} (the deployment's action)", _nothing
        end = action.end

        def undo() -> None:
            end()

        return f"{name} (the deployment's action), then its end", undo

    def _pause(self, fault: Fault) -> tuple[str, Callable[[], None]]:
        inside = self._writer(fault)
        live = sorted(self._pausable().items())
        if inside is None and not live:
            return "no worker to pause", _nothing
        index, pid = inside if inside is not None else live[fault.pick % len(live)]
        with self._lock:
            self._paused.add(pid)
        _signal(pid, signal.SIGSTOP)

        def undo() -> None:
            with self._lock:
                self._paused.discard(pid)
            _signal(pid, signal.SIGCONT)

        where = " inside a write" if inside is not None else ""
        return f"paused worker {index} (pid {pid}){where}", undo

    def _writer(self, fault: Fault) -> tuple[int, int] | None:
        """(index, pid) of a worker inside a write call, waiting up to 0.3 s for one
        (``fault.pick`` chooses among several); None without ``writing`` or when none
        showed up."""
        if self._writing is None:
            return None
        until = time.monotonic() + 0.3
        while not self._stop.is_set():
            found = sorted(self._writing().items())
            if found:
                return found[fault.pick % len(found)]
            if time.monotonic() >= until:
                return None
            time.sleep(0.001)
        return None


def _nothing() -> None:
    return None


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited (or was killed) meanwhile
        os.kill(pid, sig)





def read_nemesis_log(logdir: str | Path) -> list[dict[str, Any]]:
    """The applied faults a kept run logged (``[]`` when the run had no nemesis)."""
    path = Path(logdir) / LOG_NAME
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out
