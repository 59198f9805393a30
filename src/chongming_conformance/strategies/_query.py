"""Query strategies: TaskQuery values from fixed pools, or aimed at what a store holds.

One job: filters that select something (pooled values, every prefix of a pooled name, a
metacharacter of each pattern language) and queries built around the LIMIT-before-WHERE
bug. Split out of :mod:`chongming_conformance.strategies` because it is the one strategy
that reads the oracle (``matches``: which stored task a filter passes). Import the names
from :mod:`chongming_conformance.strategies`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..oracle import matches
from ..protocol.alphabet import METACHARACTERS
from ..protocol.model import TaskQuery, TaskSnapshot
from ._number import buckets, limits
from ._record import statuses
from ._text import identifiers, names, tags
from .pools import BUCKET_POOL, NAME_POOL, PIPELINE_POOL, PREFIX_POOL, TAG_POOL

__all__ = ["queries", "queries_for"]


@functools.lru_cache(maxsize=1)
def _metacharacter_prefixes() -> SearchStrategy[str]:
    """``a`` + one metacharacter, the pattern language drawn first (see alphabet.py)."""
    return st.sampled_from(sorted(METACHARACTERS)).flatmap(
        lambda language: st.sampled_from(METACHARACTERS[language]).map(lambda c: "a" + c))


def _pick(pool: Sequence[Any], fallback: SearchStrategy[Any]) -> SearchStrategy[Any]:
    """A filter value: from ``pool`` (it hits data) or ``fallback`` (it may not)."""
    return st.sampled_from(list(pool)) | fallback if pool else fallback


def _prefixes(values: Sequence[str]) -> list[str]:
    return sorted({v[:i] for v in values for i in range(len(v) + 1)})


def queries(
    *,
    names_pool: Sequence[str] = NAME_POOL,
    tags_pool: Sequence[str] = TAG_POOL,
    buckets_pool: Sequence[int] = BUCKET_POOL,
    pipelines_pool: Sequence[str] = PIPELINE_POOL,
) -> SearchStrategy[TaskQuery]:
    """TaskQuery values: every filter None or set, empty collections included.

    The pools aim filters at the data (the defaults are the pools that
    :func:`snapshot_lists` draws from) so they select something; every prefix
    of every pooled name is a ``name_prefix`` candidate, which is how unescaped
    ``%`` and ``_`` get caught. Keep the pools fixed per test rather than
    derived from drawn data: the shrinker then stays fast.
    """
    return _queries(tuple(names_pool), tuple(tags_pool), tuple(buckets_pool), tuple(pipelines_pool))


@functools.lru_cache(maxsize=64)
def _queries(
    names_pool: tuple[str, ...],
    tags_pool: tuple[str, ...],
    buckets_pool: tuple[int, ...],
    pipelines_pool: tuple[str, ...],
) -> SearchStrategy[TaskQuery]:
    values: dict[str, SearchStrategy[Any]] = {
        "statuses": st.frozensets(statuses()),
        "name": _pick(names_pool, names()),
        # Adversarial prefixes ("build ", "Build"...) come whole from names(); one draw in
        # three is "a" + a metacharacter, each pattern language (LIKE, GLOB, regex, JSON
        # path) as often as the others.
        "name_prefix": st.one_of(
            st.sampled_from(PREFIX_POOL),
            _pick(_prefixes(names_pool), names()),
            _metacharacter_prefixes(),
        ),
        "tag": _pick(tags_pool, tags()),
        "buckets": st.frozensets(
            st.sampled_from(list(buckets_pool)) | buckets() if buckets_pool else buckets(),
            max_size=3,
        ),
        "pipeline_run_id": _pick(pipelines_pool, identifiers()),
    }
    order = {"limit": st.none() | limits(), "newest_first": st.booleans()}
    # One filter alone is how a wrong filter shows (AND with others hides it);
    # any combination is how a wrong combination shows.
    single = st.one_of(
        [st.builds(TaskQuery, **{name: value}, **order) for name, value in values.items()]
    )
    combined = st.builds(
        TaskQuery, **{name: st.none() | value for name, value in values.items()}, **order
    )
    return st.one_of(single, single, combined)  # two thirds single-filter



def queries_for(tasks: Sequence[TaskSnapshot]) -> SearchStrategy[TaskQuery]:
    """Queries aimed at what a store holds: filter values taken from ``tasks``.

    Fixed pools (:func:`queries`) hit the data only when generation happens to draw a
    value some task has; a bug that shows only when a filter matches *and* a limit cuts
    the result (a LIMIT applied before the WHERE) then hides. Here every filter value
    is a value of some task -- its name, a prefix of its name, one of its tags, its
    bucket, its run id, its status -- often two filters at once. Half the queries are
    built around that bug: the task that comes first in the requested order fails the
    filter, some later one passes it, and a limit asks for no more than the matches.
    """
    if not tasks:
        return queries()
    pool = list(tasks)

    def value_of(draw: st.DrawFn, task: TaskSnapshot, kind: str) -> dict[str, Any]:
        if kind == "name":
            return {"name": task.name}
        if kind == "name_prefix":
            return {"name_prefix": task.name[: draw(st.integers(0, len(task.name)))]}
        if kind == "tag" and task.tags:
            return {"tag": draw(st.sampled_from(sorted(task.tags)))}
        if kind == "buckets" and task.bucket is not None:
            return {"buckets": frozenset({task.bucket})}
        if kind == "pipeline_run_id" and task.pipeline_run_id is not None:
            return {"pipeline_run_id": task.pipeline_run_id}
        return {"statuses": frozenset({task.status})}

    kinds = st.sampled_from(
        ("name", "name_prefix", "tag", "buckets", "pipeline_run_id", "statuses"))

    @st.composite
    def build(draw: st.DrawFn) -> TaskQuery:
        newest_first = draw(st.booleans(), label="newest_first")
        fields: dict[str, Any] = {}
        if len(pool) > 1 and draw(st.booleans(), label="first row fails the filter"):
            ordered = sorted(pool, key=lambda t: (t.created_at.astimezone(UTC), t.task_id),
                             reverse=newest_first)
            for _ in range(4):  # a filter some later task passes and the first one fails
                other = draw(st.sampled_from(ordered[1:]), label="passing task")
                candidate = value_of(draw, other, draw(kinds))
                if not matches(ordered[0], TaskQuery(**candidate)):
                    fields = candidate
                    break
        if not fields:
            for _ in range(draw(st.integers(1, 2), label="filters")):
                fields.update(value_of(draw, draw(st.sampled_from(pool)), draw(kinds)))
        hits = sum(1 for t in pool if matches(t, TaskQuery(**fields)))
        limit = draw(st.one_of(
            st.integers(1, max(hits, 1)),  # at most the matches: a cut-short answer shows
            st.none(),
            st.integers(1, hits + 1),  # never 0: a store may refuse it (limits())
        ), label="limit")
        return TaskQuery(**fields, limit=limit, newest_first=newest_first)

    return build()
