"""One time-ordered list of every worker's store calls: what an anomaly quotes.

Each worker logs its own calls (``stress.log``); to see a race you need all of
them merged in real-time order. A timeline line is one call::

    » +1.2345s  +1.2391s  w1 #12 r3  save(Task(mix-t1 v5 running 'w1-s3'), expect_version=4) → ok

the invoke and return times in seconds after the run's first call (``pending``
when it never returned), the worker (``g2.w1`` when the run had several groups
of workers), its log sequence number and round, the call with its arguments, and
its result or error; a fault run's faults are lines of their own (worker ``nemesis``,
from the fault's start to its end). ``»`` marks the calls an anomaly is about. A call
logged with
``record=True`` shows its full arguments and result (``stress.calls``); other
calls show the summary their scenario logged.

Long values are elided between items, never inside one (``[Task(a), Task(b), …
+247 more]``), and a long text at a word boundary (``'lorem ipsum…'(+200
chars)``), so a line is never cut in the middle of a token.

From a shell, on the logs a failing run kept::

    python -m chongming_conformance.stress timeline LOGDIR [--task ID] [--command ID]
        [--around SECONDS [--window SECONDS]]

``--around T`` keeps the calls that overlap ``[T - window, T + window]`` (default
window 0.5 s), ``T`` in the same seconds the lines show; ``--mark w1#12`` marks a call
``»`` and ``--max-lines N`` keeps the marked calls and their nearest neighbours. From a
verdict: ``slice_around(logs, ops, seconds)``; every anomaly of a stress scenario quotes
``cited_slice(...)`` (``Harness.anomaly(..., cites=ops)``), which says the ``timeline``
command that prints the very same lines from the kept logs.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..faults.applied import read_nemesis_log
from ..faults.plan import Fault
from ..protocol.model import Command, Progress, TaskQuery, TaskSnapshot, TaskStatus, Transition
from .calls import decode_args, decode_value
from .log import Logs, Op, read_log_dir
from .records import BASE

__all__ = [
    "SLICE_LINES",
    "SLICE_SECONDS",
    "CitedSlice",
    "Entry",
    "cited_slice",
    "entries_from_logs",
    "entries_from_nemesis",
    "entry_from_op",
    "format_value",
    "main",
    "render",
    "run_entries",
    "select",
    "slice_around",
    "slice_of",
]

#: Width budget of one rendered value (arguments, result); items are never cut.
VALUE_WIDTH = 160
#: A text longer than this is cut at a word boundary, with the count of what is left.
TEXT_WIDTH = 48
ELLIPSIS = "…"


# -- values ---------------------------------------------------------------------------------

def when(value: datetime | None) -> str:
    """A logical instant: ``t+12s`` after the scenarios' BASE, else ISO-8601."""
    if value is None:
        return "None"
    seconds = (value - BASE).total_seconds()
    return f"t{seconds:+g}s" if abs(seconds) < 1e9 else value.isoformat()


