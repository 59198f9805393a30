"""Calls projected onto the store's objects, and the sequential model's step on each.

The store's state is split into *objects*, each with its own value:

* ``("task", id)`` -- the task's snapshot, or ``None`` while it does not exist;
* ``("hist", id)`` -- the task's history rows, a tuple ascending by version;
* ``("cmd", id)`` -- the command, or ``None`` while it does not exist.

A *projection* is what one call does to the objects of one partition (a set of
objects checked together, ``partition.py``): a strict step (the call as recorded:
what it returned must be what the model gives) and, for a call with an effect, a
weak step (the effect may or may not happen: what a call of unknown outcome does,
and what minimisation turns a dropped write into). Every step takes the
partition's state -- a tuple of the values of its objects -- and returns

* ``None``: valid, nothing changes (a read);
* a tuple of states: valid, and these are the possible next states (more than one
  where the model is nondeterministic: an unknown outcome, a prune's choice);
* a string: invalid, and why (the explanation of a failure quotes it).

Every rule comes from the oracle (``chongming_conformance.oracle``): the step loads
the objects it touches into an oracle ``Model``, calls the model's method, and
reads the objects back; ``matches``, ``claimable`` and ``instant`` decide queries,
claims and order, and a claimed command is compared with the stored one as
``oracle.check_claim`` does (the same record, ``lease_until = now + lease_seconds``).

Over the kit's 600-line limit (tests/test_module_size.py): one projection per method of
the protocol, kept side by side so that each reads as the model's call it mirrors; a
split by method family is pending.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Any

from ...oracle import Model, claimable, instant, matches
from ...protocol.model import Command, TaskQuery, TaskSnapshot, Transition
from ..timeline import format_value, when
from .history import Call, Outcome

__all__ = [
    "Key",
    "Projection",
    "State",
    "StepResult",
    "describe_command",
    "describe_snapshot",
    "initial_value",
]

Key = tuple[str, str]
State = tuple[Any, ...]
StepResult = tuple[State, ...] | str | None
Step = Callable[[State], StepResult]
#: (the object, its position in the partition's state)
Slot = tuple[Key, int]


# -- describing values (failure reasons) ---------------------------------------------------

def _when(value: datetime | None) -> str:
    return "none" if value is None else when(value)


def describe_snapshot(snap: TaskSnapshot | None) -> str:
    """``v5 running 'w1-s3' lease w0 until t+100012s`` (or ``missing``)."""
    if snap is None:
        return "missing"
    lease = ("" if snap.lease_owner is None and snap.lease_until is None else
             f" lease {snap.lease_owner} until {_when(snap.lease_until)}")
    progress = "" if snap.progress is None else f" progress {snap.progress.done}"
    return f"v{snap.status_version} {snap.status.value} {snap.name!r}{progress}{lease}"


def describe_command(cmd: Command | None) -> str:
    """``leased until t+4s`` / ``free`` / ``finished at t+5s`` / ``missing``."""
    if cmd is None:
        return "missing"
    if cmd.finished_at is not None:
        return f"finished at {_when(cmd.finished_at)} ({cmd.outcome!r})"
    if cmd.lease_until is not None:
        return f"leased until {_when(cmd.lease_until)}"
    return "free"


def _shown(value: Any) -> str:
    return format_value(value, 60)


def _diff(want: Any, got: Any, limit: int = 3) -> str:
    """The first fields two records differ in: ``status_version 3 (model 5)``."""
    if want is None or got is None or type(want) is not type(got):
        return f"{_shown(got)} (model {_shown(want)})"
    out = [f"{f.name} {_shown(getattr(got, f.name))} (model {_shown(getattr(want, f.name))})"
           for f in fields(want) if getattr(want, f.name) != getattr(got, f.name)]
    more = f" and {len(out) - limit} more field(s)" if len(out) > limit else ""
    return ", ".join(out[:limit]) + more if out else "equal"


# -- the oracle on a partition's objects ---------------------------------------------------

def _load(state: State, slots: Sequence[Slot]) -> Model:
    m = Model()
    for (kind, name), i in slots:
        value = state[i]
        if kind == "task":
            if value is not None:
                m.tasks[name] = value
        elif kind == "hist":
            m.history.update(((name, row.version), row) for row in value)
        elif value is not None:
            m.commands[name] = value
    return m


def _values(m: Model, slots: Sequence[Slot]) -> list[tuple[int, Any]]:
    out: list[tuple[int, Any]] = []
    for (kind, name), i in slots:
        if kind == "task":
            out.append((i, m.tasks.get(name)))
        elif kind == "hist":
            out.append((i, tuple(m.history_of(name))))
        else:
            out.append((i, m.commands.get(name)))
    return out


def _with(state: State, changes: Sequence[tuple[int, Any]]) -> State:
    new = list(state)
    for i, value in changes:
        new[i] = value
    return tuple(new)


def initial_value(key: Key, initial: Model | None) -> Any:
    """An object's value in the store a history starts from (empty by default)."""
    kind, name = key
    if kind == "hist":
        return () if initial is None else tuple(initial.history_of(name))
    if initial is None:
        return None
    return initial.tasks.get(name) if kind == "task" else initial.commands.get(name)


