"""The aim: which call a chunk on a proxied connection belongs to, and faults fired at one.

A fault at a random instant mostly lands on an idle pooled connection, or on the read
before a write: a save whose COMMIT committed and whose reply was lost happened in about
one fault run of four. The nemesis needs to say "lose the reply of the next *save* that
committed", and the proxy must recognise that reply when it passes. The :class:`Aimer`
is the proxy's :class:`~chongming_conformance.faults.proxy.Interceptor` that does it,
knowing no wire protocol:

* **whose connection**: on its first chunk, a connection is mapped to the worker process
  holding its client end (``faults.peers``: the kernel's socket table), and that pid to
  a worker index through the call board (``stress.board``), on which every worker says
  which call it is in;
* **which call, which request**: an upstream chunk while the worker is inside call *S*
  belongs to *S*; a run of upstream chunks after a reply is one more *request* of that
  call (its round trip *k*), and the downstream chunks after it its *reply*;
* **which request commits**: each call that returned is remembered with the number of
  requests it made on its connection; per method, the most common count among the calls
  that returned is that method's *last* round trip -- for a store that runs each call in
  one transaction, the COMMIT (a pool's check, ``BEGIN``, the statements, ``COMMIT``). So
  "the reply of the last round trip of a save" is the reply of a committed save, learned
  from the store itself;
* **a trigger** (:class:`Trigger`) is armed by the nemesis and fires once, on the first
  chunk it matches: a method (or several), a direction, the round trip (``"last"``, a
  number, or any), the workers it may hit. Firing decides the chunk's fate (drop it and
  close, reset, stall the connection, hold it back) and, for a crash, SIGKILLs the worker
  before the request leaves -- between two requests of one call. Each firing is a
  :class:`Hit`, the evidence of what the fault run exercised (``faults.coverage``).

Everything here runs on the proxy's event loop (``on_chunk``) or in the nemesis thread
(``arm``); a lock keeps the two apart. Reading the board costs microseconds; mapping a new
connection to its process reads ``/proc`` once (about 2 ms).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from . import peers
from .plan import matches_kind
from .proxy import ChunkSeen, Decision, Interceptor
from .toxics import Direction

__all__ = ["Aimer", "Board", "Hit", "Trigger"]

#: How many times a connection's owner is looked up before it is taken as nobody's (a
#: connection the parent opened, or one whose owner exited).
_RESOLVE_TRIES = 3
#: The share of a method's calls a round-trip count needs to be its "deep" one.
DEEP_SHARE = 0.15

Action = Literal["drop", "reset", "stall", "hold", "kill"]


class Slot(Protocol):
    """A worker's slot on the call board (``stress.board.Slot``)."""

    @property
    def pid(self) -> int: ...
    @property
    def seq(self) -> int: ...
    @property
    def method(self) -> str | None: ...
    @property
    def in_call(self) -> bool: ...

    def outcome(self, seq: int) -> str | None: ...


class Board(Protocol):
    """What the aim reads of the call board (``stress.board.Board``, which the stress
    harness owns: the faults package never imports the harness)."""

    def read(self, index: int) -> Slot | None: ...

    def pids(self) -> dict[int, int]: ...


@dataclass(frozen=True, slots=True)
class Trigger:
    """A fault waiting for its call: fires once, on the first chunk that matches.

    ``methods``: the protocol methods it may hit (empty: any call); ``direction``:
    ``"upstream"`` fires on the first chunk of a request, ``"downstream"`` on the first
    chunk of a reply; ``round_trip``: ``"last"`` (the method's learned last round trip --
    the commit), ``"deep"`` (the last round trip of the longest calls a good share of its
    calls make -- the commit of a call that did something: a claim that leased, a prune
    that deleted), ``"any"``, a number (1 = the call's first request), or ``"between"``: the
    request ``2 + pick % (last - 1)`` of a call whose method makes ``last >= 2`` round
    trips -- between two requests of one call, consecutive picks reaching consecutive
    gaps (a method that makes one request never matches it); ``workers``: the
    worker indexes it may hit (empty: any); ``action``: what happens to the chunk (see
    :data:`~chongming_conformance.faults.proxy.Decision`; ``"kill"`` SIGKILLs the worker
    and drops the request; ``"hold"`` delays it ``hold`` seconds)."""

    number: int
    kind: str
    action: Action
    direction: Direction
    methods: frozenset[str] = frozenset()
    round_trip: int | Literal["last", "deep", "any", "between"] = "last"
    workers: frozenset[int] = frozenset()
    hold: float = 0.0
    pick: int = 0
    #: With ``round_trip="last"``: that many requests before the last (never before the
    #: first).
    back: int = 0