def _text(value: str, width: int = TEXT_WIDTH) -> str:
    """A quoted text; a long one cut at a word boundary, with how much was left out."""
    if len(value) <= width + 16:  # eliding less than this would not save anything
        return repr(value)
    cut = width
    for i in range(width, width // 2, -1):
        if not value[i - 1].isalnum() or not value[i].isalnum():
            cut = i
            break
    return f"{value[:cut]!r}{ELLIPSIS}(+{len(value) - cut} chars)"


def _items(parts: Iterable[str], width: int, total: int | None = None) -> str:
    """Join rendered items while they fit ``width``; then ``… +N more`` (never cutting one)."""
    out: list[str] = []
    used = 0
    count = 0
    parts = list(parts)
    total = len(parts) if total is None else total
    for part in parts:
        if out and used + len(part) + 2 > width:
            break
        out.append(part)
        used += len(part) + 2
        count += 1
    if count < total:
        out.append(f"{ELLIPSIS} +{total - count} more")
    return ", ".join(out)


def format_value(value: Any, width: int = VALUE_WIDTH) -> str:
    """A compact, token-safe rendering of an argument or a result."""
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, datetime):
        return when(value)
    if isinstance(value, TaskStatus):
        return value.value
    if isinstance(value, TaskSnapshot):
        bits = [value.task_id, f"v{value.status_version}", value.status.value, _text(value.name)]
        if value.progress is not None:
            bits.append(f"p{value.progress.done}")
        if value.heartbeat_at is not None:
            bits.append(f"hb {when(value.heartbeat_at)}")
        if value.lease_owner is not None or value.lease_until is not None:
            bits.append(f"lease {value.lease_owner}→{when(value.lease_until)}")
        return f"Task({' '.join(bits)})"
    if isinstance(value, Command):
        bits = [value.command_id, f"task={value.task_id}", f"created {when(value.created_at)}"]
        if value.lease_until is not None:
            bits.append(f"lease→{when(value.lease_until)}")
        if value.finished_at is not None:
            bits.append(f"done {when(value.finished_at)} {value.outcome!r}")
        return f"Cmd({' '.join(bits)})"
    if isinstance(value, Transition):
        src = "∅" if value.from_status is None else value.from_status.value
        return (f"Tr({value.task_id} v{value.version} {src}→{value.to_status.value} "
                f"{_text(value.reason) if value.reason is not None else 'None'})")
    if isinstance(value, Progress):
        return f"Progress({value.done}/{value.total} {_text(value.message or '')})"
    if isinstance(value, TaskQuery):
        set_fields = {k: getattr(value, k) for k in ("statuses", "name", "name_prefix", "tag",
                                                      "buckets", "pipeline_run_id", "limit")
                      if getattr(value, k) is not None}
        if value.newest_first:
            set_fields["newest_first"] = True
        shown = {k: sorted(s.value for s in v) if k == "statuses" else
                 sorted(v) if k == "buckets" else v for k, v in set_fields.items()}
        return "TaskQuery(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"
    if isinstance(value, Mapping):
        pairs = [(k.value if isinstance(k, TaskStatus) else str(k), v) for k, v in value.items()]
        if pairs and all(isinstance(k, TaskStatus) for k in value):  # counts(): the non-zero
            nonzero = [(k, v) for k, v in pairs if v]
            return "{" + _items((f"{k}: {v}" for k, v in nonzero), width) + "}"
        return "{" + _items((f"{k}: {format_value(v, width // 2)}" for k, v in pairs),
                            width) + "}"
    if isinstance(value, list | tuple):
        return "[" + _items((format_value(v, width) for v in value), width) + "]"
    return _text(repr(value))


#: The argument shown without its name, per protocol method.
_POSITIONAL = {"create": "snapshot", "save": "snapshot", "get": "task_id", "query": "query",
               "append": "transition", "history": "task_id", "touch": "task_id",
               "submit_command": "command", "complete_command": "command_id",
               "release_command": "command_id"}
#: Arguments left out when they have their default value.
_DEFAULTS: dict[str, Any] = {"since_version": 0, "query": None}


def format_call(method: str, args: Mapping[str, Any]) -> str:
    """``save(Task(...), expect_version=4)``: the first argument bare, the rest named;
    arguments that are None or at their default are left out."""
    shown = []
    first = _POSITIONAL.get(method)
    if first is not None and first in args and args[first] is not None:
        shown.append(format_value(args[first]))
    for name, value in args.items():
        if name == first or value is None or _DEFAULTS.get(name, object()) == value:
            continue
        shown.append(f"{name}={format_value(value)}")
    return f"{method}({', '.join(shown)})"