def _maybe(state: State, changed: State | None) -> tuple[State, ...]:
    """Unknown outcome: the effect happened, or it did not."""
    return (state,) if changed is None or changed == state else (state, changed)


# -- projections ----------------------------------------------------------------------------

@dataclass(slots=True, eq=False)
class Projection:
    """What one call does to some objects of one partition.

    ``make(slots)`` compiles the (strict, weak) steps for the objects' positions in
    the partition's state; ``weak`` is None for a read (dropping it loses nothing).
    ``t_invoke``/``t_end`` bound its linearization point (``t_end`` is inf when its
    effect may come at any later time).
    """

    call: Call
    keys: tuple[Key, ...]
    make: Callable[[Sequence[Slot]], tuple[Step, Step | None]]
    t_invoke: float
    t_end: float
    #: A read: its strict step never changes the state.
    read: bool = False

    @property
    def definite(self) -> bool:
        return self.call.definite


def _single(call: Call, key: Key, make: Callable[[Sequence[Slot]], tuple[Step, Step | None]],
            *, read: bool = False) -> Projection:
    return Projection(call, (key,), make, call.t_invoke, call.end, read)


def _unknown_only(effect: Callable[[State, Sequence[Slot]], State | None]
                  ) -> Callable[[Sequence[Slot]], tuple[Step, Step | None]]:
    """Steps of a call whose outcome is unknown: the effect, or nothing."""

    def make(slots: Sequence[Slot]) -> tuple[Step, Step | None]:
        def weak(state: State) -> StepResult:
            return _maybe(state, effect(state, slots))

        return weak, weak

    return make


def _writer(call: Call, ok: Callable[[State, Sequence[Slot]], State | str],
            effect: Callable[[State, Sequence[Slot]], State | None]
            ) -> Callable[[Sequence[Slot]], tuple[Step, Step | None]]:
    """A write: strict = ``ok`` (the recorded outcome); weak = the effect, or nothing."""
    if call.outcome is not Outcome.OK:
        return _unknown_only(effect)

    def make(slots: Sequence[Slot]) -> tuple[Step, Step | None]:
        def strict(state: State) -> StepResult:
            result = ok(state, slots)
            return result if isinstance(result, str) else (result,)

        def weak(state: State) -> StepResult:
            return _maybe(state, effect(state, slots))

        return strict, weak

    return make


def _reader(check: Callable[[State, Sequence[Slot]], str | None]
            ) -> Callable[[Sequence[Slot]], tuple[Step, Step | None]]:
    def make(slots: Sequence[Slot]) -> tuple[Step, Step | None]:
        def strict(state: State) -> StepResult:
            return check(state, slots)

        return strict, None

    return make


# -- snapshots ------------------------------------------------------------------------------

