"""A history cut into partitions: sets of objects checked independently.

Objects (``projection.py``): a task's snapshot, a task's history, a command. Every
single-object call goes to its object. Objects are put in one partition only when
one call must change them in one step: a prune that may drop a task drops its
history and may drop its commands with it, so a task that may ever be terminal
shares a partition with its history and its commands. Everything else is a
partition of one object. The cross-object calls are projected:

* ``claim_commands`` that returned: onto each command it returned (one projection
  per partition); one that failed or never returned: onto every command, as a
  step that may lease it if it was claimable;
* ``query`` that returned: onto each task it returned, and onto each other task
  when the answer constrains it (a task left out must have been missing, not
  matching, or cut off by the limit);
* ``prune``: onto each task that may be terminal (with its history and commands);
  a prune that returned 0 dropped nothing and is left out altogether;
* ``counts``: onto nothing -- its range check is in ``check.py``.

Reads of unknown outcome (a get that raised) constrain nothing and are left out;
so is ``close`` (it changes nothing another instance sees). So are the reads and
prunes of a task that is certainly missing at their point (before its first
create could be invoked, or once an unfiltered query saw it gone after its last
create had ended): they hold whatever the order. Under the strict skip policy,
a claim is also projected onto each command it left out although no concurrent
call could hold it locked.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ...oracle import Model
from ...protocol.model import Command, TaskQuery, TaskSnapshot
from . import projection as pj
from .history import Call, Outcome
from .projection import Key, Projection, State, Step

__all__ = ["Partition", "describe_key", "gone_queries", "overlap", "partition_history",
           "possibly_terminal"]

#: Reads: a call of unknown outcome among them constrains nothing.
READS = frozenset({"get", "history", "query", "counts"})
#: Calls that are not partitioned (``counts``: a range check; ``close``: local).
UNPARTITIONED = frozenset({"counts", "close"})
KNOWN = frozenset(pj.SINGLE) | {"claim_commands", "query", "prune", "counts", "close"}


def describe_key(key: Key) -> str:
    kind, name = key
    return {"task": "task", "hist": "history of", "cmd": "command"}[kind] + f" {name!r}"


@dataclass(slots=True, eq=False)
class Partition:
    """Objects checked together, the projections onto them and their initial state."""

    keys: tuple[Key, ...]
    init: State
    projections: list[Projection] = field(default_factory=list)
    strict: list[Step] = field(default_factory=list)
    weak: list[Step | None] = field(default_factory=list)

    @property
    def name(self) -> str:
        """``task 'x'``, or ``task 'x' with its history and 2 commands``."""
        if len(self.keys) == 1:
            return describe_key(self.keys[0])
        tasks = [name for kind, name in self.keys if kind == "task"]
        hists = [name for kind, name in self.keys if kind == "hist"]
        cmds = [name for kind, name in self.keys if kind == "cmd"]
        if not tasks:
            return ", ".join(describe_key(k) for k in self.keys)
        head = ", ".join(f"task {t!r}" for t in tasks)
        extra = []
        if hists:
            extra.append("its history" if len(tasks) == 1 and hists == tasks else
                         f"{len(hists)} histories")
        if cmds:
            extra.append(f"{len(cmds)} command{'s' if len(cmds) != 1 else ''}")
        return head + (" with " + " and ".join(extra) if extra else "")

    def compile(self) -> None:
        index = {k: i for i, k in enumerate(self.keys)}
        self.strict, self.weak = [], []
        for p in self.projections:
            strict, weak = p.make([(k, index[k]) for k in p.keys])
            self.strict.append(strict)
            self.weak.append(weak)


class _Union:
    def __init__(self) -> None:
        self.parent: dict[Key, Key] = {}

    def find(self, k: Key) -> Key:
        self.parent.setdefault(k, k)
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def union(self, a: Key, b: Key) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _snapshot_arg(call: Call) -> TaskSnapshot | None:
    snap = call.args.get("snapshot")
    return snap if isinstance(snap, TaskSnapshot) else None


def possibly_terminal(calls: Iterable[Call], initial: Model | None) -> set[str]:
    """Tasks that some create or save may have made terminal (or that start terminal)."""
    out = {t for t, s in (initial.tasks.items() if initial else ()) if s.status.is_terminal}
    for c in calls:
        snap = _snapshot_arg(c)
        if (c.method in ("create", "save") and snap is not None and snap.status.is_terminal
                and c.outcome is not Outcome.CONFLICT):
            out.add(snap.task_id)
    return out


def _gone_after(calls: Sequence[Call]) -> dict[str, float]:
    """Per task, a time after which it is certainly missing, when there is one.

    An unfiltered query that returned without its limit cutting it, and did not return
    the task, saw it missing at its point; if every create of the task had ended before
    that query was invoked, nothing can bring it back. So from the query's return on,
    a call on the task that only reads or deletes it is a no-op on a missing task, and
    leaving it out of the partition changes nothing the search decides.
    """
    return {t: c.end for t, c in gone_queries(calls).items()}


def gone_queries(calls: Sequence[Call]) -> dict[str, Call]:
    """Per task, the query from whose return on it is certainly missing (``_gone_after``)."""
    last_create: dict[str, float] = {}
    for c in calls:
        if c.method == "create":
            tid = c.args["snapshot"].task_id
            last_create[tid] = max(last_create.get(tid, -math.inf), c.end)
    gone: dict[str, Call] = {}
    for c in calls:
        if (c.method != "query" or c.outcome is not Outcome.OK
                or c.args.get("query") not in (None, TaskQuery())):
            continue
        returned = {s.task_id for s in c.result or []}
        for tid, end in last_create.items():
            if tid not in returned and end < c.t_invoke and (
                    tid not in gone or c.end < gone[tid].end):
                gone[tid] = c
    return gone


def _prunes(call: Call) -> bool:
    """May this prune have dropped anything?"""
    return not (call.outcome is Outcome.OK and call.result == 0)


#: May a claim skip a command it did not return? "any": always (the guide's SKIP LOCKED:
#: which commands a concurrent transaction holds locked is the engine's business);
#: "concurrent": only if some call concurrent with the claim may hold it locked -- another
#: claim, a prune, or a submit/complete/release of that command.
SKIP_POLICIES = ("any", "concurrent")


def overlap(a: Call, b: Call) -> bool:
    """Do the two calls' intervals meet (a call of unknown outcome ends never)?"""
    return a.t_invoke <= b.end and b.t_invoke <= a.end