# -- entries --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Entry:
    """One call on the timeline (times are the log's monotonic stamps)."""

    worker: str
    seq: int
    call: str
    outcome: str
    t_invoke: float
    t_return: float | None
    round: int | None = None
    result: str | None = None
    tasks: frozenset[str] = field(default_factory=frozenset)
    commands: frozenset[str] = field(default_factory=frozenset)
    #: ``id()`` of the logged ``Op`` (or checker ``Call``) it shows: what marks refer to.
    ref: int = 0

    @property
    def pending(self) -> bool:
        return self.t_return is None

    def overlaps(self, start: float, end: float) -> bool:
        stop = math.inf if self.t_return is None else self.t_return
        return self.t_invoke <= end and stop >= start


def _ids(values: Iterable[Any]) -> tuple[set[str], set[str]]:
    """Task and command ids a call's arguments and result mention."""
    tasks: set[str] = set()
    commands: set[str] = set()
    stack = list(values)
    while stack:
        v = stack.pop()
        if isinstance(v, TaskSnapshot | Transition):
            tasks.add(v.task_id)
        elif isinstance(v, Command):
            tasks.add(v.task_id)
            commands.add(v.command_id)
        elif isinstance(v, list | tuple):
            stack.extend(v)
        elif isinstance(v, Mapping):
            for k, x in v.items():
                if k in ("task", "task_id") and isinstance(x, str):
                    tasks.add(x)
                elif k in ("id", "command", "command_id") and isinstance(x, str):
                    commands.add(x)
                else:
                    stack.append(x)
    return tasks, commands


def make_entry(worker: str, seq: int, method: str, args: Mapping[str, Any] | None,
               detail: Mapping[str, Any], *, ok: bool, pending: bool,
               error: Mapping[str, Any] | None, result: Any, has_result: bool,
               summary: Any, t_invoke: float, t_return: float | None,
               round_: int | None, ref: int = 0,
               focus: frozenset[str] | None = None) -> Entry:
    """An entry from a call's parts (a logged ``Op``, or a checker's ``Call``).

    ``focus``: task or command ids the reader is looking at; a list result then shows
    only its records about them, and how many others it held.
    """
    if args is not None:
        text = format_call(method, args)
    else:
        text = f"{method}({_items((f'{k}={format_value(v)}' for k, v in detail.items()), 200)})"
    shown: str | None = None
    if pending:
        outcome = "pending"
    elif ok:
        outcome = "ok"
        if has_result and focus is not None and isinstance(result, list) and result:
            mine = [x for x in result if _ids([x])[0] & focus or _ids([x])[1] & focus]
            others = len(result) - len(mine)
            absent = "" if mine else f", none of {', '.join(sorted(focus))}"
            shown = "[" + ", ".join(format_value(x) for x in mine) + (
                f"{', ' if mine else ''}{ELLIPSIS} +{others} other{'s' if others != 1 else ''}"
                f"{absent}" if others else "") + "]"
        elif has_result:
            shown = None if result is None and method not in ("get",) else format_value(result)
        elif summary is not None:
            shown = format_value(summary)
    elif error is not None and error.get("conflict"):
        outcome = f"ConcurrencyConflict (actual {error.get('actual')})"
    else:
        err = error or {}
        kind = str(err.get("type") or "error").rsplit(".", 1)[-1]
        message = str(err.get("message") or "")
        if err.get("summary"):  # class, code, first line, SQL cut at a token boundary
            outcome = f"raised {_text(str(err['summary']), 2 * TEXT_WIDTH)}"
        else:
            outcome = f"raised {kind}" + (f": {_text(message, 2 * TEXT_WIDTH)}" if message else "")
    tasks, commands = _ids([dict(detail), dict(args or {}), result, summary])
    return Entry(worker, seq, text, outcome, t_invoke, t_return, round_, shown,
                 frozenset(tasks), frozenset(commands), ref)


