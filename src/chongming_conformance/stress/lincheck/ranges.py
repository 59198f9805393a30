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
is a candidate only when no certain write came before the call). A write is certain
when it returned -- or when a read returned what it wrote: a save whose reply was lost,
or whose writer was killed, took effect before the read that shows its snapshot, so from
that read's return on it is as certain as one that returned (a crashed writer's
half-written index cannot hide behind its unknown outcome for ever). Nor can one a certain
write has overtaken: a save of unknown outcome expecting version ``e`` took effect, if at
all, before any write of a version above ``e`` that did (versions only grow), so from that
write's certain end on its value is gone (``_overtaken`` says when this holds). A snapshot is
taken for a write's only when exactly one write of the history wrote that task, version,
status and name. Then for each
status ``s``::

    #{tasks whose every candidate is s} <= counts()[s] <= #{tasks with some candidate s}

and the counts add up -- within what the guide asks, a number per status, not one
snapshot of all of them: a store may read each status at its own instant of the call (a
key-value store reads its status indexes one after another), so a task is counted once
under each status it held during the call. That is one, unless creates or saves of it
may take effect inside the call (``Candidates.moves``), each adding at most one; and a
write takes effect once, so over calls that do not overlap the tasks counted twice are at
most the writes that may land inside them (``_moved_once``: an index entry a crashed save
left behind fails this, counted in every later call). And a prune that returned ``n``
with ``keep_terminal=k`` satisfies ``max(certain - k, 0) <= n <= max(possible - k, 0)``
over the terminal tasks. All these bounds hold in any linearization (the sum's also
where each status is read at its own instant), so a correct store never fails them
(sound); they cannot see what a finer reasoning across tasks would.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...oracle import Model
from ...protocol.model import TaskStatus
from .history import Call, Outcome
from .partition import gone_queries, overlap, possibly_terminal

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

    def __init__(self, calls: Sequence[Call], initial: Model | None,
                 deletions: dict[str, list[Call]] | None = None) -> None:
        """``deletions``: per task, calls that certainly left it missing by their end (a
        prune it was terminal throughout, a query that saw it gone: ``_deletions``)."""
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
        seen = _observed(calls, writes)
        overtaken = _overtaken(writes, seen, initial)
        for key, at in _late_creates(writes, seen, initial, terminal).items():
            overtaken[key] = min(at, overtaken.get(key, math.inf))
        # Per task: each create's and save's invoke and the last instant it can take effect
        # at (its end, the read that showed it, the certain write that overtook it).
        self._spans: dict[str, list[tuple[float, float, Call]]] = {
            t: [(w.t_invoke, min(w.end, seen.get(id(w.call), math.inf),
                                 overtaken.get(id(w.call), math.inf)), w.call) for w in ws]
            for t, ws in writes.items()}
        # A certain deletion is a certain write of "missing" to that task alone.
        for t, gone in (deletions or {}).items():
            writes[t].extend(_Write(c, None, c.t_invoke, c.end) for c in gone)
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
        self._overtaken: dict[str, list[tuple[_Write, float]]] = {}
        for t, ws in writes.items():
            # (A write of unknown outcome ends never: ``Call.end`` is then inf.)
            certain = sorted((_Write(w.call, w.value, w.t_invoke,
                                     min(w.end, seen.get(id(w.call), math.inf)))
                              for w in ws if w.call.outcome is Outcome.OK
                              or id(w.call) in seen), key=lambda w: w.end)
            self._certain_ends[t] = [w.end for w in certain]
            running = -math.inf
            prefix = []
            for w in certain:
                running = max(running, w.t_invoke)
                prefix.append(running)
            self._certain_max_inv[t] = prefix
            # An overtaken write is a candidate only at calls invoked before the write that
            # overtook it was certain; it stays out of the per-value prefixes.
            free = [w for w in ws if id(w.call) not in overtaken]
            self._overtaken[t] = [(w, overtaken[id(w.call)]) for w in ws
                                  if id(w.call) in overtaken]
            self._by_value[t] = [_prefix_best(value, [w for w in free if w.value == value])
                                 for value in {w.value for w in free}]
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
        for w, overtaken_at in self._overtaken[task]:
            if w.call is not call and w.t_invoke <= stop and call.t_invoke <= overtaken_at:
                out.add(w.value)
        return out

    def moves(self, call: Call, task: str) -> list[Call]:
        """The creates and saves of ``task`` that may take effect inside ``call``: invoked
        before it returned, and not certain (returned, shown, overtaken) before its invoke."""
        stop = call.t_return if call.t_return is not None else math.inf
        return [c for t_invoke, last, c in self._spans.get(task, ())
                if c is not call and t_invoke <= stop and last >= call.t_invoke]

    def sources(self, call: Call, task: str) -> list[Call]:
        """The writes the values come from (for an explanation; a linear scan)."""
        _, floor = self._floor(call, task)
        stop = call.t_return if call.t_return is not None else math.inf
        writes = self._writes[task] + (self._prunes if task in self._terminal else [])
        gone = {id(w.call) for w, at in self._overtaken[task] if call.t_invoke > at}
        return [w.call for w in writes if w.t_invoke <= stop and w.end >= floor
                and w.call is not call and id(w.call) not in gone]