def project_create(call: Call) -> list[Projection]:
    snap: TaskSnapshot = call.args["snapshot"]

    def effect(state: State, slots: Sequence[Slot]) -> State | None:
        m = _load(state, slots)
        return _with(state, _values(m, slots)) if m.create(snap) else None

    def ok(state: State, slots: Sequence[Slot]) -> State | str:
        m = _load(state, slots)
        if not m.create(snap):
            return (f"create({snap.task_id!r}) succeeded, but the task existed "
                    f"({describe_snapshot(m.tasks.get(snap.task_id))})")
        return _with(state, _values(m, slots))

    return [_single(call, ("task", snap.task_id), _writer(call, ok, effect))]


def project_save(call: Call) -> list[Projection]:
    snap: TaskSnapshot = call.args["snapshot"]
    expect: int = call.args["expect_version"]
    key = ("task", snap.task_id)

    def effect(state: State, slots: Sequence[Slot]) -> State | None:
        m = _load(state, slots)
        return _with(state, _values(m, slots)) if m.save(snap, expect) else None

    if call.outcome is Outcome.CONFLICT:
        def make(slots: Sequence[Slot]) -> tuple[Step, Step | None]:
            def strict(state: State) -> StepResult:
                m = _load(state, slots)
                if m.version_of(snap.task_id) == expect:
                    return (f"save({snap.task_id!r}, expect_version={expect}) raised "
                            f"ConcurrencyConflict, but the task was at version {expect} "
                            f"({describe_snapshot(m.tasks.get(snap.task_id))})")
                return None

            return strict, None

        return [Projection(call, (key,), make, call.t_invoke, call.end, read=True)]

    def ok(state: State, slots: Sequence[Slot]) -> State | str:
        m = _load(state, slots)
        if not m.save(snap, expect):
            return (f"save({snap.task_id!r}, expect_version={expect}) succeeded, but the "
                    f"task was {describe_snapshot(m.tasks.get(snap.task_id))}")
        return _with(state, _values(m, slots))

    return [_single(call, key, _writer(call, ok, effect))]


def project_get(call: Call) -> list[Projection]:
    task_id: str = call.args["task_id"]
    got: TaskSnapshot | None = call.result

    def check(state: State, slots: Sequence[Slot]) -> str | None:
        want = _load(state, slots).tasks.get(task_id)
        if want == got:
            return None
        if got is None:
            return f"get({task_id!r}) returned None, but the task was {describe_snapshot(want)}"
        if want is None:
            return f"get({task_id!r}) returned {describe_snapshot(got)}, but the task was missing"
        return (f"get({task_id!r}) returned {describe_snapshot(got)}, but the task was "
                f"{describe_snapshot(want)}: {_diff(want, got)}")

    return [_single(call, ("task", task_id), _reader(check), read=True)]


def project_touch(call: Call) -> list[Projection]:
    task_id: str = call.args["task_id"]
    kwargs = {k: call.args.get(k) for k in ("progress", "heartbeat_at", "lease_owner",
                                            "lease_until")}

    def effect(state: State, slots: Sequence[Slot]) -> State | None:
        m = _load(state, slots)
        m.touch(task_id, **kwargs)
        return _with(state, _values(m, slots))

    def ok(state: State, slots: Sequence[Slot]) -> State | str:
        result = effect(state, slots)
        assert result is not None
        return result

    return [_single(call, ("task", task_id), _writer(call, ok, effect))]


# -- history --------------------------------------------------------------------------------

def project_append(call: Call) -> list[Projection]:
    row: Transition = call.args["transition"]

    def effect(state: State, slots: Sequence[Slot]) -> State | None:
        m = _load(state, slots)
        m.append(row)
        return _with(state, _values(m, slots))

    def ok(state: State, slots: Sequence[Slot]) -> State | str:
        result = effect(state, slots)
        assert result is not None
        return result

    return [_single(call, ("hist", row.task_id), _writer(call, ok, effect))]


