"""Assertion helpers the contract, the properties and the state machine share.

``expect_raises`` states "this call must raise X" with every other outcome
named; ``QUERY_CLAUSES`` is the one list of clauses a query-vs-oracle
comparison can show broken; ``query_mismatch`` words a wrong query result
with the *values* the filter read (``t-4 name='build ' (U+0020 SPACE)``), not
only the ids -- an author should not have to read the test to learn that
``t-4`` is the task with the trailing space. Blame notes (which clause a failure is evidence
against) are :mod:`chongming_conformance.oracle.blame`'s job, not this module's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..protocol.alphabet import describe
from ..protocol.model import TaskQuery, TaskSnapshot

__all__ = [
    "FILTER_FIELDS",
    "QUERY_CLAUSES",
    "describe_task",
    "expect_raises",
    "filter_fields",
    "query_mismatch",
]

#: Every clause a comparison of query() against a model can show broken.
QUERY_CLAUSES: tuple[str, ...] = (
    "QUERY-ALL",
    "QUERY-ORDER-CREATED",
    "QUERY-TIES-COMPLETE",
    "QUERY-STATUSES",
    "QUERY-NAME-EXACT",
    "QUERY-NAME-PREFIX-LITERAL",
    "QUERY-TAG-EXACT",
    "QUERY-BUCKETS",
    "QUERY-PIPELINE",
    "QUERY-LIMIT",
    "QUERY-FILTERS-COMBINE",
    "QUERY-EMPTY-SET-MATCHES-NOTHING",
    "TIME-INSTANT-ORDER",
)


def expect_raises(exc_type: type[BaseException], call: Callable[[], object], what: str) -> Any:
    """Assert that ``call()`` raises ``exc_type`` (naming any other outcome); return it."""
    try:
        call()
    except exc_type as exc:
        return exc
    except Exception as exc:
        raise AssertionError(
            f"{what}: expected {exc_type.__name__}, got {type(exc).__name__}: {exc}"
        ) from exc
    raise AssertionError(f"{what}: expected {exc_type.__name__}, nothing was raised")


#: The snapshot field each ``TaskQuery`` filter reads.
FILTER_FIELDS: dict[str, str] = {
    "statuses": "status",
    "name": "name",
    "name_prefix": "name",
    "tag": "tags",
    "buckets": "bucket",
    "pipeline_run_id": "pipeline_run_id",
}


def filter_fields(query: TaskQuery | None) -> tuple[str, ...]:
    """The fields ``query``'s filters read, plus ``created_at`` (order and limit read it)."""
    q = TaskQuery() if query is None else query
    read = [f for flt, f in FILTER_FIELDS.items() if getattr(q, flt) is not None]
    return (*dict.fromkeys(read), "created_at")


def _value(task: TaskSnapshot, field: str) -> str:
    value = getattr(task, field)
    if field == "tags":
        return "{" + ", ".join(describe(t) for t in sorted(value)) + "}"
    if isinstance(value, str):
        return describe(value)
    if field == "created_at":
        return value.isoformat()  # type: ignore[no-any-return]
    return str(getattr(value, "value", value))


def describe_task(task: TaskSnapshot, fields: Iterable[str]) -> str:
    """``t-4 name='build ' (U+0020 SPACE)``: the id, then each named field's value."""
    return " ".join([repr(task.task_id), *(f"{f}={_value(task, f)}" for f in fields)])


def query_mismatch(
    what: str,
    got: Sequence[TaskSnapshot],
    expected: Sequence[TaskSnapshot],
    query: TaskQuery | None,
    *,
    ordered: bool = True,
) -> str | None:
    """None if ``got`` has the ids of ``expected`` (in order unless ``ordered=False``);
    otherwise a message listing each wrongly included and each missing task with
    the fields the query's filters read, so the differing values are on screen.
    """
    got_ids = [t.task_id for t in got]
    want_ids = [t.task_id for t in expected]
    if (got_ids if ordered else sorted(got_ids)) == (want_ids if ordered else sorted(want_ids)):
        return None
    fields = filter_fields(query)
    lines = [f"{what}: expected {want_ids!r}, got {got_ids!r}"]
    wanted = set(want_ids)
    returned = set(got_ids)
    lines += [f"  wrongly included: {describe_task(t, fields)}"
              for t in got if t.task_id not in wanted]
    lines += [f"  missing:          {describe_task(t, fields)}"
              for t in expected if t.task_id not in returned]
    if len(lines) == 1:
        if len(set(got_ids)) < len(got_ids):
            lines.append("  a task is returned more than once")
        else:
            lines += ["  the right tasks in the wrong order:"]
            lines += [f"    {describe_task(t, ('created_at',))}" for t in got]
    return "\n".join(lines)
