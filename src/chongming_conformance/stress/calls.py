"""A store call recorded in full: the method, every argument and the whole result, as JSON.

A scenario's verdict usually needs only a summary of each call (``detail`` and the
``summarize``d value ``WorkerContext.call`` logs). The linearizability checker
(``stress.lincheck``) and the timeline need the full call, so ``ctx.call(...,
record=True)`` also logs

* on the ``inv`` line: ``"call": {"method": "save", "args": {"snapshot": ...,
  "expect_version": 3}}`` -- the protocol method and its arguments bound to the
  protocol's parameter names, defaults applied;
* on the ``ret`` line of a call that returned: ``"result": ...`` -- the whole value.

Values are JSON with the kit's codec (``chongming_conformance.protocol.codec``) for the
records, tagged so they decode back to the same objects::

    TaskSnapshot  {"$snapshot": snapshot_to_row(s)}     Transition {"$transition": row}
    Command       {"$command": command_to_row(c)}       Progress   {"$progress": row}
    TaskQuery     {"$query": {field: value}}            datetime   {"$dt": encode_dt(d)}
    counts()      {"$counts": {status value: n}}        list/tuple/str/int/float/bool/None

Anything else is logged as ``{"$repr": repr(x)}`` and decodes to that string.
``decode_value(encode_value(x)) == x`` for every value a store call takes or returns.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from ..protocol import PROTOCOL_METHODS, TaskStore
from ..protocol.codec import (
    command_to_row,
    decode_dt,
    encode_dt,
    progress_to_row,
    row_to_command,
    row_to_snapshot,
    row_to_transition,
    snapshot_to_row,
    transition_to_row,
)
from ..protocol.model import Command, Progress, TaskQuery, TaskSnapshot, TaskStatus, Transition

__all__ = ["decode_args", "decode_value", "encode_value", "method_of", "recorded_call"]


def _encode_query(q: TaskQuery) -> dict[str, Any]:
    return {
        "statuses": None if q.statuses is None else sorted(s.value for s in q.statuses),
        "name": q.name,
        "name_prefix": q.name_prefix,
        "tag": q.tag,
        "buckets": None if q.buckets is None else sorted(q.buckets),
        "pipeline_run_id": q.pipeline_run_id,
        "limit": q.limit,
        "newest_first": q.newest_first,
    }


def _decode_query(row: Mapping[str, Any]) -> TaskQuery:
    statuses = row.get("statuses")
    buckets = row.get("buckets")
    return TaskQuery(
        statuses=None if statuses is None else frozenset(TaskStatus(s) for s in statuses),
        name=row.get("name"),
        name_prefix=row.get("name_prefix"),
        tag=row.get("tag"),
        buckets=None if buckets is None else frozenset(buckets),
        pipeline_run_id=row.get("pipeline_run_id"),
        limit=row.get("limit"),
        newest_first=bool(row.get("newest_first", False)),
    )


def encode_value(value: Any) -> Any:
    """A call's argument or result as tagged JSON (see the module docstring)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, TaskSnapshot):
        return {"$snapshot": snapshot_to_row(value)}
    if isinstance(value, Transition):
        return {"$transition": transition_to_row(value)}
    if isinstance(value, Command):
        return {"$command": command_to_row(value)}
    if isinstance(value, Progress):
        return {"$progress": progress_to_row(value)}
    if isinstance(value, TaskQuery):
        return {"$query": _encode_query(value)}
    if isinstance(value, datetime):
        return {"$dt": encode_dt(value)}
    if isinstance(value, TaskStatus):
        return {"$status": value.value}
    if isinstance(value, Mapping) and all(isinstance(k, TaskStatus) for k in value):
        return {"$counts": {k.value: encode_value(v) for k, v in value.items()}}
    if isinstance(value, list | tuple):
        return [encode_value(v) for v in value]
    return {"$repr": repr(value)}


def decode_value(value: Any) -> Any:
    """Inverse of :func:`encode_value` (lists come back as lists)."""
    if isinstance(value, list):
        return [decode_value(v) for v in value]
    if not isinstance(value, dict) or len(value) != 1:
        return value
    ((tag, body),) = value.items()
    if tag == "$snapshot":
        return row_to_snapshot(body)
    if tag == "$transition":
        return row_to_transition(body)
    if tag == "$command":
        return row_to_command(body)
    if tag == "$progress":
        return Progress(done=body["progress_done"], total=body["progress_total"],
                        message=body["progress_message"])
    if tag == "$query":
        return _decode_query(body)
    if tag == "$dt":
        return decode_dt(body)
    if tag == "$status":
        return TaskStatus(body)
    if tag == "$counts":
        return {TaskStatus(k): decode_value(v) for k, v in body.items()}
    if tag == "$repr":
        return str(body)
    return value


def decode_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """Every argument of a recorded call, decoded."""
    return {name: decode_value(v) for name, v in args.items()}


@functools.cache
def _signature(method: str) -> inspect.Signature:
    return inspect.signature(getattr(TaskStore, method))


def method_of(fn: Callable[..., Any]) -> str:
    """The protocol method ``fn`` calls (a bound store method or a ``functools.partial`` of
    one), or ``"other"`` for anything else (a scenario's own step, such as reopening)."""
    target: Any = fn
    while isinstance(target, functools.partial):
        target = target.func
    method = getattr(target, "__name__", None)
    if method in PROTOCOL_METHODS and getattr(target, "__self__", None) is not None:
        return str(method)
    return "other"


def recorded_call(fn: Callable[..., Any]) -> dict[str, Any]:
    """The ``{"method", "args"}`` record of ``fn``: a store's bound method, or a
    ``functools.partial`` of one, as a scenario hands it to ``WorkerContext.call``.

    The arguments are bound to the *protocol's* signature (so positional and keyword
    spellings give the same record) with its defaults applied. Raises ``TypeError``
    when ``fn`` is not such a call -- a scenario's mistake, reported before the call.
    """
    args: tuple[Any, ...] = ()
    keywords: dict[str, Any] = {}
    target: Any = fn
    while isinstance(target, functools.partial):
        args = (*target.args, *args)
        keywords = {**target.keywords, **keywords}
        target = target.func
    method = getattr(target, "__name__", None)
    if method not in PROTOCOL_METHODS or getattr(target, "__self__", None) is None:
        raise TypeError(
            "record=True needs the store call as a bound store method or a functools.partial "
            f"of one (e.g. partial(store.save, snap, expect_version=3)); got {fn!r}")
    bound = _signature(method).bind(None, *args, **keywords)
    bound.apply_defaults()
    encoded = {name: encode_value(v) for name, v in bound.arguments.items() if name != "self"}
    return {"method": method, "args": encoded}
