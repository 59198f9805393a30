"""``check(history)``: local checks, range checks, then every partition searched.

The verdict is LINEARIZABLE only when every partition was searched to the end and
passed, and no local or range check failed; a search that runs out of its budget
makes it INCONCLUSIVE (reported NOT VERIFIED, with the reason and the budget),
never LINEARIZABLE; any failure makes it VIOLATION, whatever the budget did.
"""

from __future__ import annotations

import enum
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...oracle import Model, instant
from ..timeline import Entry, make_entry, render
from .history import Call, Outcome, paused_gc, read_history
from .minimise import Minimised, minimise
from .partition import Partition, partition_history
from .ranges import check_ranges
from .search import Exhausted, Meter, _apply, search

__all__ = ["Budget", "CheckResult", "Verdict", "Violation", "check", "check_logs"]


@dataclass(frozen=True, slots=True)
class Budget:
    """What one check may spend: states explored (all partitions together) and
    seconds; then seconds to minimise the failures (at most ``reports`` of them)."""

    max_states: int = 2_000_000
    max_seconds: float = 60.0
    minimise_seconds: float = 20.0
    reports: int = 3

    def __str__(self) -> str:
        return (f"{self.max_states} states / {self.max_seconds:g} s "
                f"(+{self.minimise_seconds:g} s to minimise)")


class Verdict(enum.Enum):
    LINEARIZABLE = "linearizable"
    VIOLATION = "violation"
    INCONCLUSIVE = "inconclusive"


@dataclass(slots=True)
class Violation:
    """One failure: what kind, where, the calls that show it and why."""

    kind: str
    where: str
    explanation: str
    calls: list[Call]
    context: list[Call] = field(default_factory=list)
    #: False when minimisation ran out of time (the calls still fail, but may not be minimal).
    minimal: bool = True
    timeline: str = ""
    #: Earlier calls on the same objects, kept as recorded (not shown).
    background: int = 0

    def __str__(self) -> str:
        size = f"{len(self.calls)} call{'s' if len(self.calls) != 1 else ''}"
        extent = "minimal" if self.minimal else "not fully minimised"
        ctx = f", {len(self.context)} context" if self.context else ""
        legend = "» = the calls" + (", ~ = context: writes that may or may not have taken "
                                    "effect" if self.context else "")
        return (f"[{self.kind}] {self.where}: {self.explanation}\n"
                f"  ({size}, {extent}{ctx}; {legend})\n{self.timeline}")


@dataclass(slots=True)
class CheckResult:
    """The verdict with what the check did and spent."""

    verdict: Verdict
    calls: int
    partitions: int
    states: int
    seconds: float
    budget: Budget
    violations: list[Violation] = field(default_factory=list)
    reason: str | None = None
    largest: tuple[str, int] | None = None
    unchecked: int = 0

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.LINEARIZABLE

    def summary(self) -> str:
        head = {Verdict.LINEARIZABLE: "LINEARIZABLE", Verdict.VIOLATION: "VIOLATION",
                Verdict.INCONCLUSIVE: "NOT VERIFIED"}[self.verdict]
        if self.verdict is Verdict.INCONCLUSIVE:
            head += f" ({self.reason})"
        elif self.verdict is Verdict.VIOLATION:
            kinds = Counter(v.kind for v in self.violations)
            head += " (" + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ")"
        big = "" if self.largest is None else (
            f" (largest: {self.largest[1]} calls, {self.largest[0]})")
        return (f"linearizability: {head}: {self.calls} calls, {self.partitions} partitions"
                f"{big}, {self.states} states explored in {self.seconds:.2f} s; "
                f"budget {self.budget}")

    def report(self, limit: int = 3) -> str:
        """The summary, then up to ``limit`` violations -- taken in turn from each kind,
        so a flood of one kind (a counts() range per call) does not hide another."""
        lines = [self.summary()]
        by_kind: dict[str, list[Violation]] = {}
        for v in self.violations:
            by_kind.setdefault(v.kind, []).append(v)
        shown: list[Violation] = []
        queues = [list(vs) for vs in by_kind.values()]
        while len(shown) < limit and any(queues):
            for q in queues:
                if q and len(shown) < limit:
                    shown.append(q.pop(0))
        lines += [str(v) for v in sorted(shown, key=self.violations.index)]
        if len(self.violations) > len(shown):
            lines.append(f"... {len(self.violations) - len(shown)} more violation(s)")
        return "\n".join(lines)


# -- rendering ------------------------------------------------------------------------------

def entry_of(call: Call, focus: frozenset[str] | None = None) -> Entry:
    """A call as a timeline line (``focus``: the ids whose records a list result shows)."""
    error: dict[str, Any] | None
    if call.source is not None:
        error = call.source.error
    elif call.outcome is Outcome.CONFLICT:
        error = {"conflict": True, "actual": "?"}
    elif call.outcome is Outcome.FAILED:
        kind, _, message = (call.error or "StoreError").partition(": ")
        error = {"type": kind, "message": message}
    else:
        error = None
    return make_entry(call.process, call.seq if call.seq is not None else call.id, call.method,
                      call.args, {}, ok=call.outcome is Outcome.OK,
                      pending=call.outcome is Outcome.PENDING, error=error, result=call.result,
                      has_result=call.outcome is Outcome.OK, summary=None,
                      t_invoke=call.t_invoke, t_return=call.t_return, round_=call.round,
                      ref=id(call), focus=focus)


