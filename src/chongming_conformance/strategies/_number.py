"""Number strategies: versions, buckets, counts, limits and lease durations.

One job: integers inside SQL ``BIGINT`` with the boundaries drawn often, and the limits and
leases the guide defines (never 0, leases exact to the microsecond). Split out of
:mod:`chongming_conformance.strategies` so the integer domain and what the guide leaves
open about limits and leases sit in one short place. Import the names from
:mod:`chongming_conformance.strategies`.
"""

from __future__ import annotations

import functools

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .pools import INT64_MAX, INTEGER_BOUNDARIES

__all__ = [
    "buckets",
    "counts_and_totals",
    "lease_seconds",
    "limits",
    "version_paths",
    "versions",
]


@functools.lru_cache(maxsize=512)
def _bounded_ints(max_value: int) -> SearchStrategy[int]:
    edges = [b for b in INTEGER_BOUNDARIES if b <= max_value]
    return st.one_of(
        st.sampled_from(edges),
        st.integers(min_value=0, max_value=min(max_value, 20)),
        st.integers(min_value=0, max_value=max_value),
    )


@functools.lru_cache(maxsize=512)
def versions(*, max_value: int = INT64_MAX) -> SearchStrategy[int]:
    """``status_version`` / transition versions: 0..``max_value``, boundaries often."""
    return _bounded_ints(max_value)


@functools.lru_cache(maxsize=512)
def buckets() -> SearchStrategy[int]:
    """Bucket numbers: 0..INT64_MAX, boundaries and small numbers often."""
    return _bounded_ints(INT64_MAX)


@functools.lru_cache(maxsize=512)
def counts_and_totals() -> SearchStrategy[int]:
    """``Progress.done`` / ``Progress.total`` values: 0..INT64_MAX, boundaries often."""
    return _bounded_ints(INT64_MAX)


@functools.lru_cache(maxsize=512)
def limits() -> SearchStrategy[int]:
    """Query / claim limits: 1, small, and large (INT32/INT64 max); never 0.

    The controller never passes ``limit=0`` and the original guide does not say what it
    means, so a store may refuse it (docs/backend-guide.md §10): the contract checks it on
    its own, accepting either answer, and no generated check depends on it.
    """
    return st.one_of(
        st.sampled_from((1, 2**31 - 1, INT64_MAX)), st.integers(min_value=1, max_value=10)
    )


@functools.lru_cache(maxsize=512)
def lease_seconds() -> SearchStrategy[float]:
    """Positive lease durations exact to the microsecond: whole seconds and binary fractions.

    Never 0 or less: the guide leaves a non-positive lease open, and a store may refuse it.
    Fractions come often: a store that keeps whole seconds (Redis ``EX``, an integer
    column) holds a 1.5 s lease for 1 s or 2 s.
    """
    return st.one_of(
        st.sampled_from((0.125, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.5, 30.0)),
        st.integers(min_value=1, max_value=86_400 * 4).map(lambda quarters: quarters / 4),
    )


@functools.lru_cache(maxsize=512)
def version_paths(
    *, min_size: int = 2, max_size: int = 6, max_value: int = INT64_MAX
) -> SearchStrategy[list[int]]:
    """Strictly increasing version lists with arbitrary gaps (1, small, or huge).

    Models the write-through buffer (docs/backend-guide.md §2, 'Versions skip'): a store may see
    ``2 -> 4`` or ``2 -> 2**40``, never a guarantee of ``+1``.
    """

    @st.composite
    def build(draw: st.DrawFn) -> list[int]:
        size = draw(st.integers(min_value=min_size, max_value=max_size))
        start = draw(st.one_of(st.integers(0, 3), st.integers(0, max_value)))
        path = [min(start, max_value - size)]
        gap = st.one_of(st.just(1), st.integers(1, 3), st.integers(1, 2**40))
        while len(path) < size:
            room = max_value - path[-1] - (size - len(path) - 1)
            path.append(path[-1] + min(draw(gap), room))
        return path

    if min_size < 1 or max_size < min_size or max_value < max_size:
        raise ValueError("need 1 <= min_size <= max_size <= max_value")
    return build()
