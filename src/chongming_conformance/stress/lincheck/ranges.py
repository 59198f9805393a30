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
(sound).

The per-status bounds let a task in flight be counted under its old status *and* its new
one -- a counter read between a writer's two index updates -- since each bound alone
allows it. At the linearization point every task has exactly one value, so the counts
must also be met *jointly*: each task whose value is uncertain gives one of its
candidates, and the statuses must come out exactly as counted (:func:`_joint`: a
matching of tasks to the counted statuses, by augmenting paths). Necessary too, so still
sound; it is what shows a count that holds a task twice.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ...oracle import Model
from ...protocol.model import TaskStatus
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


def _prefix_best(value: Value, writes: Sequence[_Write]
                 ) -> tuple[Value, list[float], list[tuple[float, int, float]]]:
    """Writes of one value by invoke: the invokes, and for each prefix the latest end (with
    its call's id) and the second latest (for when the latest is the asking call)."""
    mine = sorted(writes, key=lambda w: w.t_invoke)
    best: list[tuple[float, int, float]] = []
    top, top_id, second = -math.inf, -1, -math.inf
    for w in mine:
        if w.end >= top:
            top, top_id, second = w.end, id(w.call), top
        elif w.end > second:
            second = w.end
        best.append((top, top_id, second))
    return value, [w.t_invoke for w in mine], best


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
        # Prunes are writes of "missing" to every terminal task alike: one shared list.
        self._terminal = terminal
        self._prunes = [_Write(c, None, c.t_invoke, c.end) for c in prunes]
        for t in terminal:
            writes.setdefault(t, [])
        self.tasks = sorted(writes)
        self._writes = dict(writes)
        # The floor: the latest invoke among certain writes that returned before a time.
        self._certain_ends: dict[str, list[float]] = {}
        self._certain_max_inv: dict[str, list[float]] = {}
        # Per value: invokes ascending, and the two latest ends among writes invoked so far
        # (the second one in case the latest is the asking call itself).
        self._by_value: dict[str, list[tuple[Value, list[float], list[tuple[float, int,
                                                                            float]]]]] = {}
        for t, ws in writes.items():
            certain = sorted((w for w in ws if w.call.outcome is Outcome.OK
                              and w.call.method in ("create", "save")), key=lambda w: w.end)
            self._certain_ends[t] = [w.end for w in certain]
            running = -math.inf
            prefix = []
            for w in certain:
                running = max(running, w.t_invoke)
                prefix.append(running)
            self._certain_max_inv[t] = prefix
            self._by_value[t] = [_prefix_best(value, [w for w in ws if w.value == value])
                                 for value in {w.value for w in ws}]
        self._prune_best = _prefix_best(None, self._prunes)

    def _floor(self, call: Call, task: str) -> tuple[int, float]:
        k = bisect.bisect_left(self._certain_ends[task], call.t_invoke)
        return k, (self._certain_max_inv[task][k - 1] if k else -math.inf)

    def values(self, call: Call, task: str) -> set[Value]:
        """The values ``task`` may have at ``call``'s point (never from the call itself)."""
        k, floor = self._floor(call, task)
        out: set[Value] = set()
        if k == 0:
            out.add(self.initial.get(task))
        stop = call.t_return if call.t_return is not None else math.inf
        lists = self._by_value[task]
        if task in self._terminal:
            lists = [*lists, self._prune_best]
        for value, invokes, best in lists:
            j = bisect.bisect_right(invokes, stop)
            if not j:
                continue
            top, top_id, second = best[j - 1]
            if (top if top_id != id(call) else second) >= floor:
                out.add(value)
        return out

    def sources(self, call: Call, task: str) -> list[Call]:
        """The writes the values come from (for an explanation; a linear scan)."""
        _, floor = self._floor(call, task)
        stop = call.t_return if call.t_return is not None else math.inf
        writes = self._writes[task] + (self._prunes if task in self._terminal else [])
        return [w.call for w in writes
                if w.t_invoke <= stop and w.end >= floor and w.call is not call]


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
        table = {t: cands.values(c, t) for t in cands.tasks}
        if c.method == "counts":
            problems.extend(_counts(c, table, cands))
        else:
            problem = _prune(c, table, cands)
            if problem is not None:
                problems.append(problem)
    return problems


def _counts(c: Call, table: dict[str, set[Value]], cands: Candidates) -> list[RangeProblem]:
    out = _marginal(c, table, cands)
    if not out:
        out = _joint(c, table, cands)
    return out


