"""Range checks for the answers that count across tasks: ``counts()`` and ``prune``'s number.

These answers depend on every task at one instant, which no partition sees. What
each task *may* be at that instant is bounded from real-time order alone: the
task's value at a call's point is the one written by the last write that took
effect before it (or the initial one), and that write

* was invoked before the call returned, and
* is not followed, in real time, by a write that certainly took effect (a create
  or save that returned) and returned before the call was invoked.

So every write meeting both conditions is a *candidate*, and the value at the
point is one of the candidates' values (a prune's is "missing"; the initial value
is a candidate only when no certain write came before the call). Then for each
status ``s``::

    #{tasks whose every candidate is s} <= counts()[s] <= #{tasks with some candidate s}

and a prune that returned ``n`` with ``keep_terminal=k`` satisfies
``max(certain - k, 0) <= n <= max(possible - k, 0)`` over the terminal tasks. Both
bounds are necessary for any linearization, so a correct store never fails them
(sound); they cannot see what a finer reasoning across tasks would.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ...model import TaskStatus
from ...oracle import Model
from .history import Call, Outcome
from .partition import possibly_terminal

__all__ = ["Candidates", "RangeProblem", "check_ranges"]

Value = TaskStatus | None


@dataclass(slots=True)
class _Write:
    call: Call
    value: Value
    t_invoke: float
    end: float


@dataclass(slots=True)
class RangeProblem:
    """A counts() or prune answer outside its bounds; ``calls`` show why."""

    kind: str
    call: Call
    message: str
    calls: list[Call]


class Candidates:
    """For any call: the values each task may have at its point (see the docstring)."""

    def __init__(self, calls: Sequence[Call], initial: Model | None) -> None:
        terminal = possibly_terminal(calls, initial)
        prunes = [c for c in calls if c.method == "prune"
                  and not (c.outcome is Outcome.OK and c.result == 0)]
        writes: dict[str, list[_Write]] = defaultdict(list)
        self.initial: dict[str, Value] = {}
        if initial is not None:
            for t, snap in initial.tasks.items():
                self.initial[t] = snap.status
                writes.setdefault(t, [])
        for c in calls:
            if c.method in ("create", "save") and c.outcome is not Outcome.CONFLICT:
                snap = c.args["snapshot"]
                writes[snap.task_id].append(_Write(c, snap.status, c.t_invoke, c.end))
        for t in terminal:
            writes[t].extend(_Write(c, None, c.t_invoke, c.end) for c in prunes)
        self.tasks = sorted(writes)
        self._finite: dict[str, list[_Write]] = {}
        self._starts: dict[str, list[float]] = {}
        self._longest: dict[str, float] = {}
        self._open: dict[str, list[_Write]] = {}
        self._certain: dict[str, list[_Write]] = {}
        self._certain_ends: dict[str, list[float]] = {}
        self._certain_max_inv: dict[str, list[float]] = {}
        for t, ws in writes.items():
            finite = sorted((w for w in ws if w.end != math.inf), key=lambda w: w.t_invoke)
            self._finite[t] = finite
            self._starts[t] = [w.t_invoke for w in finite]
            self._longest[t] = max((w.end - w.t_invoke for w in finite), default=0.0)
            self._open[t] = [w for w in ws if w.end == math.inf]
            certain = sorted((w for w in ws if w.call.outcome is Outcome.OK
                              and w.call.method in ("create", "save")), key=lambda w: w.end)
            self._certain[t] = certain
            self._certain_ends[t] = [w.end for w in certain]
            running = -math.inf
            prefix = []
            for w in certain:
                running = max(running, w.t_invoke)
                prefix.append(running)
            self._certain_max_inv[t] = prefix

    def at(self, call: Call, task: str) -> tuple[set[Value], list[Call]]:
        """The values ``task`` may have at ``call``'s point, and the writes they come from
        (the call itself is never its own candidate)."""
        k = bisect.bisect_left(self._certain_ends[task], call.t_invoke)
        floor = self._certain_max_inv[task][k - 1] if k else -math.inf
        values: set[Value] = set()
        sources: list[Call] = []
        if k == 0:
            values.add(self.initial.get(task))
        stop = call.t_return if call.t_return is not None else math.inf
        finite = self._finite[task]
        j = bisect.bisect_right(self._starts[task], stop)
        lowest = floor - self._longest[task]
        for w in reversed(finite[:j]):
            if w.t_invoke < lowest:
                break
            if w.end >= floor and w.call is not call:
                values.add(w.value)
                sources.append(w.call)
        for w in self._open[task]:
            if w.t_invoke <= stop and w.call is not call:
                values.add(w.value)
                sources.append(w.call)
        return values, sources


def _shown(tasks: Sequence[str], limit: int = 6) -> str:
    more = f" and {len(tasks) - limit} more" if len(tasks) > limit else ""
    return ", ".join(repr(t) for t in tasks[:limit]) + more


def check_ranges(calls: Sequence[Call], initial: Model | None = None) -> list[RangeProblem]:
    """Every counts() and prune answer outside its bounds."""
    counted = [c for c in calls if c.outcome is Outcome.OK and (
        c.method == "counts" or (c.method == "prune" and isinstance(c.result, int)))]
    if not counted:
        return []
    cands = Candidates(calls, initial)
    problems: list[RangeProblem] = []
    for c in counted:
        table = {t: cands.at(c, t) for t in cands.tasks}
        if c.method == "counts":
            problems.extend(_counts(c, table))
        else:
            problem = _prune(c, table)
            if problem is not None:
                problems.append(problem)
    return problems


def _counts(c: Call, table: dict[str, tuple[set[Value], list[Call]]]) -> list[RangeProblem]:
    got: dict[TaskStatus, int] = c.result or {}
    out = []
    for status in TaskStatus:
        n = got.get(status, 0)
        certain = sorted(t for t, (vals, _) in table.items() if vals == {status})
        possible = sorted(t for t, (vals, _) in table.items() if status in vals)
        if n < len(certain):
            why = [w for t in certain for w in table[t][1]][:8]
            out.append(RangeProblem(
                "counts-range", c,
                f"counts() returned {n} {status.value}, but {len(certain)} task(s) were "
                f"{status.value} at every instant of the call: {_shown(certain)}", [c, *why]))
        elif n > len(possible):
            out.append(RangeProblem(
                "counts-range", c,
                f"counts() returned {n} {status.value}, but at most {len(possible)} task(s) "
                f"could have been {status.value} at any instant of the call"
                + (f": {_shown(possible)}" if possible else ""), [c]))
    return out


def _prune(c: Call, table: dict[str, tuple[set[Value], list[Call]]]) -> RangeProblem | None:
    keep = max(int(c.args.get("keep_terminal", 0)), 0)
    certain = sorted(t for t, (vals, _) in table.items()
                     if vals and all(v is not None and v.is_terminal for v in vals))
    possible = sorted(t for t, (vals, _) in table.items()
                      if any(v is not None and v.is_terminal for v in vals))
    lo, hi = max(len(certain) - keep, 0), max(len(possible) - keep, 0)
    n = int(c.result)
    if lo <= n <= hi:
        return None
    if n < lo:
        why = [w for t in certain for w in table[t][1]][:8]
        return RangeProblem("prune-count", c, (
            f"prune(keep_terminal={keep}) returned {n}, but {len(certain)} task(s) were "
            f"terminal at every instant of the call ({_shown(certain)}), so at least {lo} had "
            "to go"), [c, *why])
    return RangeProblem("prune-count", c, (
        f"prune(keep_terminal={keep}) returned {n}, but at most {len(possible)} task(s) could "
        f"have been terminal at any instant of the call, so at most {hi} could go"), [c])