def _rows(rows: Sequence[Transition]) -> str:
    return "[" + ", ".join(f"v{r.version} {r.reason!r}" for r in rows) + "]"


def _rows_diff(want: Sequence[Transition], got: Sequence[Transition]) -> str:
    """What a history answer got wrong, in rows: missing, extra, changed, twice, order."""
    versions = [r.version for r in got]
    twice = sorted({v for v in versions if versions.count(v) > 1})
    by_version = {r.version: r for r in want}
    got_versions = set(versions)
    missing = [r for r in want if r.version not in got_versions]
    extra = [r for r in got if r.version not in by_version]
    changed = [r for r in got if r.version in by_version and r != by_version[r.version]]
    parts = []
    if twice:
        parts.append(f"returned version(s) {twice} twice")
    if missing:
        parts.append(f"left out {_rows(missing)}")
    if extra:
        parts.append(f"returned rows that were not there {_rows(extra)}")
    if changed:
        parts.append(f"returned {_rows(changed)} where the rows were "
                     f"{_rows([by_version[r.version] for r in changed])}")
    if not parts and versions != sorted(versions):
        parts.append(f"returned the rows out of version order {versions}")
    return "; ".join(parts) or f"returned {_rows(got)}, but the rows were {_rows(want)}"


def project_history(call: Call) -> list[Projection]:
    task_id: str = call.args["task_id"]
    since: int = call.args.get("since_version", 0)
    got = list(call.result or [])

    def check(state: State, slots: Sequence[Slot]) -> str | None:
        want = _load(state, slots).history_of(task_id, since)
        if want == got:
            return None
        return f"history({task_id!r}, since_version={since}) {_rows_diff(want, got)}"

    return [_single(call, ("hist", task_id), _reader(check), read=True)]


# -- commands -------------------------------------------------------------------------------

def project_submit(call: Call) -> list[Projection]:
    cmd: Command = call.args["command"]

    def effect(state: State, slots: Sequence[Slot]) -> State | None:
        m = _load(state, slots)
        return _with(state, _values(m, slots)) if m.submit(cmd) else None

    def ok(state: State, slots: Sequence[Slot]) -> State | str:
        m = _load(state, slots)
        if not m.submit(cmd):
            return (f"submit_command({cmd.command_id!r}) succeeded, but the command existed "
                    f"(for task {m.commands[cmd.command_id].task_id!r}, "
                    f"{describe_command(m.commands[cmd.command_id])})")
        return _with(state, _values(m, slots))

    return [_single(call, ("cmd", cmd.command_id), _writer(call, ok, effect))]


def _finish(call: Call, release: bool) -> list[Projection]:
    cid: str = call.args["command_id"]
    now: datetime = call.args["now"]
    outcome: str | None = call.args.get("outcome")

    def effect(state: State, slots: Sequence[Slot]) -> State | None:
        m = _load(state, slots)
        if release:
            m.release(cid)
        else:
            m.complete(cid, now, outcome)
        return _with(state, _values(m, slots))

    def ok(state: State, slots: Sequence[Slot]) -> State | str:
        result = effect(state, slots)
        assert result is not None
        return result

    return [_single(call, ("cmd", cid), _writer(call, ok, effect))]


def project_complete(call: Call) -> list[Projection]:
    return _finish(call, release=False)


def project_release(call: Call) -> list[Projection]:
    return _finish(call, release=True)


def claim_lease(call: Call) -> datetime:
    now: datetime = call.args["now"]
    return now + timedelta(seconds=call.args["lease_seconds"])