def _left_out(calls: Sequence[Call]) -> dict[int, list[str]]:
    """Per claim (by id()), the commands it left out that nothing concurrent could lock,
    that existed and were not certainly finished: what the strict policy constrains."""
    claims = [c for c in calls if c.method == "claim_commands"]
    prunes = [c for c in calls if c.method == "prune"]
    touching: dict[str, list[Call]] = defaultdict(list)
    first_submit: dict[str, float] = {}
    finished: dict[str, float] = {}  # a completion certainly landed on it, from then on
    submitted_by: dict[str, float] = {}
    for c in calls:
        if c.method == "submit_command":
            cid = c.args["command"].command_id
            touching[cid].append(c)
            first_submit[cid] = min(first_submit.get(cid, math.inf), c.t_invoke)
            if c.outcome is Outcome.OK:
                submitted_by[cid] = min(submitted_by.get(cid, math.inf), c.end)
        elif c.method in ("complete_command", "release_command"):
            touching[c.args["command_id"]].append(c)
    for c in calls:
        if c.method == "complete_command" and c.outcome is Outcome.OK:
            cid = c.args["command_id"]
            if submitted_by.get(cid, math.inf) < c.t_invoke:
                finished[cid] = min(finished.get(cid, math.inf), c.end)
    out: dict[int, list[str]] = {}
    for c in claims:
        if c.outcome is not Outcome.OK or any(
                o is not c and overlap(o, c) for o in (*claims, *prunes)):
            continue
        returned = {cmd.command_id for cmd in c.result or []}
        out[id(c)] = [cid for cid, start in first_submit.items()
                      if cid not in returned and start <= c.end
                      and finished.get(cid, math.inf) >= c.t_invoke
                      and not any(overlap(o, c) for o in touching[cid])]
    return out


