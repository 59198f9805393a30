"""Hypothesis strategies for the TaskStore model, public so store authors can reuse them.

Every function returns a ``SearchStrategy`` and is cheap to call; compose them
like hypothesis' own strategies::

    from hypothesis import given
    from chongming_conformance import strategies as cst

    @given(cst.snapshots(full=True))
    def test_my_codec(snapshot): ...

The values stay inside a documented *domain* -- the inputs the contract promises
a store must handle. Outside it a store may legitimately refuse a value, so
generating it would report bugs that are not bugs:

* **text** (:func:`texts`): any Unicode scalar value except NUL (U+0000) and the
  surrogates (U+D800..U+DFFF). NUL is excluded because PostgreSQL ``text`` cannot
  store it (and C-string based drivers truncate at it); lone surrogates are
  excluded because they are not encodable as UTF-8, so no UTF-8 backend can
  store them. Everything else is fair game and the generator leans on the
  characters that break stores: SQL ``LIKE`` wildcards ``%`` ``_`` ``\\``,
  quotes, JSON metacharacters, the whole adversarial alphabet
  (:mod:`chongming_conformance.alphabet`: every C0 control and DEL, U+2028/U+2029,
  lone combining marks -- ``e`` + U+0301 is *not* ``é``: stores must not
  normalise --, NBSP and other spaces, astral-plane characters), right-to-left
  text, case variants. Names, tags, prefixes and run ids also draw whole
  confusable pairs (``build``/``build ``, ``straße``/``STRASSE``, NFC/NFD,
  full width) from :data:`~chongming_conformance.alphabet.CONFUSABLE_PAIRS`.
  ``texts(nul=True)`` adds NUL, for a store that claims to hold it.
* **datetimes** (:func:`aware_datetimes`): aware, microsecond precision, the UTC
  instant between ``1970-01-01`` and the end of ``2200`` by default, expressed in
  fixed UTC offsets from -12:00 to +14:00 including non-whole-hour ones
  (+05:45, -03:30, +05:30, -09:30). Fixed offsets only: the store sees just
  the instant and its offset, so a named zone adds nothing it could observe.
* **integers** (:func:`versions`, :func:`buckets`, :func:`counts_and_totals`):
  ``0 .. 2**63 - 1``, the range of SQL ``BIGINT`` (every mainstream backend's
  64-bit integer), with the boundaries 0, 1, ``2**31 - 1``, ``2**31``, ``2**53``
  and ``2**63 - 1`` drawn often.
* **lease durations** (:func:`lease_seconds`): positive, whole seconds and binary
  fractions (0.125, 0.25, 1.5, any number of quarter seconds), so
  ``now + lease_seconds`` is exact to the microsecond in every arithmetic a backend
  might use. A lease of 0 or less is left open by the guide and never generated.
* **limits** (:func:`limits`): 1 and up, never 0 -- what ``limit=0`` means is left open by
  the guide, and a store may refuse it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from typing import Any

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from .alphabet import (
    C0_CONTROLS,
    DEL,
    ESCAPED_CHARACTERS,
    METACHARACTERS,
    NUL,
)
from .model import (
    Command,
    CommandKind,
    Failure,
    Progress,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from .oracle import matches
from .pools import (
    ADVERSARIAL_POOL,
    BROKE_STORES,
    BUCKET_POOL,
    CONFUSABLES,
    FIXED_OFFSETS,
    INT64_MAX,
    INTEGER_BOUNDARIES,
    NAME_POOL,
    PIPELINE_POOL,
    PREFIX_POOL,
    SPECIAL_CHARACTERS,
    TAG_POOL,
)

__all__ = [
    "ADVERSARIAL_POOL",
    "BUCKET_POOL",
    "CONFUSABLE_IDS",
    "FIXED_OFFSETS",
    "INT64_MAX",
    "INTEGER_BOUNDARIES",
    "NAME_POOL",
    "PIPELINE_POOL",
    "PREFIX_POOL",
    "SPECIAL_CHARACTERS",
    "TAG_POOL",
    "aware_datetimes",
    "buckets",
    "command_ids",
    "command_lists",
    "commands",
    "counts_and_totals",
    "failures",
    "identifiers",
    "instant_pools",
    "lease_seconds",
    "limits",
    "names",
    "offsets",
    "pick_times",
    "progresses",
    "queries",
    "queries_for",
    "snapshot_lists",
    "snapshots",
    "statuses",
    "tag_sets",
    "tags",
    "task_ids",
    "texts",
    "transitions",
    "version_paths",
    "versions",
]

# Three pools of equal weight, so the 32 controls neither crowd out the rest nor drown in it.
_LIKE_HEAVY = st.one_of(
    st.sampled_from(BROKE_STORES),
    st.sampled_from((*C0_CONTROLS, DEL)),
    st.sampled_from([ch for ch in ESCAPED_CHARACTERS if ch not in (*C0_CONTROLS, DEL)]),
)
_ANY_CHAR = st.characters(
    codec="utf-8",  # excludes the surrogates: not encodable as UTF-8
    exclude_characters="\x00",  # PostgreSQL text cannot hold NUL
)
_ALPHABET = st.one_of(_LIKE_HEAVY, _ANY_CHAR)
_ALPHABET_WITH_NUL = st.one_of(_LIKE_HEAVY, _ANY_CHAR, st.just(NUL))


@functools.lru_cache(maxsize=512)
def texts(*, min_size: int = 0, max_size: int = 12, nul: bool = False) -> SearchStrategy[str]:
    """Adversarial strings inside the text domain (module docstring): no NUL, no surrogate.

    Half of the characters come from :data:`SPECIAL_CHARACTERS` (wildcards,
    quotes, JSON syntax, every C0 control, DEL, U+2028/U+2029, combining, spaces,
    RTL, astral), the rest from all of Unicode. ``nul=True`` draws NUL too:
    outside the domain, for a store that claims to hold it.
    """
    # A list of characters joined, not st.text(alphabet): st.text merges the
    # alphabet into one character range and then favours low code points, so
    # U+2028, combining marks and astral characters were almost never drawn.
    alphabet = _ALPHABET_WITH_NUL if nul else _ALPHABET
    return st.lists(alphabet, min_size=min_size, max_size=max_size).map("".join)


#: Both sides of every confusable pair, as whole ids: a key column with a PAD SPACE or
#: case-insensitive collation makes ``build`` and ``build `` one row.
CONFUSABLE_IDS: tuple[str, ...] = CONFUSABLES


@functools.lru_cache(maxsize=512)
def identifiers(*, max_size: int = 12) -> SearchStrategy[str]:
    """Non-empty adversarial strings for primary keys (task, command and run ids).

    Two draws in three are :func:`texts` (every character of the alphabet); one in three
    is a whole :data:`CONFUSABLE_IDS` string, so two ids an engine's collation calls equal
    (``build`` / ``build ``, ``straße`` / ``STRASSE``, NFC / NFD) meet in one run as often
    as two equal ids do. The contract's fixed samples also use every pair as task,
    command and history ids in every run; this puts them into the properties and the
    state machine too.
    """
    return st.one_of(
        texts(min_size=1, max_size=max_size),
        texts(min_size=1, max_size=max_size),
        st.sampled_from(CONFUSABLE_IDS),
    )


@functools.lru_cache(maxsize=512)
def task_ids() -> SearchStrategy[str]:
    """Task ids: non-empty adversarial text."""
    return identifiers()


@functools.lru_cache(maxsize=512)
def command_ids() -> SearchStrategy[str]:
    """Command ids: non-empty adversarial text."""
    return identifiers()


@functools.lru_cache(maxsize=512)
def _any_or_adversarial(max_size: int, min_size: int = 0) -> SearchStrategy[str]:
    """Any text, or a whole :data:`ADVERSARIAL_POOL` string, as *one* branch.

    ``.map(str)`` keeps hypothesis from flattening it into the caller's
    ``one_of``: the collision pool there keeps its half of the draws, so the
    io/ios and LIKE collisions stay as dense as before the pool was added.
    """
    anything = texts(min_size=min_size, max_size=max_size)
    return st.one_of(anything, st.sampled_from(ADVERSARIAL_POOL)).map(str)


@functools.lru_cache(maxsize=512)
def names() -> SearchStrategy[str]:
    """Task names: :data:`NAME_POOL` (LIKE/case/prefix collisions), any text, or
    :data:`ADVERSARIAL_POOL` (confusable pairs, controls)."""
    return st.one_of(st.sampled_from(NAME_POOL), _any_or_adversarial(12))


@functools.lru_cache(maxsize=512)
def tags() -> SearchStrategy[str]:
    """One tag: :data:`TAG_POOL` (io/ios/bio/``io,``...), any text, or :data:`ADVERSARIAL_POOL`."""
    return st.one_of(st.sampled_from(TAG_POOL), _any_or_adversarial(6))


@functools.lru_cache(maxsize=512)
def tag_sets(*, min_size: int = 0, max_size: int = 4) -> SearchStrategy[frozenset[str]]:
    """Frozensets of :func:`tags`, so prefix/suffix/substring collisions share a task or not."""
    return st.frozensets(tags(), min_size=min_size, max_size=max_size)


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
def statuses() -> SearchStrategy[TaskStatus]:
    """Any TaskStatus."""
    return st.sampled_from(TaskStatus)


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
    # Lean first: the filters only read these fields, and a lean snapshot has
    # few choices, so a failing list shrinks in seconds; full ones keep every
    # column on the query path honest.
    lean = st.builds(
        lambda task_id, status, version, name, tags, bucket, run, at: TaskSnapshot(
            task_id, name, status, version, at, at, tags=tags, bucket=bucket,
            pipeline_run_id=run,
        ),
        task_ids(),
        statuses(),
        st.integers(0, 3),
        fields["name"],
        fields["tags"],
        fields["bucket"],
        fields["pipeline_run_id"],
        aware_datetimes(timezones=st.just(UTC)),
    )
    return lean | snapshots(full=True, **fields)


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