def entry_from_op(op: Op, prefix: str = "") -> Entry:
    """The timeline entry of one logged call."""
    args = decode_args(op.call["args"]) if op.call is not None else None
    method = str(op.call["method"]) if op.call is not None else op.op
    result = decode_value(op.result) if op.has_result else None
    return make_entry(f"{prefix}w{op.worker}", op.seq, method, args, op.detail, ok=op.ok,
                      pending=op.pending, error=op.error, result=result,
                      has_result=op.has_result, summary=op.value, t_invoke=op.t_invoke,
                      t_return=op.t_return, round_=op.round, ref=id(op))


def entries_from_logs(groups: Iterable[tuple[str, Logs]] | Logs) -> list[Entry]:
    """Every call of every worker (of every group), in invoke order."""
    pairs = [("", groups)] if isinstance(groups, Logs) else list(groups)
    out = [entry_from_op(op, prefix) for prefix, logs in pairs for op in logs.all_ops()]
    out.sort(key=lambda e: (e.t_invoke, e.worker, e.seq))
    return out


#: The "worker" of a fault's line: the nemesis (``faults.nemesis``) of a fault run.
NEMESIS = "nemesis"


def entries_from_nemesis(logdir: str | Path) -> list[Entry]:
    """The faults a fault run applied (its ``nemesis.jsonl``), one line each, from the
    fault's start to its end: ``nemesis #3  blackhole every connection for 1.2 s → blackhole
    on every connection``. Empty for a run without a nemesis."""
    out = []
    for rec in read_nemesis_log(logdir):
        fault = Fault(**rec["fault"])
        out.append(Entry(NEMESIS, fault.number, fault.describe(), str(rec.get("detail", "")),
                         float(rec["start"]), float(rec["end"])))
    return out


def run_entries(groups: Iterable[tuple[str, Logs]], logdir: str | Path | None) -> list[Entry]:
    """Every call of a run and, for a fault run, every fault applied, in time order."""
    entries = entries_from_logs(list(groups))
    if logdir is not None:
        entries += entries_from_nemesis(logdir)
        entries.sort(key=lambda e: (e.t_invoke, e.worker, e.seq))
    return entries


def select(entries: Iterable[Entry], *, task: str | None = None, command: str | None = None,
           start: float | None = None, end: float | None = None) -> list[Entry]:
    """The entries that mention ``task`` / ``command`` and overlap ``[start, end]`` (a
    fault's line whenever it overlaps: what broke the world around the calls)."""
    lo = -math.inf if start is None else start
    hi = math.inf if end is None else end
    return [e for e in entries
            if (e.worker == NEMESIS or ((task is None or task in e.tasks)
                and (command is None or command in e.commands)))
            and e.overlaps(lo, hi)]


def origin_of(entries: Iterable[Entry]) -> float:
    """The first invoke: time zero of a run's timeline."""
    return min((e.t_invoke for e in entries), default=0.0)


def render(entries: Sequence[Entry], origin: float, *, marked: Iterable[int] = (),
           context: Iterable[int] = (), indent: str = "    ") -> str:
    """One line per entry, times in seconds after ``origin``; entries whose ``ref`` is in
    ``marked`` get ``»``, in ``context`` get ``~``."""
    marks = set(marked)
    tilde = set(context)
    lines = []
    for e in entries:
        mark = "»" if e.ref in marks else "~" if e.ref in tilde else " "
        start = f"+{e.t_invoke - origin:.4f}s"
        stop = "pending" if e.t_return is None else f"+{e.t_return - origin:.4f}s"
        where = "" if e.round is None else f" r{e.round}"
        label = f"{e.worker} #{e.seq}{where}"
        result = "" if e.result is None else f" {e.result}"
        lines.append(f"{indent}{mark} {start:>11} {stop:>11}  {label:<13} {e.call} → "
                     f"{e.outcome}{result}")
    return "\n".join(lines)