def partition_history(calls: Sequence[Call], initial: Model | None = None, *,
                      skip: str = "any") -> list[Partition]:
    """The partitions of ``calls`` with their projections, compiled, largest first.

    ``skip``: the SKIP LOCKED policy for claims (``SKIP_POLICIES``).
    """
    if skip not in SKIP_POLICIES:
        raise ValueError(f"unknown skip policy {skip!r}; one of {SKIP_POLICIES}")
    unknown = sorted({c.method for c in calls} - KNOWN)
    if unknown:
        raise ValueError(f"the history has calls the checker does not know: {unknown}")
    keys: set[Key] = set()
    commands_of: dict[str, set[str]] = defaultdict(set)
    first_create: dict[str, float] = {}
    if initial is not None:
        keys |= {("task", t) for t in initial.tasks}
        keys |= {("hist", t) for t, _ in initial.history}
        for cid, cmd in initial.commands.items():
            keys.add(("cmd", cid))
            commands_of[cmd.task_id].add(cid)
    for c in calls:
        m = c.method
        if m in ("create", "save"):
            snap = c.args["snapshot"]
            keys.add(("task", snap.task_id))
            if m == "create":
                first_create[snap.task_id] = min(first_create.get(snap.task_id, math.inf),
                                                 c.t_invoke)
        elif m in ("get", "touch"):
            keys.add(("task", c.args["task_id"]))
        elif m == "append":
            keys.add(("hist", c.args["transition"].task_id))
        elif m == "history":
            keys.add(("hist", c.args["task_id"]))
        elif m == "submit_command":
            submitted: Command = c.args["command"]
            keys.add(("cmd", submitted.command_id))
            commands_of[submitted.task_id].add(submitted.command_id)
        elif m in ("complete_command", "release_command"):
            keys.add(("cmd", c.args["command_id"]))
        elif m == "claim_commands" and c.outcome is Outcome.OK:
            for cmd in c.result or []:
                keys.add(("cmd", cmd.command_id))
                commands_of[cmd.task_id].add(cmd.command_id)
        elif m == "query" and c.outcome is Outcome.OK:
            keys |= {("task", s.task_id) for s in c.result or []}
    gone = _gone_after(calls)
    left_out = _left_out(calls) if skip == "concurrent" else {}
    terminal = possibly_terminal(calls, initial)
    pruning = [c for c in calls if c.method == "prune" and _prunes(c)]
    uf = _Union()
    for k in keys:
        uf.find(k)
    if pruning:
        for t in terminal:
            keys |= {("task", t), ("hist", t)}
            uf.union(("task", t), ("hist", t))
            for cid in commands_of.get(t, ()):
                keys.add(("cmd", cid))
                uf.union(("task", t), ("cmd", cid))
    members: dict[Key, list[Key]] = defaultdict(list)
    for k in sorted(keys):
        members[uf.find(k)].append(k)
    parts: dict[Key, Partition] = {
        root: Partition(tuple(ks), tuple(pj.initial_value(k, initial) for k in ks))
        for root, ks in members.items()
    }
    by_kind: dict[str, list[Key]] = defaultdict(list)
    for k in sorted(keys):
        by_kind[k[0]].append(k)

    def add(projection: Projection) -> None:
        parts[uf.find(projection.keys[0])].projections.append(projection)

    def grouped(ks: Iterable[Key]) -> dict[Key, list[Key]]:
        out: dict[Key, list[Key]] = defaultdict(list)
        for k in ks:
            out[uf.find(k)].append(k)
        return out

    for c in calls:
        m = c.method
        if m in UNPARTITIONED or (m in READS and c.outcome is not Outcome.OK):
            continue
        if m in pj.SINGLE:
            for p in pj.SINGLE[m](c):
                add(p)
        elif m == "claim_commands":
            if c.outcome is Outcome.OK:
                returned = {cmd.command_id: cmd for cmd in c.result or []}
                targets = [("cmd", cid) for cid in returned]
                make = pj.claim_make(c, returned)
            else:
                targets = by_kind["cmd"]
                make = pj.claim_make(c, {})
            for ks in grouped(targets).values():
                add(Projection(c, tuple(ks), make, c.t_invoke, c.end))
            unlocked = [("cmd", cid) for cid in left_out.get(id(c), ())]
            for ks in grouped(unlocked).values():
                add(Projection(c, tuple(ks), pj.claim_left_out_make(c), c.t_invoke, c.end,
                               read=True))
        elif m == "query":
            returned_ids = {s.task_id for s in c.result or []}
            cut, last = pj.query_cut(c)
            constrained = not (cut and last is None)
            targets = []
            for k in by_kind["task"]:
                # A task left out constrains only if it may exist at the query's point.
                absent_ok = (c.end < first_create.get(k[1], math.inf)
                             and pj.initial_value(k, initial) is None) or (
                    c.t_invoke > gone.get(k[1], math.inf))
                if k[1] in returned_ids or (constrained and not absent_ok):
                    targets.append(k)
            make = pj.query_make(c)
            for ks in grouped(targets).values():
                add(Projection(c, tuple(ks), make, c.t_invoke, c.end, read=True))
        elif m == "prune":
            if not _prunes(c):
                continue
            by_part: dict[Key, list[str]] = defaultdict(list)
            for t in sorted(terminal):
                if c.end < first_create.get(t, math.inf) and pj.initial_value(
                        ("task", t), initial) is None:
                    continue  # the task cannot exist yet
                if c.t_invoke > gone.get(t, math.inf):
                    continue  # nor any more
                by_part[uf.find(("task", t))].append(t)
            for root, tasks in by_part.items():
                ks = [k for k in parts[root].keys
                      if k[0] != "cmd" or any(k[1] in commands_of.get(t, ()) for t in tasks)]
                ks = [k for k in ks if k[0] == "cmd" or k[1] in tasks]
                add(Projection(c, tuple(ks), pj.prune_make(c, tasks), c.t_invoke, c.end))
    out = [part for part in parts.values() if part.projections]
    for part in out:
        part.compile()
    out.sort(key=lambda part: (-len(part.projections), part.keys))
    return out