def _marginal(c: Call, table: dict[str, set[Value]], cands: Candidates
              ) -> list[RangeProblem]:
    """Each status on its own: between the tasks certainly in it and the tasks maybe in it."""
    got: dict[TaskStatus, int] = c.result or {}
    certain_n: Counter[Value] = Counter()
    possible_n: Counter[Value] = Counter()
    for vals in table.values():
        if len(vals) == 1:
            certain_n.update(vals)
        possible_n.update(vals)
    out = []
    for status in TaskStatus:
        n = got.get(status, 0)
        if certain_n[status] <= n <= possible_n[status]:
            continue
        certain = sorted(t for t, vals in table.items() if vals == {status})
        possible = sorted(t for t, vals in table.items() if status in vals)
        if n < len(certain):
            why = [w for t in certain for w in cands.sources(c, t)][:8]
            out.append(RangeProblem(
                "counts-range", c,
                f"counts() returned {n} {status.value}, but {len(certain)} task(s) were "
                f"{status.value} at every instant of the call: {_shown(certain)}", [c, *why]))
        else:
            out.append(RangeProblem(
                "counts-range", c,
                f"counts() returned {n} {status.value}, but at most {len(possible)} task(s) "
                f"could have been {status.value} at any instant of the call"
                + (f": {_shown(possible)}" if possible else ""), [c]))
    return out


def _joint(c: Call, table: dict[str, set[Value]], cands: Candidates) -> list[RangeProblem]:
    """The statuses together: can every task whose value is uncertain take one of its
    candidates so that each status holds exactly the number counted? Each counted place
    left after the certain tasks needs a task that may be in that status, and each task
    that cannot be missing needs a counted place (the marginal bounds hold, so the certain
    tasks never exceed a count). A matching that fills every place and one that places
    every such task exist together iff one does both (Mendelsohn-Dulmage), so two
    matchings by augmenting paths decide it."""
    got: dict[TaskStatus, int] = c.result or {}
    need: Counter[Value] = Counter({s: got.get(s, 0) for s in TaskStatus})
    open_: dict[str, set[Value]] = {}
    for task, vals in table.items():
        if len(vals) == 1:
            need[next(iter(vals))] -= 1
        elif vals:
            open_[task] = vals
    places = [(s, i) for s in sorted((s for s in TaskStatus if need[s] > 0),
                                     key=lambda s: s.value) for i in range(need[s])]
    if not places and all(None in vals for vals in open_.values()):
        return []
    edges = {t: [p for p in places if p[0] in vals] for t, vals in open_.items()}
    filled = _matching(edges, sorted(open_))
    placed = _matching(edges, sorted(t for t, vals in open_.items() if None not in vals))
    unfilled = [p for p in places if p not in filled.values()]
    unplaced = sorted(t for t, vals in open_.items() if None not in vals and t not in placed)
    if not unfilled and not unplaced:
        return []
    shown = ", ".join(f"{n} {s.value}" for s, n in sorted(got.items(), key=lambda kv: kv[0].value)
                      if n) or "nothing"
    if unfilled:
        status = unfilled[0][0]
        maybe = sorted(t for t, vals in open_.items() if status in vals)
        what = (f"the tasks that might have been {status.value} then "
                f"({_shown(maybe) if maybe else 'none'}) are too few for the "
                f"{got.get(status, 0)} counted once every other task is counted where it must "
                "be -- a task counted under two statuses at once?")
    else:
        maybe = unplaced
        what = (f"{_shown(unplaced)} existed at every instant of the call and cannot be "
                "counted under any status the counts leave room for -- a task counted "
                "under none?")
    why = [w for t in maybe for w in cands.sources(c, t)][:8]
    return [RangeProblem(
        "counts-range", c, f"counts() returned {shown}, which no single instant of the call "
        f"gives: each task has one status at a time, and {what}", [c, *why])]


def _matching(edges: dict[str, list[tuple[TaskStatus, int]]], tasks: Sequence[str]
              ) -> dict[str, tuple[TaskStatus, int]]:
    """A maximum matching of ``tasks`` to the places their edges reach (Kuhn's algorithm):
    task -> place."""
    holder: dict[tuple[TaskStatus, int], str] = {}
    assigned: dict[str, tuple[TaskStatus, int]] = {}

    def place(task: str, seen: set[tuple[TaskStatus, int]]) -> bool:
        for slot in edges.get(task, ()):
            if slot in seen:
                continue
            seen.add(slot)
            other = holder.get(slot)
            if other is None or place(other, seen):
                holder[slot] = task
                assigned[task] = slot
                return True
        return False

    for task in tasks:
        place(task, set())
    return assigned


def _prune(c: Call, table: dict[str, set[Value]], cands: Candidates) -> RangeProblem | None:
    keep = max(int(c.args.get("keep_terminal", 0)), 0)
    certain = sorted(t for t, vals in table.items()
                     if vals and all(v is not None and v.is_terminal for v in vals))
    possible = sorted(t for t, vals in table.items()
                      if any(v is not None and v.is_terminal for v in vals))
    lo, hi = max(len(certain) - keep, 0), max(len(possible) - keep, 0)
    n = int(c.result)
    if lo <= n <= hi:
        return None
    if n < lo:
        why = [w for t in certain for w in cands.sources(c, t)][:8]
        return RangeProblem("prune-count", c, (
            f"prune(keep_terminal={keep}) returned {n}, but {len(certain)} task(s) were "
            f"terminal at every instant of the call ({_shown(certain)}), so at least {lo} had "
            "to go"), [c, *why])
    return RangeProblem("prune-count", c, (
        f"prune(keep_terminal={keep}) returned {n}, but at most {len(possible)} task(s) could "
        f"have been terminal at any instant of the call, so at most {hi} could go"), [c])