def claim_make(call: Call, returned: Mapping[str, Command]
               ) -> Callable[[Sequence[Slot]], tuple[Step, Step | None]]:
    """A claim on some commands of one partition.

    Strict (the claim returned): each command it returned was claimable at ``now``
    (``oracle.claimable``) and comes back exactly as stored with
    ``lease_until = now + lease_seconds``; it is then leased (``Model.adopt_claim``).
    A command of the partition it did not return is left alone: the claim may have
    skipped it (SKIP LOCKED); starvation is judged by the scenarios, not here.
    Weak (unknown outcome): each command claimable at ``now`` may or may not be leased.
    """
    now: datetime = call.args["now"]
    until = claim_lease(call)
    what = (f"claim_commands(now={_when(now)}, lease_seconds={call.args['lease_seconds']:g}, "
            f"limit={call.args.get('limit')})")

    def make(slots: Sequence[Slot]) -> tuple[Step, Step | None]:
        mine = [(key, i) for key, i in slots if key[1] in returned]

        def strict(state: State) -> StepResult:
            m = _load(state, mine)
            for (_, cid), _i in mine:
                stored = m.commands.get(cid)
                if stored is None:
                    return f"{what} returned {cid!r}, which did not exist"
                if not claimable([stored], now):
                    return f"{what} returned {cid!r}, which was {describe_command(stored)}"
                want = replace(stored, lease_until=until)
                if returned[cid] != want:
                    return f"{what} returned {cid!r} as {_diff(want, returned[cid])}"
            m.adopt_claim(returned[cid] for (_, cid), _i in mine)
            return (_with(state, _values(m, mine)),)

        def weak(state: State) -> StepResult:
            options: list[list[tuple[int, Any]]] = []
            for _key, i in slots:
                stored = state[i]
                if stored is not None and claimable([stored], now):
                    options.append([(i, stored), (i, replace(stored, lease_until=until))])
            if not options:
                return None
            return tuple(_with(state, combo) for combo in itertools.product(*options))

        return (strict if call.outcome is Outcome.OK else weak), weak

    return make


def claim_cut(call: Call) -> tuple[bool, datetime | None]:
    """Did the claim's limit cut its answer, and at which created_at instant? (As
    ``query_cut``: a command left out may have been beyond the limit only if it sorts
    at or after the newest one returned; ``None``: anything may, ``limit <= 0``.)"""
    limit = int(call.args.get("limit", 50))
    result: Sequence[Command] = call.result or []
    if limit <= 0:
        return True, None
    if len(result) < limit:
        return False, None
    return True, max(instant(c.created_at) for c in result)


def claim_left_out_make(call: Call) -> Callable[[Sequence[Slot]], tuple[Step, Step | None]]:
    """Under the strict SKIP LOCKED policy: commands a claim left out although no
    concurrent call could hold them locked. Each was missing, not claimable at ``now``,
    or beyond the limit (not older than the newest command it returned).

    A lease that ends exactly at ``now`` may still hold there (CLAIM-LEASE-BOUNDARY is a
    SHOULD; the MUST clauses accept both readings), so such a command may be left out; a
    claim that does return it is judged claimable (``claim_make``)."""
    now: datetime = call.args["now"]
    cut, last = claim_cut(call)
    what = (f"claim_commands(now={_when(now)}, limit={call.args.get('limit')}) returned "
            f"{len(call.result or [])} command(s)")

    def check(state: State, slots: Sequence[Slot]) -> str | None:
        for (_, cid), i in slots:
            stored: Command | None = state[i]
            if stored is None or not claimable([stored], now, free_at_boundary=False):
                continue
            if cut and (last is None or instant(stored.created_at) >= last):
                continue
            state_ = ("free" if stored.lease_until is None else
                      f"claimable (its lease ended at {_when(stored.lease_until)})")
            order = (", older than the newest one it returned," if cut else "")
            return (f"{what} without {cid!r}, which was {state_}{order} and locked by no "
                    "concurrent call (strict SKIP LOCKED)")
        return None

    return _reader(check)


# -- cross-object reads and prune -----------------------------------------------------------

def query_of(call: Call) -> TaskQuery:
    q = call.args.get("query")
    return TaskQuery() if q is None else q