def _identity(snap: Any) -> tuple[str, int, Value, str]:
    return snap.task_id, snap.status_version, snap.status, snap.name


def _observed(calls: Sequence[Call], writes: dict[str, list[_Write]]) -> dict[int, float]:
    """The writes a read showed had taken effect: id(write call) -> the earliest return of
    a get or query that returned the snapshot only it wrote. From then on the write is
    certain -- one of unknown outcome (it raised, its worker was killed) as much as one
    still in flight, which returns later (a save frozen between two of its requests while
    the check phase reads: a get shows its new status, and a counts() after that get must
    count it there, however long the save takes to return)."""
    by_identity: dict[tuple[str, int, Value, str], list[Call]] = defaultdict(list)
    for ws in writes.values():
        for w in ws:
            by_identity[_identity(w.call.args["snapshot"])].append(w.call)
    unknown = {key: cs[0] for key, cs in by_identity.items() if len(cs) == 1}
    if not unknown:
        return {}
    out: dict[int, float] = {}
    for c in calls:
        if c.outcome is not Outcome.OK or c.t_return is None:
            continue
        if c.method == "get":
            shown = [c.result] if c.result is not None else []
        elif c.method == "query":
            shown = list(c.result or ())
        else:
            continue
        for snap in shown:
            write = unknown.get(_identity(snap))
            if write is not None:
                out[id(write)] = min(out.get(id(write), math.inf), c.t_return)
    return out


def _overtaken(writes: dict[str, list[_Write]], seen: dict[int, float],
               initial: Model | None) -> dict[int, float]:
    """The writes of unknown outcome a certain write has overtaken: id(write call) -> the
    earliest certain end of a write that, had the first taken effect at all, took effect
    after it. A call invoked after that instant cannot see the overtaken write's value.

    Without it such a write (its reply lost, its worker killed) stays a candidate for the
    rest of the run, and every aimed kill widens the counts() ranges by one task -- room a
    stale index entry hides in. But a save takes effect only where the stored version
    equals its ``expect_version``, and a create only where the task is missing. On a task
    that lives once (at most one create, none if it was there at the start) and whose
    every save writes a version above the one it expects, the versions that take effect
    only grow: once a write of a version above ``e`` has taken effect -- by its certain end
    (its return, or the read that showed it) -- no save expecting ``e`` can follow, and
    once any write other than the create has taken effect the create cannot follow either.
    So the overtaken write, if it took effect, did so before the overtaking one, whose own
    value (or a later one) replaced it by that certain end.
    Where a history breaks either condition (a task created twice, a save that does not
    raise the version) nothing is bounded: the range stays as wide as real time alone
    allows.
    """
    out: dict[int, float] = {}
    starts = {} if initial is None else initial.tasks
    for t, ws in writes.items():
        creates = [w for w in ws if w.call.method == "create"]
        if len(creates) + (t in starts) > 1 or any(
                w.call.method == "save"
                and w.call.args["snapshot"].status_version <= w.call.args["expect_version"]
                for w in ws):
            continue
        certain = [(min(w.end, seen.get(id(w.call), math.inf)), w) for w in ws
                   if w.call.outcome is Outcome.OK or id(w.call) in seen]
        for w in ws:
            if w.end != math.inf or id(w.call) in seen:
                continue
            if w.call.method == "create":
                ends = [end for end, c in certain if c is not w]
            else:
                expect = w.call.args["expect_version"]
                ends = [end for end, c in certain
                        if c is not w and c.call.args["snapshot"].status_version > expect]
            if ends:
                out[id(w.call)] = min(ends)
    return out


