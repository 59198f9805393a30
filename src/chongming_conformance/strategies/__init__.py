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
  (:mod:`chongming_conformance.protocol.alphabet`: every C0 control and DEL, U+2028/U+2029,
  lone combining marks -- ``e`` + U+0301 is *not* ``é``: stores must not
  normalise --, NBSP and other spaces, astral-plane characters), right-to-left
  text, case variants. Names, tags, prefixes and run ids also draw whole
  confusable pairs (``build``/``build ``, ``straße``/``STRASSE``, NFC/NFD,
  full width) from :data:`~chongming_conformance.protocol.alphabet.CONFUSABLE_PAIRS`.
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

The strategies live in private sibling modules by what they draw (``_text``, ``_time``,
``_number``, ``_record``, ``_query``); this module is the one to import them from.

The part ``strategies`` (docs/architecture.md, "The parts") holds the inputs: these
strategies and their private modules, the boundary and collision pools they draw from
(:mod:`.pools`), the fixed samples the contract tests use (:mod:`.samples`) and the saves
that change one field with the reads each can affect (:mod:`.single_field`). It may import
``protocol`` and ``oracle`` (a query aimed at the stored tasks uses the oracle's selection
rules).
"""

from __future__ import annotations

from ._number import (
    buckets,
    counts_and_totals,
    lease_seconds,
    limits,
    version_paths,
    versions,
)
from ._query import queries, queries_for
from ._record import (
    command_lists,
    commands,
    failures,
    progresses,
    snapshot_lists,
    snapshots,
    statuses,
    transitions,
)
from ._text import (
    CONFUSABLE_IDS,
    command_ids,
    identifiers,
    names,
    tag_sets,
    tags,
    task_ids,
    texts,
)
from ._time import aware_datetimes, instant_pools, offsets, pick_times
from .pools import (
    ADVERSARIAL_POOL,
    BUCKET_POOL,
    FIXED_OFFSETS,
    ID_POOL,
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
    "ID_POOL",
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