@dataclass(frozen=True, slots=True)
class Hit:
    """A trigger that fired: on which worker's which call (``seq`` in its log), at which
    round trip of how many the method usually makes, on which connection, when
    (``time.monotonic()``, the clock of the workers' logs)."""

    number: int
    kind: str
    method: str
    worker: int
    seq: int
    round_trip: int
    round_trips: int | None
    proxy: str
    connection: int
    direction: Direction
    t: float

    def describe(self) -> str:
        of = f"/{self.round_trips}" if self.round_trips else ""
        where = "reply" if self.direction == "downstream" else "request"
        return (f"{where} {self.round_trip}{of} of worker {self.worker}'s call #{self.seq} "
                f"({self.method}) on connection {self.connection}")


@dataclass(slots=True)
class _Track:
    """What the aimer knows of one proxied connection."""

    worker: int | None = None
    tries: int = 0
    seq: int | None = None
    method: str | None = None
    #: Requests the current call has made on this connection so far.
    round_trip: int = 0
    #: A request went up and no reply has come down yet.
    awaiting: bool = False


@dataclass(slots=True)
class _Learned:
    """Per kind of call: how many requests the calls that returned made on their connection
    -- and, apart, the ones that raised or reported a conflict: a kind whose calls never
    return (an insert of an id that exists always raises) is learned from those."""

    counts: dict[str, Counter[int]] = field(default_factory=dict)
    failed: dict[str, Counter[int]] = field(default_factory=dict)

    def add(self, method: str, round_trips: int, *, returned: bool = True) -> None:
        (self.counts if returned else self.failed).setdefault(
            method, Counter())[round_trips] += 1

    def _of(self, method: str) -> Counter[int] | None:
        return self.counts.get(method) or self.failed.get(method)

    def last(self, method: str) -> int | None:
        """The most common count (ties: the larger), or None before any call ended."""
        counter = self._of(method)
        if not counter:
            return None
        return max(counter.items(), key=lambda kv: (kv[1], kv[0]))[0]

    def deep(self, method: str) -> int | None:
        """The largest count at least :data:`DEEP_SHARE` of the calls made, or None: the
        commit of the calls that did something. A claim that leased nothing, or a prune
        that found nothing, stops a request or more before one that did."""
        counter = self._of(method)
        if not counter:
            return None
        total = sum(counter.values())
        return max(n for n, c in counter.items() if c >= DEEP_SHARE * total)


