"""The checker's input: a history of store calls, each with its arguments, outcome and times.

A :class:`Call` is one store call as a process saw it: the protocol method, every
argument (model objects), how it ended and when. ``t_invoke`` is a stamp taken no
later than the real start of the call, ``t_return`` one taken no earlier than its
real end (``stress.log`` stamps them so), both on one clock shared by every
process (``time.monotonic()``, system-wide on Linux and macOS). Widening a call's
interval only adds orders the checker must try, so imprecise stamps can never
make a correct store fail.

Outcomes:

* ``OK`` -- it returned ``result``; its effect happened at one instant between its
  invoke and its return (its *linearization point*);
* ``CONFLICT`` -- ``save`` raised ``ConcurrencyConflict``: it had no effect, and at
  its point the task was missing or at another version;
* ``FAILED`` -- it raised anything else (``StoreError``: a lost connection, a
  duplicate id, a closed store): its effect is unknown -- it may take effect at
  any instant after its invoke, even after it raised, or never;
* ``PENDING`` -- it never returned (the worker was SIGKILLed or hit the deadline):
  the same as ``FAILED``.

``calls_from_logs`` and ``read_history`` turn the harness's logs of calls made
with ``record=True`` (``WorkerContext.call``) into calls.
"""

from __future__ import annotations

import contextlib
import enum
import gc
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..calls import decode_args, decode_value
from ..log import Logs, Op, read_log_dir

__all__ = [
    "Call",
    "Outcome",
    "UnrecordedCalls",
    "calls_from_logs",
    "paused_gc",
    "read_history",
]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """No cyclic garbage collection meanwhile (restored afterwards).

    Decoding and checking a history allocate hundreds of thousands of small objects
    that all stay alive; every collection would walk them all again for nothing
    (it doubles the time of a 10k-call check). Nothing here makes reference cycles.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class Outcome(enum.Enum):
    """How a call ended; see the module docstring."""

    OK = "ok"
    CONFLICT = "conflict"
    FAILED = "failed"
    PENDING = "pending"


@dataclass(frozen=True, slots=True, eq=False)
class Call:
    """One store call of a history (compared by identity)."""

    id: int
    process: str
    method: str
    args: Mapping[str, Any]
    outcome: Outcome
    t_invoke: float
    t_return: float | None = None
    result: Any = None
    error: str | None = None
    #: The worker log's sequence number and round, when the call comes from a log.
    seq: int | None = None
    round: int | None = None
    #: The log line pair it was read from (the timeline renders from it), if any.
    source: Op | None = field(default=None, repr=False)

    @property
    def definite(self) -> bool:
        """Did it return (a value, or a save's conflict), so its effect is known and
        bounded? (A conflict from any other method is an error like any other.)"""
        return self.outcome is Outcome.OK or (self.outcome is Outcome.CONFLICT
                                              and self.method == "save")

    @property
    def end(self) -> float:
        """The latest instant its effect can take place: its return, or never (inf)."""
        if self.definite and self.t_return is not None:
            return self.t_return
        return math.inf

    def precedes(self, other: Call) -> bool:
        """Real-time order: this call returned before ``other`` was invoked."""
        return self.end < other.t_invoke

    @property
    def label(self) -> str:
        """``w1 #12`` -- the worker and its log sequence number (or the call id)."""
        return f"{self.process} #{self.seq if self.seq is not None else self.id}"


class UnrecordedCalls(ValueError):
    """The log holds store calls made without ``record=True``: the history is incomplete.

    A history with unknown writes cannot be checked soundly (a read could show a
    write the checker never saw), so the reader refuses it rather than guess.
    """

    def __init__(self, ops: Sequence[tuple[str, Op]]) -> None:
        self.ops = list(ops)
        shown = ", ".join(f"{prefix}w{o.worker} #{o.seq} {o.op}" for prefix, o in self.ops[:5])
        more = f" and {len(self.ops) - 5} more" if len(self.ops) > 5 else ""
        super().__init__(
            f"{len(self.ops)} store call(s) were logged without record=True ({shown}{more}); "
            "the checker needs every call's full arguments (WorkerContext.call(record=True) or "
            "ctx.record_calls = True)")


def _outcome(op: Op, method: str) -> Outcome:
    if op.pending:
        return Outcome.PENDING
    if op.ok:
        return Outcome.OK
    if op.conflict and method == "save":
        return Outcome.CONFLICT
    return Outcome.FAILED  # a conflict from any other method is just an error


def _error(op: Op) -> str | None:
    if op.error is None:
        return None
    kind = str(op.error.get("type") or "error")
    message = op.error.get("message")
    return kind if not message else f"{kind}: {message}"


#: Calls that change nothing any other instance can see: never part of a history.
#: Calls that change nothing another process sees: a worker closing or opening its own
#: store instance.
_LOCAL_ONLY = frozenset({"close", "open"})


def calls_from_logs(groups: Iterable[tuple[str, Logs]] | Logs, *,
                    strict: bool = True) -> list[Call]:
    """The history the logs record, in invoke order.

    ``groups`` is ``Logs`` (one group of workers) or ``read_log_dir``'s list of
    (prefix, Logs). Every store call must have been logged with ``record=True``;
    ``close`` and ``open`` are exempt (they change nothing another process sees). Otherwise
    :class:`UnrecordedCalls` is raised -- unless ``strict=False``, which skips the
    unrecorded calls (for a look at a partial history only: a verdict on it is not
    sound).
    """
    pairs = [("", groups)] if isinstance(groups, Logs) else list(groups)
    with paused_gc():
        return _calls(pairs, strict)


def _calls(pairs: list[tuple[str, Logs]], strict: bool) -> list[Call]:
    calls: list[Call] = []
    missing: list[tuple[str, Op]] = []
    for prefix, logs in pairs:
        for op in logs.all_ops():
            if op.call is None:
                if op.op not in _LOCAL_ONLY:
                    missing.append((prefix, op))
                continue
            method = str(op.call["method"])
            if method in _LOCAL_ONLY:
                continue
            outcome = _outcome(op, method)
            calls.append(Call(
                id=0, process=f"{prefix}w{op.worker}", method=method,
                args=decode_args(op.call.get("args") or {}), outcome=outcome,
                t_invoke=op.t_invoke, t_return=op.t_return,
                result=decode_value(op.result) if outcome is Outcome.OK and op.has_result
                else None,
                error=_error(op), seq=op.seq, round=op.round, source=op))
    if missing and strict:
        raise UnrecordedCalls(missing)
    calls.sort(key=lambda c: (c.t_invoke, c.process, c.seq or 0))
    return [_renumber(c, i) for i, c in enumerate(calls)]


def _renumber(call: Call, index: int) -> Call:
    return Call(id=index, process=call.process, method=call.method, args=call.args,
                outcome=call.outcome, t_invoke=call.t_invoke, t_return=call.t_return,
                result=call.result, error=call.error, seq=call.seq, round=call.round,
                source=call.source)


def read_history(logdir: str | Path, *, strict: bool = True) -> list[Call]:
    """The history of a kept run's log folder (every group of workers)."""
    with paused_gc():
        return calls_from_logs(read_log_dir(logdir), strict=strict)
