"""The call board: which store call each worker is inside right now, readable by the parent.

Why it exists: the nemesis aims its faults at calls -- "lose the reply of the next save
that committed", "kill this worker between two requests of one write" -- and the fault
proxy must decide, chunk by chunk and in microseconds, which worker's which call a
chunk on a connection belongs to. The worker logs (``stress.log``) say it too, but as
JSON lines to parse; the board is a small file in the run's log folder that every
worker maps into memory (``mmap``), one fixed-size slot per worker: the call it is in
(sequence number, protocol method, since when) and the outcome of the last calls it
finished. Writing a slot costs a worker about a microsecond per call; reading one costs
the parent no system call at all.

A slot is written by its worker only, read by the parent only, under a sequence lock:
the writer makes the slot's version odd, writes, makes it even again; a reader that saw
an odd version, or a different one after reading, reads again. So a reader never takes
half of one call and half of the next.

The board is advisory evidence for aiming and counting faults, never for a verdict: the
checker reads the logs, which a SIGKILL cannot tear.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from ..faults.plan import QUALIFIERS
from ..protocol import PROTOCOL_METHODS

__all__ = [
    "BOARD_NAME",
    "METHODS",
    "Board",
    "BoardWriter",
    "Finished",
    "Slot",
    "method_code",
]

#: The board's file name in a group's log folder.
BOARD_NAME = "board.bin"
#: Method codes: the protocol's methods, then "another call" (a scenario's own step, such
#: as reopening a store instance, logged like a call but not one of the 14).
METHODS: tuple[str, ...] = (*PROTOCOL_METHODS, "other")
#: Finished calls each slot remembers: enough that a pooled connection's previous call is
#: still among them when the connection is next used (the aim learns each kind of call's
#: requests from how its calls ended: a ring of 16 forgot most of a rare kind's).
RING = 240

#: Outcome codes of a finished call.
OK, RAISED, CONFLICT = 1, 2, 3
_OUTCOMES = {OK: "returned", RAISED: "raised", CONFLICT: "conflict"}

# version, pid, seq, method, in_call, t_invoke, ring head; then RING x (seq, outcome).
_HEAD = struct.Struct("<qqqqqdq")
_ENTRY = struct.Struct("<qq")
SLOT_BYTES = 4096
assert _HEAD.size + RING * _ENTRY.size <= SLOT_BYTES


def method_code(method: str, qualifier: str | None = None) -> int:
    """The board's code of a call's kind: its method (an unknown name: "other") and the
    workload's qualifier, if any (``faults.plan.QUALIFIERS``)."""
    try:
        code = METHODS.index(method)
    except ValueError:
        code = len(METHODS) - 1
    if qualifier:
        code += len(METHODS) * (1 + QUALIFIERS.index(qualifier))
    return code


def _kind(code: int) -> str | None:
    """The kind of call a code stands for (``create`` or ``create:dup``)."""
    index, method = divmod(code, len(METHODS))
    if not 0 <= code < len(METHODS) * (1 + len(QUALIFIERS)):
        return None
    return METHODS[method] if index == 0 else f"{METHODS[method]}:{QUALIFIERS[index - 1]}"


@dataclass(frozen=True, slots=True)
class Finished:
    """A call a worker finished: its sequence number and how it ended."""

    seq: int
    outcome: str  # "returned", "raised" or "conflict"


@dataclass(frozen=True, slots=True)
class Slot:
    """One worker's slot as read: its pid, the call it is in (``seq`` and ``method`` of the
    last call it started -- its kind of call, ``create`` or ``create:dup`` --, ``in_call``
    whether it is still inside it) and the calls it finished last, newest first."""

    pid: int
    seq: int
    method: str | None
    in_call: bool
    t_invoke: float
    #: The ring of finished calls as read (bytes) and its head: decoded only when asked,
    #: since the proxy reads a slot on every chunk and asks for an outcome seldom.
    ring: bytes = b""
    head: int = 0

    @property
    def finished(self) -> tuple[Finished, ...]:
        """The calls it finished last, newest first."""
        entries = [_ENTRY.unpack_from(self.ring, k * _ENTRY.size) for k in range(RING)]
        return tuple(Finished(s, _OUTCOMES.get(o, "raised"))
                     for s, o in (entries[(self.head - 1 - k) % RING] for k in range(RING))
                     if s > 0)

    def outcome(self, seq: int) -> str | None:
        """How call ``seq`` ended, if the slot still remembers it."""
        for k in range(RING):
            s, o = _ENTRY.unpack_from(self.ring, ((self.head - 1 - k) % RING) * _ENTRY.size)
            if s == seq:
                return _OUTCOMES.get(o, "raised")
        return None


