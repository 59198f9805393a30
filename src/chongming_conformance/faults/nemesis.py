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
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .aim import Aimer, Hit, Trigger
from .applied import PRECISE_UNAIMED, Applied, Landing
from .deployment import Action
from .network import Network
from .plan import (
    DEPLOYMENT_PREFIX,
    INSTANT,
    NETWORK_KINDS,
    PAUSE_KINDS,
    VOLLEY,
    WRITES,
    Fault,
    Planner,
    call_words,
    kinds_for,
    matches_kind,
    plan,
)
from .toxics import Latency, LimitData, Timeout

__all__ = [
    "DEPLOYMENT_PREFIX",
    "NETWORK_KINDS",
    "PAUSE_KINDS",
    "Fault",
    "Nemesis",
    "kinds_for",
    "plan",
]

#: Seconds an aimed fault waits for its call before it gives up (the workload makes most
#: calls many times a second; a miss is logged and the planner tries another cell).
AIM_WAIT = 2.0



#: What the nemesis is told of a worker inside a call: index -> (pid, seq, method).
Calls = Callable[[], Mapping[int, tuple[int, int, str]]]


class Nemesis:
    """Applies a plan in a thread until :meth:`stop`; see the module docstring.

    ``pausable`` gives the worker processes a pause may stop (index -> pid), asked at
    the moment of the pause, so a worker that has exited is never signalled.
    """

    def __init__(
        self,
        faults: Iterator[Fault] | Planner,
        *,
        network: Network | None,
        pausable: Callable[[], Mapping[int, int]],
        log_path: Path,
        actions: Mapping[str, Action] | None = None,
        writing: Callable[[], Mapping[int, int]] | None = None,
        aimer: Aimer | None = None,
        calls: Calls | None = None,
    ) -> None:
        self._faults = faults
        self._aimer = aimer
        self._calls = calls
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
        #: The calls the current fault landed in, and when an aimed one hit its call.
        self._landed: list[Landing] = []
        self._landed_at: float | None = None

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

    def tally(self) -> Counter[tuple[str, str]]:
        """(fault kind, method) -> landings so far that count toward coverage."""
        total: Counter[tuple[str, str]] = Counter()
        for applied in list(self.applied):
            total.update(applied.tally())
        return total

    # -- the loop ---------------------------------------------------------------------------
    def _next(self) -> list[Fault]:
        """The next faults to apply: a volley of instant aimed ones (``Planner.volley``), or
        one fault; none when the plan has ended."""
        if isinstance(self._faults, Planner):
            try:
                return self._faults.volley(self.tally())
            except StopIteration:
                return []
        fault = next(self._faults, None)
        return [] if fault is None else [fault]

    def _run(self) -> None:
        try:
            queued: list[Fault] = []
            while faults := (queued or self._next()):
                queued = []
                if self._stop.wait(faults[0].gap):
                    return
                if faults[0].target and faults[0].kind in INSTANT:
                    queued = self._volley(faults)
                    continue
                self._one(faults[0])
        except Exception as exc:  # a nemesis that breaks must not take the run with it
            self.error = f"the nemesis stopped: {type(exc).__name__}: {exc}"

    def _one(self, fault: Fault) -> None:
        """Apply one fault for its duration (or until it has done all it will), then undo it."""
        start = time.monotonic()
        self._landed = []
        detail, undo = self._begin(fault)
        if self._landed_at is not None:
            start, self._landed_at = self._landed_at, None  # when it hit its call
        until = start + fault.duration
        while time.monotonic() < until and not self._stop.is_set():
            if self._ended is not None and self._ended():
                break  # a lost reply has been lost: the fault is over
            self._stop.wait(min(0.005, max(until - time.monotonic(), 0.0)))
        self._ended = None
        undo()
        if isinstance(self._faults, Planner) and fault.target:
            if self._landed:
                self._faults.landed(fault)
            else:
                self._faults.missed(fault)
        self._record(Applied(fault, start, time.monotonic(), detail, tuple(self._landed)))

    def _volley(self, faults: Sequence[Fault]) -> list[Fault]:
        """Instant aimed faults kept armed, each waiting (up to :data:`AIM_WAIT`) for its own
        kind of call: as one lands or gives up, the planner's next short cell takes its
        place, up to :data:`VOLLEY` at a time; each is logged on its own. Returns the fault
        that ended the volley (the planner's next is not an instant aimed one), if any."""
        assert isinstance(self._faults, Planner)
        planner = self._faults
        if self._aimer is None or self._network is None or not self._network.proxies:
            now = time.monotonic()
            for fault in faults:
                planner.missed(fault)
                self._record(Applied(fault, now, now, "no aim on the network"))
            return []
        aimer = self._aimer
        armed: dict[int, tuple[Fault, float]] = {}
        leftover: list[Fault] = []

        def arm(batch: Sequence[Fault]) -> None:
            for fault in batch:
                trigger = _trigger(fault)
                if not fault.target or fault.kind not in INSTANT or trigger is None:
                    leftover.append(fault)
                    return
                aimer.arm(trigger)
                armed[fault.number] = (fault, time.monotonic())

        arm(faults)
        while armed and not self._stop.is_set():
            now = time.monotonic()
            for number, (fault, since) in list(armed.items()):
                hits = aimer.fired(number)
                if not hits and now - since < AIM_WAIT:
                    continue
                aimer.disarm(number)
                hits = hits or aimer.fired(number)
                del armed[number]
                if hits:
                    planner.landed(fault)
                    self._record(Applied(fault, hits[0].t, hits[0].t, hits[0].describe(),
                                         (Landing.of(hits[0]),)))
                else:
                    planner.missed(fault)
                    self._record(Applied(fault, since, now,
                                         f"no {_words(fault)} within {AIM_WAIT:g} s"))
            if not leftover and len(armed) < VOLLEY:
                with contextlib.suppress(StopIteration):  # the plan ended: let these land
                    arm(planner.volley(self.tally(), room=VOLLEY - len(armed),
                                       armed=[(f.kind, f.target) for f, _ in armed.values()]))
            time.sleep(0.001)
        for number, (fault, since) in armed.items():  # stopped: never landed
            aimer.disarm(number)
            planner.missed(fault)
            self._record(Applied(fault, since, time.monotonic(), "the faults stopped first"))
        return leftover

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
        if fault.target:
            return self._aimed(fault)
        if fault.kind == "pause":
            return self._pause(fault)
        if fault.kind.startswith(DEPLOYMENT_PREFIX):
            return self._deployment(fault)
        proxies = self._network.proxies if self._network is not None else []
        if not proxies:
            return "no proxy to act on", _nothing
        if fault.kind in PRECISE_UNAIMED:
            self._note_in_flight(proxies, fault)
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

    def _note_in_flight(self, proxies: Sequence[Any], fault: Fault) -> None:
        """The calls in flight on the connections an unaimed network fault may hit (as the
        aim sees them when it begins): every live connection's, or the busy ones'."""
        if self._aimer is None:
            return
        for proxy in proxies:
            conns = proxy.connections() if fault.every else proxy.busy_connections()
            for conn in conns:
                found = self._aimer.in_flight(proxy.name, conn)
                if found is not None:
                    worker, seq, method = found
                    self._landed.append(Landing(worker, seq, method))

    # -- aimed faults -----------------------------------------------------------------------
    def _aimed(self, fault: Fault) -> tuple[str, Callable[[], None]]:
        """A fault aimed at a kind of call (``fault.target``): a pause of a worker the call
        board shows inside one, or a trigger armed on the proxies' aim, which fires on the
        call's request or reply (``faults.aim``). Waits up to :data:`AIM_WAIT` for it."""
        if fault.kind == "pause":
            return self._pause(fault, methods=fault.methods)
        if self._aimer is None or self._network is None or not self._network.proxies:
            return "no aim on the network (no proxy, or no call board)", _nothing
        trigger = _trigger(fault)
        if trigger is None:
            return f"{fault.kind} cannot be aimed", _nothing
        self._aimer.arm(trigger)
        until = time.monotonic() + AIM_WAIT
        hits: list[Hit] = []
        while not self._stop.is_set() and time.monotonic() < until:
            hits = self._aimer.fired(fault.number)
            if hits:
                break
            time.sleep(0.001)
        self._aimer.disarm(fault.number)
        hits = hits or self._aimer.fired(fault.number)
        if not hits:
            return f"no {_words(fault)} within {AIM_WAIT:g} s", _nothing
        hit = hits[0]
        self._landed.append(Landing.of(hit))
        self._landed_at = hit.t
        if fault.kind != "blackhole":
            self._ended = lambda: True  # done the moment it fired
            return hit.describe(), _nothing
        proxies = {p.name: p for p in self._network.proxies}

        def undo() -> None:
            proxy = proxies.get(hit.proxy)
            if proxy is not None:
                for direction in ("upstream", "downstream"):
                    proxy.remove_toxic(f"stall-c{hit.connection}-{direction}")

        return f"blackhole from the {hit.describe()}", undo

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

    def _pause(self, fault: Fault, methods: frozenset[str] = frozenset()
               ) -> tuple[str, Callable[[], None]]:
        """SIGSTOP a worker: one inside a call of ``methods`` (an aimed pause; the call
        board says which call each worker is in), else one inside a write if one shows up
        within 0.3 s, else any; SIGCONT when undone."""
        if methods:
            inside = self._inside(fault, methods, AIM_WAIT)
            if inside is None:
                return f"no worker inside a {_words(fault)} within {AIM_WAIT:g} s", _nothing
        else:
            inside = self._writer(fault)
        live = sorted(self._pausable().items())
        if inside is None and not live:
            return "no worker to pause", _nothing
        index, pid = inside if inside is not None else live[fault.pick % len(live)]
        with self._lock:
            self._paused.add(pid)
        _signal(pid, signal.SIGSTOP)
        call = self._calls().get(index) if self._calls is not None else None
        if call is not None and call[0] == pid:
            self._landed.append(Landing(index, call[1], call[2], aimed=bool(methods)))

        def undo() -> None:
            with self._lock:
                self._paused.discard(pid)
            _signal(pid, signal.SIGCONT)

        where = " inside a write" if inside is not None else ""
        return f"paused worker {index} (pid {pid}){where}", undo

    def _inside(self, fault: Fault, methods: frozenset[str], wait: float
                ) -> tuple[int, int] | None:
        """(index, pid) of a worker the call board shows inside a call of ``methods``,
        waiting up to ``wait`` seconds (``fault.pick`` chooses among several)."""
        if self._calls is None:
            return None
        until = time.monotonic() + wait
        while not self._stop.is_set():
            found = sorted((i, pid) for i, (pid, _, method) in self._calls().items()
                           if matches_kind(method, methods))
            if found:
                return found[fault.pick % len(found)]
            if time.monotonic() >= until:
                return None
            time.sleep(0.001)
        return None

    def _writer(self, fault: Fault) -> tuple[int, int] | None:
        """(index, pid) of a worker inside a write call, waiting up to 0.3 s for one
        (``fault.pick`` chooses among several); None without ``writing`` or when none
        showed up."""
        if self._calls is not None:
            return self._inside(fault, frozenset(WRITES), 0.3)
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


def _words(fault: Fault) -> str:
    """The calls an aimed fault waits for, in words ("save", "read")."""
    return call_words(fault.target)


def _trigger(fault: Fault) -> Trigger | None:
    """The proxy trigger of an aimed network fault (None: the kind is not aimed so)."""
    methods = fault.methods
    if fault.kind == "lost-reply":  # the server ran the commit; the client never hears
        return Trigger(fault.number, fault.kind, "drop", "downstream", methods, "deep")
    if fault.kind == "lost-request":  # the commit (or a statement before it) never arrives
        return Trigger(fault.number, fault.kind, "drop", "upstream", methods, "last",
                       back=fault.back)
    if fault.kind == "reset":  # a reset inside the call, before one of its requests
        return Trigger(fault.number, fault.kind, "reset",
                       "upstream" if fault.pick % 2 else "downstream", methods, "any")
    if fault.kind == "blackhole":  # the request vanishes, and so does everything after it
        return Trigger(fault.number, fault.kind, "stall", "upstream", methods, "last")
    return None


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited (or was killed) meanwhile
        os.kill(pid, sig)