def query_cut(call: Call) -> tuple[bool, datetime | None]:
    """Did the query's limit cut its answer, and at which created_at instant?

    ``(False, None)``: every matching task is in the answer. ``(True, key)``: a
    matching task may be missing only if it sorts at or after ``key`` (ties: any
    order); ``key`` None: anything may be missing (``limit=0``).
    """
    q = query_of(call)
    result: Sequence[TaskSnapshot] = call.result or []
    if q.limit is None or len(result) < q.limit:
        return False, None
    if not result:
        return True, None
    return True, instant(result[-1].created_at)


def query_make(call: Call) -> Callable[[Sequence[Slot]], tuple[Step, Step | None]]:
    """A query's read of some task objects of one partition.

    A task it returned was exactly that snapshot at the point and matched the
    filters (``oracle.matches``); a task it did not return was missing, or did not
    match, or (when the limit cut the answer) sorts after the last one returned.
    """
    q = query_of(call)
    result: Sequence[TaskSnapshot] = call.result or []
    by_id: dict[str, TaskSnapshot] = {}
    for snap in result:
        by_id.setdefault(snap.task_id, snap)
    cut, last = query_cut(call)

    def beyond(snap: TaskSnapshot) -> bool:
        if not cut:
            return False
        if last is None:
            return True
        key = instant(snap.created_at)
        return key >= last if not q.newest_first else key <= last

    def check(state: State, slots: Sequence[Slot]) -> str | None:
        for (_, task_id), i in slots:
            stored: TaskSnapshot | None = state[i]
            got = by_id.get(task_id)
            if got is not None:
                if stored != got:
                    return (f"query returned task {task_id!r} as {describe_snapshot(got)}, but "
                            f"it was {describe_snapshot(stored)}"
                            + ("" if stored is None else f": {_diff(stored, got)}"))
                if not matches(stored, q):
                    return f"query returned task {task_id!r}, which does not match {q!r}"
            elif stored is not None and matches(stored, q) and not beyond(stored):
                return (f"query left out task {task_id!r}, which matched and was "
                        f"{describe_snapshot(stored)}")
        return None

    return _reader(check)


def prune_make(call: Call, tasks: Sequence[str]
               ) -> Callable[[Sequence[Slot]], tuple[Step, Step | None]]:
    """A prune on some possibly-terminal tasks of one partition (``Model.adopt_prune``).

    Per task: if it is terminal at the point it may be dropped -- which of the
    terminal tasks go depends on the others (the oldest beyond ``keep_terminal``),
    so here it is a free choice -- together with all its history rows; each of its
    commands may go with it or stay (PRUNE-COMMANDS is a SHOULD). A task that is
    not terminal stays, with everything it has.
    """

    def make(slots: Sequence[Slot]) -> tuple[Step, Step | None]:
        index = dict(slots)
        commands = [(name, i) for (kind, name), i in slots if kind == "cmd"]

        def step(state: State) -> StepResult:
            variants: list[State] = [state]
            for task_id in tasks:
                snap = state[index[("task", task_id)]]
                if snap is None or not snap.status.is_terminal:
                    continue
                grown: list[State] = []
                for v in variants:
                    grown.append(v)
                    own = [(("task", task_id), index[("task", task_id)]),
                           (("hist", task_id), index[("hist", task_id)])]
                    m = _load(v, own)
                    m.adopt_prune([task_id])
                    dropped = _with(v, _values(m, own))
                    theirs = [i for _, i in commands
                              if v[i] is not None and v[i].task_id == task_id]
                    for gone in itertools.product((False, True), repeat=len(theirs)):
                        grown.append(_with(dropped, [(i, None) for i, g in zip(theirs, gone,
                                                                              strict=True) if g]))
                variants = grown
            if len(variants) == 1:
                return None
            return tuple(variants)

        return step, step

    return make


#: The single-object calls: method -> its projection.
SINGLE: dict[str, Callable[[Call], list[Projection]]] = {
    "create": project_create,
    "save": project_save,
    "get": project_get,
    "touch": project_touch,
    "append": project_append,
    "history": project_history,
    "submit_command": project_submit,
    "complete_command": project_complete,
    "release_command": project_release,
}