class Aimer(Interceptor):
    """The interceptor of every proxy of a fault run; see the module docstring."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._board: Board | None = None
        self._tracks: dict[tuple[str, int], _Track] = {}
        self._armed: list[Trigger] = []
        #: Per armed trigger: each worker's call seq when it was armed (older calls never
        #: match it).
        self._since: dict[int, dict[int, int]] = {}
        self._learned = _Learned()
        self.hits: list[Hit] = []
        #: Connections a "stall" left blackholed: (proxy name, connection id).
        self.stalled: list[tuple[str, int]] = []

    # -- the workers ---------------------------------------------------------------------------
    def attach(self, board: Board) -> None:
        """Aim at the workers of the group whose call board this is (a new group: new
        workers; the learned round trips stay, the store is the same)."""
        with self._lock:
            self._board = board
            self._tracks.clear()

    def detach(self) -> None:
        with self._lock:
            self._board = None
            self._armed.clear()

    # -- the nemesis's side --------------------------------------------------------------------
    def arm(self, trigger: Trigger) -> None:
        """Arm ``trigger`` for the calls that start from now on: the call each worker is
        inside at this moment never matches (its requests so far were not counted against
        the trigger, so a round trip it has passed would bias which one is hit)."""
        with self._lock:
            board = self._board
            if board is not None:
                now: dict[int, int] = {}
                for index in board.pids():
                    slot = board.read(index)
                    if slot is not None:
                        now[index] = slot.seq
                self._since[trigger.number] = now
            self._armed.append(trigger)

    def disarm(self, number: int) -> None:
        """Forget the triggers of fault ``number`` that have not fired."""
        with self._lock:
            self._armed = [t for t in self._armed if t.number != number]
            self._since.pop(number, None)

    def fired(self, number: int) -> list[Hit]:
        """The hits of fault ``number`` so far."""
        with self._lock:
            return [h for h in self.hits if h.number == number]

    def round_trips(self, method: str) -> int | None:
        """The learned last round trip of ``method`` (None: no call of it returned yet)."""
        with self._lock:
            return self._learned.last(method)

    def learned(self) -> dict[str, int]:
        """Every method's learned last round trip, for the report."""
        with self._lock:
            found = {m: self._learned.last(m)
                     for m in {*self._learned.counts, *self._learned.failed}}
        return {m: n for m, n in sorted(found.items()) if n is not None}

    def in_flight(self, proxy: str, connection: int) -> tuple[int, int, str] | None:
        """(worker, seq, method) of the call connection ``connection`` of ``proxy`` carries
        now -- a request went up and its reply has not all come down -- or None."""
        with self._lock:
            track = self._tracks.get((proxy, connection))
            board = self._board
            if track is None or track.worker is None or track.seq is None or board is None:
                return None
            slot = board.read(track.worker)
        if slot is None or not slot.in_call or slot.seq != track.seq or track.method is None:
            return None
        return track.worker, track.seq, track.method

    # -- the proxy's side ----------------------------------------------------------------------
    def on_close(self, proxy: str, connection: int) -> None:
        with self._lock:
            track = self._tracks.pop((proxy, connection), None)
            if track is not None:
                self._finish(track)

    def on_chunk(self, chunk: ChunkSeen) -> Decision:
        with self._lock:
            board = self._board
            if board is None:
                return None
            key = (chunk.proxy, chunk.connection)
            track = self._tracks.get(key)
            if track is None:
                track = self._tracks[key] = _Track()
            if track.worker is None and track.tries < _RESOLVE_TRIES and chunk.peer is not None:
                track.tries += 1
                track.worker = _owner(board, chunk.peer, chunk.listening)
            if track.worker is None:
                return None
            slot = board.read(track.worker)
            if slot is None:
                return None
            if chunk.direction == "upstream":
                if not slot.in_call:
                    return None  # the driver's own traffic between calls (a pool's)
                if slot.seq != track.seq:
                    self._finish(track, slot.outcome(track.seq) if track.seq else None)
                    track.seq, track.method = slot.seq, slot.method
                    track.round_trip, track.awaiting = 0, False
                if track.awaiting:
                    return None  # more of the same request
                track.round_trip += 1
                track.awaiting = True
            else:
                if not track.awaiting or track.seq is None:
                    return None  # more of the same reply, or nothing asked
                track.awaiting = False
            return self._match(chunk, track, slot.pid)

    # -- inside the lock -----------------------------------------------------------------------
    def _finish(self, track: _Track, outcome: str | None = None) -> None:
        """The call ``track`` carried is over: learn its round trips if it ended on a live
        connection (one a fault closed tells nothing of the kind's usual requests)."""
        if outcome is not None and track.method is not None and track.round_trip > 0:
            self._learned.add(track.method, track.round_trip, returned=outcome == "returned")

    def _match(self, chunk: ChunkSeen, track: _Track, pid: int) -> Decision:
        method = track.method or "other"
        for trigger in self._armed:
            if trigger.direction != chunk.direction:
                continue
            if trigger.methods and not matches_kind(method, trigger.methods):
                continue
            if trigger.workers and track.worker not in trigger.workers:
                continue
            assert track.worker is not None and track.seq is not None
            if track.seq <= self._since.get(trigger.number, {}).get(track.worker, 0):
                continue  # a call already under way when the trigger was armed
            learned = self._learned.last(method)
            if trigger.round_trip == "last":
                if learned is None or track.round_trip != max(learned - trigger.back, 1):
                    continue
            elif trigger.round_trip == "deep":
                deep = self._learned.deep(method)
                if deep is None or track.round_trip != deep:
                    continue
            elif trigger.round_trip == "between":
                if learned is None or learned < 2 or \
                        track.round_trip != 2 + trigger.pick % (learned - 1):
                    continue
            elif trigger.round_trip != "any" and track.round_trip != trigger.round_trip:
                continue
            self._armed.remove(trigger)
            self._since.pop(trigger.number, None)
            self.hits.append(Hit(trigger.number, trigger.kind, method, track.worker, track.seq,
                                 track.round_trip, learned, chunk.proxy, chunk.connection,
                                 chunk.direction, time.monotonic()))
            return self._act(trigger, chunk, pid)
        return None

    def _act(self, trigger: Trigger, chunk: ChunkSeen, pid: int) -> Decision:
        if trigger.action == "kill":
            _kill(pid)
            return "drop"  # the request never leaves: the call stops between two requests
        if trigger.action == "hold":
            return float(trigger.hold)
        if trigger.action == "stall":
            self.stalled.append((chunk.proxy, chunk.connection))
        return trigger.action


def _owner(board: Board, peer: tuple[str, int], listening: tuple[str, int]) -> int | None:
    """The worker index whose process holds the client end of the connection (None: none)."""
    pids: Mapping[int, int] = board.pids()
    pid = peers.owner_pid(peer, listening, pids.values())
    if pid is None:
        return None
    return next((i for i, p in pids.items() if p == pid), None)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # it exited meanwhile
        os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))
