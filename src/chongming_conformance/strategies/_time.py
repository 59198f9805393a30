"""Time strategies: aware datetimes in fixed UTC offsets, and pools of near-equal instants.

One job: instants a store must order by the instant, never by the wall-clock text. Split
out of :mod:`chongming_conformance.strategies` because ties and offsets are where ordering
bugs live, and every list strategy draws its ``created_at`` from :func:`instant_pools` here.
Import the names from :mod:`chongming_conformance.strategies`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone, tzinfo

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .pools import FIXED_OFFSETS

__all__ = ["aware_datetimes", "instant_pools", "offsets", "pick_times"]


@functools.lru_cache(maxsize=512)
def offsets() -> SearchStrategy[tzinfo]:
    """Fixed UTC offsets: :data:`FIXED_OFFSETS` often, otherwise any whole minute in -12h..+14h."""
    any_minute = st.integers(min_value=-12 * 60, max_value=14 * 60).map(
        lambda minutes: timezone(timedelta(minutes=minutes))
    )
    return st.one_of(st.sampled_from(FIXED_OFFSETS), any_minute)


@functools.lru_cache(maxsize=512)
def aware_datetimes(
    *,
    min_year: int = 1970,
    max_year: int = 2200,
    timezones: SearchStrategy[tzinfo] | None = None,
) -> SearchStrategy[datetime]:
    """Aware datetimes with microseconds; the UTC instant lies in ``[min_year, max_year]``.

    The instant is drawn first and then expressed in an offset from
    ``timezones`` (default :func:`offsets`), so the wall-clock year may be one
    off at the edges while the instant never leaves the range.
    """
    instants = st.datetimes(
        min_value=datetime(min_year, 1, 1),  # naive bounds, made aware below
        max_value=datetime(max_year, 12, 31, 23, 59, 59, 999999),
    )
    zones = offsets() if timezones is None else timezones
    return st.builds(
        lambda naive, zone: naive.replace(tzinfo=UTC).astimezone(zone), instants, zones
    )


@functools.lru_cache(maxsize=512)
def instant_pools(*, max_size: int = 4) -> SearchStrategy[list[datetime]]:
    """Sorted lists of a few UTC instants: equal, 1 µs, 2 µs, 1 s or 1 h apart.

    Draw one pool per test case and take every ``created_at`` from it (in a
    random offset, see :func:`pick_times`): ties, near-ties and the same
    instant written in different offsets then become common, which is where
    ordering bugs live.
    """
    deltas = st.lists(
        st.sampled_from((0, 1, 2, 1_000_000, 3_600_000_000)), min_size=1, max_size=max_size
    )
    return st.builds(
        lambda base, ds: sorted({base + timedelta(microseconds=d) for d in ds}),
        aware_datetimes(timezones=st.just(UTC)),
        deltas,
    )


def pick_times(pool: Sequence[datetime]) -> SearchStrategy[datetime]:
    """One instant of ``pool`` expressed in a random offset (see :func:`instant_pools`)."""
    return st.builds(lambda p, z: p.astimezone(z), st.sampled_from(list(pool)), offsets())