def _late_creates(writes: dict[str, list[_Write]], seen: dict[int, float],
                  initial: Model | None, terminal: set[str]) -> dict[int, float]:
    """The creates of unknown outcome that cannot take effect any more: id(create call) ->
    from when (as in ``_overtaken``).

    A create takes effect only where its task is missing, and a task that is never
    terminal is never pruned: once it exists it exists for good. So on such a task a
    create that raised (a duplicate id is a ``StoreError``, of unknown effect like any
    other) took effect before the first certain write of that task other than itself, or
    never -- and on a task there from the start, never. Without this every duplicate
    create the workload tries on a key task keeps "it may land now" open for the rest of
    the run, and every later counts() may count that task twice.
    """
    out: dict[int, float] = {}
    starts = {} if initial is None else initial.tasks
    for t, ws in writes.items():
        if t in terminal:
            continue
        certain = [(min(w.end, seen.get(id(w.call), math.inf)), w) for w in ws
                   if w.call.outcome is Outcome.OK or id(w.call) in seen]
        for w in ws:
            if w.call.method != "create" or w.end != math.inf or id(w.call) in seen:
                continue
            ends = [end for end, c in certain if c is not w]
            if t in starts:
                out[id(w.call)] = -math.inf
            elif ends:
                out[id(w.call)] = min(ends)
    return out


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
    deletions = _deletions(calls, cands)
    if deletions:
        cands = Candidates(calls, initial, deletions)
    problems: list[RangeProblem] = []
    over: list[_Over] = []
    for c in counted:
        table = {t: cands.values(c, t) for t in cands.tasks}
        if c.method == "counts":
            found, excess = _counts(c, table, cands)
            problems.extend(found)
            if excess is not None:
                over.append(excess)
        else:
            problem = _prune(c, table, cands)
            if problem is not None:
                problems.append(problem)
    problem = _moved_once(over)
    if problem is not None:
        problems.append(problem)
    return problems


def _deletions(calls: Sequence[Call], cands: Candidates) -> dict[str, list[Call]]:
    """Per task, the calls after whose end it is certainly missing.

    A prune with ``keep_terminal=0`` that returned drops every task terminal at its
    point; one terminal at every instant of the call (``cands``: no candidate that is
    missing or not terminal) was dropped by its end -- taken only where no other prune
    and no create, save, touch or append of that task overlaps the call (one of unknown
    outcome overlaps every later call), so that nothing may hold the task's rows locked
    from a prune that skips locked rows. A query that saw a task gone after
    its every create ended (``partition.gone_queries``) leaves it missing for good: a save
    of a missing task is a conflict. Without them a task a prune took stays "maybe still
    there" for the rest of the run, and every pruned task widens the count ranges by one.
    """
    out: dict[str, list[Call]] = defaultdict(list)
    prunes = [c for c in calls if c.method == "prune"]
    touching: dict[str, list[Call]] = defaultdict(list)
    for c in calls:
        if c.method in ("create", "save"):
            touching[c.args["snapshot"].task_id].append(c)
        elif c.method == "touch":
            touching[c.args["task_id"]].append(c)
        elif c.method == "append":
            touching[c.args["transition"].task_id].append(c)
    for c in prunes:
        if (c.outcome is not Outcome.OK or int(c.args.get("keep_terminal", 0)) != 0
                or any(o is not c and overlap(o, c) for o in prunes)):
            continue
        for t in cands.tasks:
            vals = cands.values(c, t)
            if vals and all(v is not None and v.is_terminal for v in vals) and not any(
                    overlap(o, c) for o in touching.get(t, ())):
                out[t].append(c)
    for t, q in gone_queries(calls).items():
        out[t].append(q)
    return dict(out)