def slice_around(logs: Logs | Iterable[tuple[str, Logs]], ops: Sequence[Op], seconds: float,
                 *, origin: float | None = None) -> str:
    """Every worker's calls from ``seconds`` before the first of ``ops`` was invoked to
    ``seconds`` after the last returned, merged in time order, ``ops`` marked ``»``.

    ``origin`` is time zero (default: the first call in ``logs``), so that the times
    agree with ``timeline LOGDIR`` on the same logs.
    """
    entries = entries_from_logs(logs)
    zero = origin_of(entries) if origin is None else origin
    if not ops:
        return ""
    start = min(o.t_invoke for o in ops) - seconds
    ends = [o.t_return for o in ops if o.t_return is not None]
    end = (max(ends) if len(ends) == len(ops) else max(o.t_invoke for o in ops)) + seconds
    shown = select(entries, start=start, end=end)
    return render(shown, zero, marked={id(o) for o in ops})


#: Seconds of every worker's calls an anomaly's slice shows before and after the calls it
#: cites (``cited_slice``); the bound below keeps only the nearest of them.
SLICE_SECONDS = 0.02
#: Lines an anomaly's slice shows at most: the cited calls, then their nearest neighbours.
SLICE_LINES = 14


def label_of(entry: Entry) -> str:
    """``w1#12`` (``g2.w1#12`` with several groups): what ``--mark`` takes."""
    return f"{entry.worker}#{entry.seq}"


def bounded(entries: Sequence[Entry], marked: Iterable[int], max_lines: int | None
            ) -> list[Entry | int]:
    """``entries`` cut to ``max_lines``: every marked one (the earliest, if there are more
    than that), then the entries nearest to a marked one, growing outwards one at a time on
    each side. A run of left-out entries becomes the number left out, so the rendering can
    say so; whole lines only, never part of one."""
    if max_lines is None or len(entries) <= max_lines:
        return list(entries)
    marks = set(marked)
    centres = [i for i, e in enumerate(entries) if e.ref in marks][:max_lines]
    keep = set(centres)
    reach = 1
    while len(keep) < max_lines and reach < len(entries):
        for c in centres:
            for i in (c - reach, c + reach):
                if 0 <= i < len(entries) and len(keep) < max_lines:
                    keep.add(i)
        reach += 1
    if not centres:
        keep = set(range(max_lines))
    out: list[Entry | int] = []
    gap = 0
    for i, e in enumerate(entries):
        if i in keep:
            if gap:
                out.append(gap)
                gap = 0
            out.append(e)
        else:
            gap += 1
    if gap:
        out.append(gap)
    return out


def render_bounded(entries: Sequence[Entry], origin: float, *, marked: Iterable[int] = (),
                   max_lines: int | None = None, indent: str = "    ") -> str:
    """``render``, with at most ``max_lines`` calls (``bounded``) and a line saying how many
    calls were left out wherever some were."""
    marks = set(marked)
    lines = []
    for item in bounded(entries, marks, max_lines):
        if isinstance(item, int):
            lines.append(f"{indent}  … {item} call{'s' if item != 1 else ''} not shown")
        else:
            lines.append(render([item], origin, marked=marks, indent=indent))
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class CitedSlice:
    """An anomaly's slice of the timeline and the window it was cut from.

    ``around`` and ``window`` are seconds after the run's first call, rounded as the
    ``timeline`` command takes them, so the command prints exactly ``text``.
    """

    text: str
    around: float
    window: float
    marks: tuple[str, ...]
    max_lines: int

    def command(self, logdir: str | Path) -> str:
        """The shell command that prints the same lines from the kept logs."""
        marks = "".join(f" --mark {m}" for m in self.marks)
        return (f"python -m chongming_conformance.stress timeline {logdir} "
                f"--around {self.around:.5f} --window {self.window:.5f}{marks} "
                f"--max-lines {self.max_lines}")