def _create(path: Path, slots: int) -> None:
    with path.open("wb") as f:
        f.truncate(max(slots, 1) * SLOT_BYTES)


class Board:
    """The parent's side: creates the file (one slot per worker index) and reads it."""

    def __init__(self, path: Path, slots: int) -> None:
        self.path = path
        self.slots = max(slots, 1)
        _create(path, self.slots)
        with path.open("r+b") as f:  # the map keeps its own handle on the file
            self._map = mmap.mmap(f.fileno(), self.slots * SLOT_BYTES)

    def read(self, index: int) -> Slot | None:
        """Worker ``index``'s slot, or None if it never wrote it (or the board is closed)."""
        if not 0 <= index < self.slots or self._map.closed:
            return None
        base = index * SLOT_BYTES
        for _ in range(100):
            try:
                version, pid, seq, code, in_call, t_invoke, head = _HEAD.unpack_from(
                    self._map, base)
                ring = self._map[base + _HEAD.size: base + _HEAD.size + RING * _ENTRY.size]
                again = _HEAD.unpack_from(self._map, base)[0]
            except ValueError:  # closed meanwhile
                return None
            if version % 2 == 0 and version == again:
                break
        else:
            return None  # a writer kept it busy (or died mid-write): nothing reliable
        if version == 0:
            return None
        return Slot(pid, seq, _kind(code), bool(in_call), t_invoke, ring, head)

    def pids(self) -> dict[int, int]:
        """Worker index -> pid, for every worker that has written its slot."""
        out = {}
        for i in range(self.slots):
            slot = self.read(i)
            if slot is not None and slot.pid > 0:
                out[i] = slot.pid
        return out

    def close(self) -> None:
        if not self._map.closed:
            self._map.close()


class BoardWriter:
    """A worker's side: its own slot, written around every call it makes."""

    def __init__(self, path: str | Path, index: int) -> None:
        with Path(path).open("r+b") as f:  # the map keeps its own handle on the file
            self._map = mmap.mmap(f.fileno(), 0)
        self._base = index * SLOT_BYTES
        if self._base + SLOT_BYTES > len(self._map):
            raise ValueError(f"the call board has no slot {index}")
        self._version = 0
        self._pid = os.getpid()
        self._seq = 0
        self._code = -1
        self._in_call = 0
        self._t = 0.0
        self._head = 0
        self._write()

    def _write(self, entry: tuple[int, int] | None = None) -> None:
        self._version += 1  # odd: a reader retries
        _HEAD.pack_into(self._map, self._base, self._version, self._pid, self._seq,
                        self._code, self._in_call, self._t, self._head)
        if entry is not None:
            _ENTRY.pack_into(self._map, self._base + _HEAD.size
                             + ((self._head - 1) % RING) * _ENTRY.size, *entry)
        self._version += 1
        _HEAD.pack_into(self._map, self._base, self._version, self._pid, self._seq,
                        self._code, self._in_call, self._t, self._head)

    def invoke(self, seq: int, method: str, qualifier: str | None = None) -> None:
        """The worker starts call ``seq`` of ``method`` (``qualifier``: the kind of call the
        workload says it is, ``faults.plan.QUALIFIERS``)."""
        self._seq, self._code, self._in_call, self._t = seq, method_code(method, qualifier), \
            1, time.monotonic()
        self._write()

    def result(self, seq: int, *, ok: bool, conflict: bool = False) -> None:
        """Call ``seq`` ended: returned (``ok``), or raised (a ``conflict`` or another error)."""
        self._in_call = 0
        self._head += 1
        self._write((seq, OK if ok else CONFLICT if conflict else RAISED))

    def close(self) -> None:
        if not self._map.closed:
            self._map.close()