@dataclass(slots=True)
class _Over:
    """A counts() answer above one per existing task, and the writes that may explain it."""

    call: Call
    excess: int
    moves: set[int]


def _moved_once(over: Sequence[_Over]) -> RangeProblem | None:
    """Counts over several calls that no two of overlap, more tasks counted twice than
    writes that could have moved them.

    Each extra count needs a write taking effect inside its call (see ``_counts``), and a
    write takes effect at one instant: inside at most one of calls that do not overlap. A
    save whose reply was lost, or whose writer was killed, may explain one call's extra
    count -- not every later call's (an index entry its crash left behind, counted for
    ever). Checked over each run of consecutive calls in a chain of non-overlapping ones.
    """
    chain: list[_Over] = []
    for o in sorted(over, key=lambda o: o.call.end):
        if not chain or o.call.t_invoke > chain[-1].call.end:
            chain.append(o)
    for i in range(len(chain)):
        excess, moves = 0, set()
        for j in range(i, len(chain)):
            excess += chain[j].excess
            moves |= chain[j].moves
            if excess > len(moves):
                calls = [o.call for o in chain[i:j + 1]]
                return RangeProblem(
                    "counts-range", chain[j].call,
                    f"counts() counted a task under two statuses {excess} time(s) over "
                    f"{len(calls)} calls that do not overlap, but only {len(moves)} write(s) "
                    "could have moved a task inside any of them, and a write takes effect "
                    "once: a task counted under two statuses while nothing moved it (an "
                    "index entry left behind)", calls[-8:])
    return None


def _counts(c: Call, table: dict[str, set[Value]], cands: Candidates
            ) -> tuple[list[RangeProblem], _Over | None]:
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
    if out:  # one answer, one problem: the per-status ranges already show it
        return out, None
    total = sum(got.values())
    hi = lo = tasks = 0
    moved: set[int] = set()
    for t, vals in table.items():
        held = len(vals - {None})
        tasks += held > 0
        moves = cands.moves(c, t) if held > 1 else []
        moved.update(id(m) for m in moves)
        # A task is counted under each status it held at the instant that status was
        # read -- at most once per status it held during the call: one, unless a create
        # or save of it took effect inside the call, each adding at most one.
        hi += min(held, 1 + len(moves))
        # It is surely counted if it existed throughout (no prune inside: that would make
        # "missing" a value) and either had one status or none of its writes could take
        # effect inside (one that did may move it from a status not yet read to one read).
        if held and None not in vals and (held == 1 or not moves):
            lo += 1
    if total > hi:
        out.append(RangeProblem(
            "counts-range", c,
            f"counts() returned {total} task(s) in all, but at most {hi} could have been "
            "counted: a task is counted under each status it held during the call, and "
            "holds a second one only if a write of it took effect inside the call (a task "
            "counted under two statuses while nothing moved it, or one that was not there)",
            [c]))
    elif total < lo:
        certain = sorted(t for t, vals in table.items() if vals and None not in vals)
        why = [w for t in certain for w in cands.sources(c, t)][:8]
        out.append(RangeProblem(
            "counts-range", c,
            f"counts() returned {total} task(s) in all, but {lo} task(s) existed at every "
            f"instant of the call and nothing could move them inside it: {_shown(certain)}",
            [c, *why]))
    return out, (_Over(c, total - tasks, moved) if not out and total > tasks else None)


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