def window_of(ops: Sequence[Op], zero: float, seconds: float) -> tuple[float, float]:
    """(around, window) covering every cited call widened by ``seconds``, in seconds after
    ``zero``, rounded outwards to 0.1 ms and then to the 5 decimals the command prints."""
    start = min(o.t_invoke for o in ops) - seconds - zero
    ends = [o.t_return for o in ops if o.t_return is not None]
    last = max(ends) if len(ends) == len(ops) else max(o.t_invoke for o in ops)
    end = last + seconds - zero
    lo = math.floor(start * 10_000) / 10_000
    hi = math.ceil(end * 10_000) / 10_000
    return float(f"{(lo + hi) / 2:.5f}"), float(f"{(hi - lo) / 2 + 0.00001:.5f}")


def in_window(entries: Sequence[Entry], zero: float, around: float, window: float
              ) -> list[Entry]:
    """The entries overlapping ``around ± window`` (seconds after ``zero``): one formula for
    the verdict and the command, so both pick the same calls."""
    return select(entries, start=zero + around - window, end=zero + around + window)


def cited_slice(groups: Iterable[tuple[str, Logs]] | Logs, ops: Sequence[Op], *,
                seconds: float = SLICE_SECONDS, max_lines: int = SLICE_LINES) -> CitedSlice | None:
    """Every worker's calls around ``ops`` (merged, time-ordered, ``ops`` marked ``»``),
    bounded to ``max_lines``; None when ``ops`` is empty. ``groups`` are the run's groups of
    workers with their prefixes, as ``read_log_dir`` names them."""
    pairs = [("", groups)] if isinstance(groups, Logs) else list(groups)
    return slice_of(entries_from_logs(pairs), ops, seconds=seconds, max_lines=max_lines)


def slice_of(entries: Sequence[Entry], ops: Sequence[Op], *, seconds: float = SLICE_SECONDS,
             max_lines: int = SLICE_LINES) -> CitedSlice | None:
    """``cited_slice`` on a run's entries (``entries_from_logs``), computed once for many."""
    if not ops:
        return None
    zero = origin_of(entries)
    around, window = window_of(ops, zero, seconds)
    shown = in_window(entries, zero, around, window)
    refs = {id(o) for o in ops}
    marks = tuple(label_of(e) for e in shown if e.ref in refs)
    text = render_bounded(shown, zero, marked=refs, max_lines=max_lines, indent="")
    return CitedSlice(text, around, window, marks, max_lines)


# -- the command ----------------------------------------------------------------------------

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chongming_conformance.stress timeline",
        description="Print every worker's store calls of a kept stress run, merged in "
                    "time order.")
    parser.add_argument("logdir", help="the folder a failing run's report says it kept")
    parser.add_argument("--task", help="only calls that mention this task id")
    parser.add_argument("--command", help="only calls that mention this command id")
    parser.add_argument("--around", type=float, metavar="SECONDS",
                        help="only calls around this time (seconds, as the lines show)")
    parser.add_argument("--window", type=float, default=0.5, metavar="SECONDS",
                        help="half-width of --around's window (default 0.5)")
    parser.add_argument("--mark", action="append", default=[], metavar="WORKER#SEQ",
                        help="mark this call with » (e.g. w1#12, g2.w1#12; repeatable)")
    parser.add_argument("--max-lines", type=int, metavar="N",
                        help="at most N calls: the marked ones and their nearest neighbours")
    args = parser.parse_args(argv)
    try:
        groups = read_log_dir(Path(args.logdir))
    except FileNotFoundError as exc:
        print(exc, file=sys.stderr)
        return 4
    entries = run_entries(groups, args.logdir)
    zero = origin_of(entries)
    if args.around is not None:
        entries = in_window(entries, zero, args.around, args.window)
    shown = select(entries, task=args.task, command=args.command)
    if not shown:
        print("no call matches", file=sys.stderr)
        return 1
    marks = {e.ref for e in shown if label_of(e) in set(args.mark)}
    print(render_bounded(shown, zero, marked=marks, max_lines=args.max_lines, indent=""))
    return 0