def timeline_of(calls: Sequence[Call], context: Sequence[Call], origin: float,
                limit: int = 12, lead: int = 4, focus: frozenset[str] | None = None) -> str:
    """The calls (marked ``»``) and their context (``~``) in invoke order: the context
    that overlaps the calls' span (at most ``limit``, nearest first), and the last
    ``lead`` context calls that ended before it (what led up to it)."""
    core_ids = {id(c) for c in calls}
    ctx = list(context)
    if calls:
        lo = min(c.t_invoke for c in calls)
        hi = max(c.t_return if c.t_return is not None else c.t_invoke for c in calls)

        def end(c: Call) -> float:
            return c.t_return if c.t_return is not None else float("inf")

        near = [c for c in ctx if c.t_invoke <= hi and end(c) >= lo]
        near.sort(key=lambda c: abs(c.t_invoke - lo))
        before = sorted((c for c in ctx if end(c) < lo), key=end)[-lead:]
        ctx = [*near[:limit], *before]
    shown = sorted([*calls, *ctx], key=lambda c: (c.t_invoke, c.process))
    text = render([entry_of(c, focus) for c in shown], origin, marked=core_ids,
                  context={id(c) for c in ctx})
    hidden = len(context) - len(ctx)
    return text + (f"\n    ({hidden} more context call(s) further away not shown)"
                   if hidden > 0 else "")


# -- local checks ---------------------------------------------------------------------------

def _local(call: Call) -> str | None:
    """What a call's own answer shows wrong, without looking at any state."""
    if call.outcome is not Outcome.OK:
        return None
    if call.method == "claim_commands":
        got = list(call.result or [])
        limit = max(int(call.args.get("limit", 50)), 0)
        ids = [c.command_id for c in got]
        if len(got) > limit:
            return f"claim_commands(limit={limit}) returned {len(got)} commands"
        if len(set(ids)) != len(ids):
            return f"claim_commands returned a command twice: {ids!r}"
    elif call.method == "query":
        got = list(call.result or [])
        q = call.args.get("query")
        ids = [t.task_id for t in got]
        if len(set(ids)) != len(ids):
            return f"query returned a task twice: {ids!r}"
        if q is not None and q.limit is not None and len(got) > q.limit:
            return f"query(limit={q.limit}) returned {len(got)} tasks"
        keys = [instant(t.created_at) for t in got]
        descending = q is not None and q.newest_first
        if keys != sorted(keys, reverse=descending):
            return (f"query returned tasks out of created_at order "
                    f"({'descending' if descending else 'ascending'}): {ids!r}")
    elif call.method == "prune" and (not isinstance(call.result, int)
                                     or isinstance(call.result, bool) or call.result < 0):
        return f"prune returned {call.result!r}, not a count"
    return None


# -- the check ------------------------------------------------------------------------------

def _distance(reason: str) -> tuple[int, int]:
    """How far the state a failure reason quotes is from what the call returned: the
    nearest possible state explains best (fewest differing fields; "missing" last)."""
    if "missing" in reason or "did not exist" in reason:
        return (1_000, len(reason))
    more = re.search(r"and (\d+) more field", reason)
    return (reason.count("(model ") + (int(more.group(1)) if more else 0), len(reason))


def _explain(part: Partition, m: Minimised, calls_of: list[Call], origin: float) -> str:
    order, result = m.order, m.result
    core = set(m.core)
    background = set(m.background)
    if result.stuck is None:
        return (f"No order of the {len(core)} call(s) marked » fits the model "
                "(the search ran out of budget before it could say where).")
    stuck = order[result.stuck]
    stuck_call = calls_of[stuck]
    reason: str | None = None
    if result.stuck_states is not None and isinstance(
            _apply(result.stuck_states, part.strict[stuck]), str):
        # Every possible state fails; quote the one that says most (a task that exists
        # says more than "it was missing"), and how many others there were.
        reasons = sorted({r for s in result.stuck_states
                          if isinstance(r := part.strict[stuck](s), str)}, key=_distance)
        reason = reasons[0]
        if len(reasons) > 1:
            reason += f" (and in {len(reasons) - 1} other possible state(s) it fails too)"
    prefix = [calls_of[order[i]] for i in result.prefix if order[i] in core]
    shown = ", ".join(f"{c.label} {c.method}" for c in prefix[-6:])
    if len(prefix) > 6:
        shown = f"... {len(prefix) - 6} earlier, " + shown
    before = [calls_of[i] for i in core if calls_of[i].precedes(stuck_call)]
    text = (f"No order of the {len(core)} call(s) marked » fits the model"
            + (", whatever the ~ calls did" if m.context else "")
            + (f", after the {len(background)} earlier call(s) on {part.name} as recorded"
               if background else "") + ". ")
    text += (f"The furthest any order gets is [{shown}]; then " if prefix else
             "Even first, ")
    text += f"{stuck_call.label} {stuck_call.method} cannot take effect"
    text += f": {reason}." if reason else " at any point its interval allows."
    if before:
        text += (f" It was invoked at +{stuck_call.t_invoke - origin:.4f}s, after "
                 + ", ".join(f"{c.label} {c.method} had returned at "
                             f"+{(c.t_return or 0) - origin:.4f}s" for c in before[:3])
                 + ".")
    return text


