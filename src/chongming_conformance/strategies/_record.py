"""Record strategies: snapshots, transitions and commands, alone or in colliding lists.

One job: whole records built from the field strategies, and the lists the query, prune and
claim checks store (unique ids, ``created_at`` from one instant pool so ties happen, filter
values from the pools so queries hit). Split out of :mod:`chongming_conformance.strategies`
because these are what a check stores, while the other strategy modules only draw fields.
Import the names from :mod:`chongming_conformance.strategies`.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..protocol.model import (
    Command,
    CommandKind,
    Failure,
    Progress,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from ._number import buckets, counts_and_totals, versions
from ._text import command_ids, identifiers, names, tag_sets, task_ids, texts
from ._time import aware_datetimes, instant_pools, offsets
from .pools import BUCKET_POOL, ID_POOL, NAME_POOL, PIPELINE_POOL, TAG_POOL

__all__ = [
    "command_lists",
    "commands",
    "failures",
    "progresses",
    "snapshot_lists",
    "snapshots",
    "statuses",
    "transitions",
]


@functools.lru_cache(maxsize=512)
def statuses() -> SearchStrategy[TaskStatus]:
    """Any TaskStatus."""
    return st.sampled_from(TaskStatus)


@functools.lru_cache(maxsize=512)
def progresses(*, full: bool = False) -> SearchStrategy[Progress]:
    """Progress values; ``full=True`` sets ``total`` and ``message`` too."""
    optional_total = counts_and_totals() if full else st.none() | counts_and_totals()
    optional_message = texts() if full else st.none() | texts()
    return st.builds(Progress, counts_and_totals(), optional_total, optional_message)


@functools.lru_cache(maxsize=512)
def failures(*, full: bool = False) -> SearchStrategy[Failure]:
    """Failure values; ``full=True`` sets ``detail`` too (e.g. a multi-line traceback)."""
    detail = texts(max_size=40) if full else st.none() | texts(max_size=40)
    return st.builds(Failure, texts(), texts(), detail)


def _maybe(strategy: SearchStrategy[Any], full: bool) -> SearchStrategy[Any]:
    return strategy if full else st.none() | strategy


@functools.lru_cache(maxsize=512)
def snapshots(
    *,
    full: bool = False,
    task_id: SearchStrategy[str] | None = None,
    status_version: SearchStrategy[int] | None = None,
    created_at: SearchStrategy[datetime] | None = None,
    name: SearchStrategy[str] | None = None,
    status: SearchStrategy[TaskStatus] | None = None,
    tags: SearchStrategy[frozenset[str]] | None = None,
    bucket: SearchStrategy[int | None] | None = None,
    pipeline_run_id: SearchStrategy[str | None] | None = None,
) -> SearchStrategy[TaskSnapshot]:
    """Task snapshots; ``full=True`` sets every optional field (tags non-empty).

    Any field strategy can be overridden, e.g. ``created_at=st.sampled_from(few)``
    to force ties, or ``task_id=st.just("t")`` to build successive versions of
    one task.
    """
    return st.builds(
        TaskSnapshot,
        task_id=task_ids() if task_id is None else task_id,
        name=names() if name is None else name,
        status=statuses() if status is None else status,
        status_version=versions() if status_version is None else status_version,
        created_at=aware_datetimes() if created_at is None else created_at,
        updated_at=aware_datetimes(),
        started_at=_maybe(aware_datetimes(), full),
        finished_at=_maybe(aware_datetimes(), full),
        tags=(tag_sets(min_size=1) if full else tag_sets()) if tags is None else tags,
        bucket=_maybe(buckets(), full) if bucket is None else bucket,
        pipeline_run_id=(
            _maybe(identifiers(), full) if pipeline_run_id is None else pipeline_run_id
        ),
        progress=_maybe(progresses(full=full), full),
        failure=_maybe(failures(full=full), full),
        heartbeat_at=_maybe(aware_datetimes(), full),
        lease_owner=_maybe(texts(), full),
        lease_until=_maybe(aware_datetimes(), full),
    )


@functools.lru_cache(maxsize=512)
def transitions(
    *,
    full: bool = False,
    task_id: SearchStrategy[str] | None = None,
    version: SearchStrategy[int] | None = None,
) -> SearchStrategy[Transition]:
    """History rows; ``full=True`` sets ``from_status`` and ``reason``."""
    return st.builds(
        Transition,
        task_id=task_ids() if task_id is None else task_id,
        version=versions() if version is None else version,
        from_status=_maybe(statuses(), full),
        to_status=statuses(),
        at=aware_datetimes(),
        reason=_maybe(texts(max_size=30), full),
    )


@functools.lru_cache(maxsize=512)
def commands(
    *,
    full: bool = False,
    command_id: SearchStrategy[str] | None = None,
    task_id: SearchStrategy[str] | None = None,
    created_at: SearchStrategy[datetime] | None = None,
) -> SearchStrategy[Command]:
    """Fresh, submittable commands: never finished, never leased.

    ``full=True`` also sets ``outcome``: a store must carry it even though only
    ``complete_command`` normally writes it.
    """
    return st.builds(
        Command,
        command_id=command_ids() if command_id is None else command_id,
        task_id=task_ids() if task_id is None else task_id,
        kind=st.sampled_from(CommandKind),
        issued_by=texts(),
        created_at=aware_datetimes() if created_at is None else created_at,
        outcome=_maybe(texts(), full),
    )


@functools.lru_cache(maxsize=512)
def _pooled_snapshot() -> SearchStrategy[TaskSnapshot]:
    fields: dict[str, Any] = {
        "name": st.sampled_from(NAME_POOL) | names(),
        # The pooled branch is never empty (tag_sets() still gives empty sets): a tag
        # filter can only be fooled by a task that has tags, and with empty sets
        # drawn first a derandomized run found the tag-substring bug only by luck.
        "tags": st.frozensets(st.sampled_from(TAG_POOL), min_size=1, max_size=3) | tag_sets(),
        "bucket": st.none() | st.sampled_from(BUCKET_POOL) | buckets(),
        "pipeline_run_id": st.none() | st.sampled_from(PIPELINE_POOL) | identifiers(),
    }
    # Ids that a LIKE, a case fold or a prefix confuses, often: a prune or history that
    # deletes or reads by pattern reaches the look-alike task.
    task_id = st.sampled_from(ID_POOL) | task_ids()
    # Lean first: the filters only read these fields, and a lean snapshot has
    # few choices, so a failing list shrinks in seconds; full ones keep every
    # column on the query path honest.
    lean = st.builds(
        lambda task_id, status, version, name, tags, bucket, run, at: TaskSnapshot(
            task_id, name, status, version, at, at, tags=tags, bucket=bucket,
            pipeline_run_id=run,
        ),
        task_id,
        statuses(),
        st.integers(0, 3),
        fields["name"],
        fields["tags"],
        fields["bucket"],
        fields["pipeline_run_id"],
        aware_datetimes(timezones=st.just(UTC)),
    )
    return lean | snapshots(full=True, task_id=task_id, **fields)


@functools.lru_cache(maxsize=512)
def snapshot_lists(*, min_size: int = 0, max_size: int = 10) -> SearchStrategy[list[TaskSnapshot]]:
    """Tasks with unique ids for query/counts/prune checks: ties, pooled names, tags, buckets.

    ``created_at`` comes from one :func:`instant_pools` pool per list; names,
    tags, buckets and pipeline run ids come mostly from :data:`NAME_POOL`,
    :data:`TAG_POOL`, :data:`BUCKET_POOL` and :data:`PIPELINE_POOL` (the
    defaults of :func:`queries`) so filters collide; minimal and full-field
    snapshots are mixed.
    """
    # (snapshot, created_at's index into the pool, its offset, updated_at's step): updated_at
    # on its own from the same pool, so its order among the tasks differs from created_at's,
    # which a prune or query sorting by the wrong column shows. Drawn inside the element (not
    # once more per task afterwards): a draw after the list made hypothesis's lists longer.
    shapes = st.lists(
        st.tuples(_pooled_snapshot(), st.integers(0, 7), offsets(), st.integers(0, 7)),
        min_size=min_size,
        max_size=max_size,
        unique_by=lambda shape: shape[0].task_id,
    )

    @st.composite
    def build(draw: st.DrawFn) -> list[TaskSnapshot]:
        pool = draw(instant_pools())
        return [
            replace(snapshot, created_at=pool[i % len(pool)].astimezone(zone),
                    updated_at=pool[(i + j) % len(pool)] + timedelta(seconds=j))
            for snapshot, i, zone, j in draw(shapes)
        ]

    return build()


@functools.lru_cache(maxsize=512)
def command_lists(*, min_size: int = 0, max_size: int = 8) -> SearchStrategy[list[Command]]:
    """Submittable commands with unique ids, ``created_at`` from one instant pool (ties)."""
    shapes = st.lists(
        st.tuples(commands() | commands(full=True), st.integers(0, 7), offsets()),
        min_size=min_size,
        max_size=max_size,
        unique_by=lambda shape: shape[0].command_id,
    )

    @st.composite
    def build(draw: st.DrawFn) -> list[Command]:
        pool = draw(instant_pools())
        return [
            replace(command, created_at=pool[i % len(pool)].astimezone(zone))
            for command, i, zone in draw(shapes)
        ]

    return build()