def check(calls: Sequence[Call], *, initial: Model | None = None,
          budget: Budget | None = None, origin: float | None = None,
          skip: str = "any") -> CheckResult:
    """Is the history linearizable with respect to the oracle? See the package docstring.

    ``initial`` is the store the history starts from (default: empty); ``origin`` the
    time zero of the printed timelines (default: the first invoke); ``skip`` which
    commands a claim may skip: ``"any"`` (the guide's SKIP LOCKED, the default) or
    ``"concurrent"`` (only those a concurrent call may hold locked).
    """
    with paused_gc():
        return _check(calls, initial, budget or Budget(), origin, skip)


def _check(calls: Sequence[Call], initial: Model | None, budget: Budget,
           origin: float | None, skip: str) -> CheckResult:
    started = time.monotonic()
    zero = min((c.t_invoke for c in calls), default=0.0) if origin is None else origin
    violations: list[Violation] = []
    for c in calls:
        problem = _local(c)
        if problem is not None:
            violations.append(Violation("local", f"{c.label} {c.method}", problem, [c],
                                        timeline=timeline_of([c], [], zero)))
    for p in check_ranges(calls, initial):
        violations.append(Violation(p.kind, f"{p.call.label} {p.call.method}", p.message,
                                    [p.call], [x for x in p.calls if x is not p.call],
                                    timeline=timeline_of([p.call], [x for x in p.calls
                                                                    if x is not p.call], zero)))
    parts = partition_history(calls, initial, skip=skip)
    meter = Meter(budget.max_states, started + budget.max_seconds)
    failed: list[Partition] = []
    reason: str | None = None
    unchecked = 0
    for k, part in enumerate(sorted(parts, key=lambda p: len(p.projections))):
        inv = [p.t_invoke for p in part.projections]
        end = [p.t_end for p in part.projections]
        try:
            result = search(part.strict, inv, end, part.init, meter)
        except Exhausted:
            unchecked = len(parts) - k
            reason = (f"{part.name} ({len(part.projections)} calls) was still undecided when "
                      f"the budget ran out ({meter.why}); {unchecked} partition(s) unchecked")
            break
        if not result.ok:
            failed.append(part)
    minimise_until = time.monotonic() + budget.minimise_seconds
    chosen = failed[:budget.reports]
    for k, part in enumerate(chosen):
        calls_of = [p.call for p in part.projections]
        share = (minimise_until - time.monotonic()) / (len(chosen) - k)
        m = minimise(part, deadline=time.monotonic() + max(share, 0.0))
        core = [calls_of[i] for i in sorted(m.core, key=lambda i: calls_of[i].t_invoke)]
        seen: set[int] = {id(c) for c in core}
        context = []
        for i in m.context:
            c = calls_of[i]
            if id(c) not in seen and part.weak[i] is not None:
                seen.add(id(c))
                context.append(c)
        focus = frozenset(name for _, name in part.keys)
        text = timeline_of(core, context, zero, focus=focus)
        if m.background:
            text += (f"\n    ({len(m.background)} earlier call(s) on {part.name} are part of "
                     "the proof as recorded; not shown)")
        violations.append(Violation(
            "not-linearizable", part.name, _explain(part, m, calls_of, zero), core, context,
            minimal=m.complete, timeline=text, background=len(m.background)))
    for part in failed[budget.reports:]:
        violations.append(Violation(
            "not-linearizable", part.name, "not linearizable (not minimised: the report "
            f"shows the first {budget.reports})", [], minimal=False))
    largest = max(parts, key=lambda p: len(p.projections), default=None)
    if violations:
        verdict = Verdict.VIOLATION
    elif reason is not None:
        verdict = Verdict.INCONCLUSIVE
    else:
        verdict = Verdict.LINEARIZABLE
    return CheckResult(verdict, len(calls), len(parts), meter.states,
                       time.monotonic() - started, budget, violations, reason,
                       None if largest is None else (largest.name, len(largest.projections)),
                       unchecked)


def check_logs(logdir: str | Path, *, budget: Budget | None = None) -> CheckResult:
    """Check the history a kept run's log folder records (every call ``record=True``)."""
    return check(read_history(logdir), budget=budget)

