"""The fixed values the strategies lean on: boundary integers, offsets, collision pools.

Data, not strategies: :mod:`chongming_conformance.strategies` draws from these
often so the edges where stores break come up in every run, not by luck. They
live here so the strategies module stays a readable public face; each is also
importable from :mod:`chongming_conformance.strategies`, where they are
documented.
"""

from __future__ import annotations

from datetime import UTC, timedelta, timezone, tzinfo

from ..protocol.alphabet import CONFUSABLE_PAIRS, ESCAPED_CHARACTERS, LITERAL_ESCAPES

__all__ = [
    "ADVERSARIAL_POOL",
    "BROKE_STORES",
    "BUCKET_POOL",
    "CONFUSABLES",
    "FIXED_OFFSETS",
    "ID_POOL",
    "INT64_MAX",
    "INTEGER_BOUNDARIES",
    "NAME_POOL",
    "PIPELINE_POOL",
    "PREFIX_POOL",
    "SPECIAL_CHARACTERS",
    "TAG_POOL",
]

#: Largest value of a signed 64-bit integer (SQL BIGINT): the top of the integer domain.
INT64_MAX = 2**63 - 1
#: Integer values drawn with high probability: the edges where backends overflow or round.
INTEGER_BOUNDARIES: tuple[int, ...] = (0, 1, 2**31 - 1, 2**31, 2**53, INT64_MAX)

#: The fixed offsets drawn most often: UTC, the non-whole-hour ones, and both extremes.
FIXED_OFFSETS: tuple[tzinfo, ...] = (
    UTC,
    timezone(timedelta(hours=5, minutes=45)),  # Nepal
    timezone(timedelta(hours=-3, minutes=-30)),  # Newfoundland
    timezone(timedelta(hours=5, minutes=30)),  # India
    timezone(timedelta(hours=-9, minutes=-30)),  # Marquesas
    timezone(timedelta(hours=14)),  # Line Islands, the easternmost
    timezone(timedelta(hours=-12)),  # Baker Island, the westernmost
    timezone(timedelta(hours=1)),
    timezone(timedelta(hours=-8)),
    timezone(timedelta(0), "UTC+0 (not the UTC singleton)"),
)

CONFUSABLES: tuple[str, ...] = tuple(
    dict.fromkeys(text for left, right, _ in CONFUSABLE_PAIRS for text in (left, right))
)

#: Characters that have broken real stores; :func:`texts` draws them often. The
#: adversarial alphabet is appended whole, so no class an engine escapes is missing.
BROKE_STORES: tuple[str, ...] = (
    "%", "_", "\\", "'", '"', "`", ";",  # SQL wildcards, escape, quotes
    "[", "]", "{", "}", ":", ",", "$", ".", "*", "?",  # JSON, JSONPath, glob
    "\n", "\r", "\t", "\x01", "\x7f",  # controls that survive every backend
    " ", "\u00a0", "\u200b", "\ufeff",  # spaces, zero-width, BOM
    "e", "E", "\u00e9", "\u0301",  # case, precomposed é vs combining acute
    "\u05d0", "\u0627", "\u200f", "\u202e",  # Hebrew, Arabic, RLM, RLO
    "\U0001f600", "\U00010348", "\U0010fffd",  # astral plane, last plane
    "\uffff", "\ufffd",  # noncharacter, replacement character
)
SPECIAL_CHARACTERS: tuple[str, ...] = tuple(dict.fromkeys(BROKE_STORES + ESCAPED_CHARACTERS))

#: Tags that collide by prefix, suffix or substring; :func:`tag_sets` draws from it often.
TAG_POOL: tuple[str, ...] = (
    "io", "ios", "bio", "i", "o", "IO", "Io",
    "io,", ",io", "io ", " io", '"io"', "[io]", "io\\", "i%", "i_", "%", "_",
    "", ",", '","', "a,b", "[]",
    # JSON path and GLOB: a tag spliced into '$.<tag>' or a pattern.
    "$.io", "io.x", "io[0]", "io*", "i?", "@", "'io'",
)

#: Names that collide under LIKE (``%``/``_`` wildcards, ASCII case folding) or by prefix.
NAME_POOL: tuple[str, ...] = (
    "job", "jobs", "Job", "JOB", "job_1", "jobx1", "job%", "job%x", "jobxx",
    "jo", "j\\ob", "j\\\\ob", "", "é", "e\u0301", "job\u202e",
    # GLOB, regex and JSON-path metacharacters next to what they would match instead.
    "a*b", "axb", "a?b", "a[b]c", "abc", "a.b", "a+b", "aab", "(a)", "a$", "a^b", "a|b",
)

#: ``name_prefix`` values drawn often: LIKE wildcards and escapes that also occur
#: literally in :data:`NAME_POOL`, case variants, combining marks.
PREFIX_POOL: tuple[str, ...] = (
    "%", "_", "\\", "job_", "job%", "jo_", "j_b", "j%", "j\\", "j\\o", "J", "JOB", "e", "",
    # GLOB, regex, JSON path: each would match axb, abc or aab if read as a pattern.
    "a*", "a?", "a[", "a[b]", "a.", "a+", "a.*", "(", "a$", "a^", "a|", "^a", "$",
)
#: Task ids drawn often by :func:`snapshot_lists`: pairs a pattern confuses -- ``_`` and ``%``
#: bound into a LIKE, a case-insensitive collation, a prefix (``LIKE id || '%'``), PAD SPACE
#: -- so a store deleting or filtering by id that way reaches a look-alike task.
ID_POOL: tuple[str, ...] = (
    "t-1", "t-10", "t_1", "tx1", "T-1", "t%", "t-2", "build", "Build", "build ",
)
#: Buckets drawn often by :func:`snapshot_lists` and :func:`queries`.
BUCKET_POOL: tuple[int, ...] = (0, 1, 2, 3)
#: Pipeline run ids drawn often (wildcards, a case variant and the empty string -- a run id
#: like any other, which a filter tested by truthiness takes for "no filter" -- included).
PIPELINE_POOL: tuple[str, ...] = ("run-1", "run-2", "run%", "run_", "RUN-1", "")
#: Whole strings an engine escapes, pads, folds or normalises: both sides of every
#: confusable pair (``build`` / ``build `` / ``Build``, ``straße`` / ``STRASSE``,
#: NFC / NFD, full width), controls JSON encoders escape differently, escapes
#: spelled literally. :func:`names` and :func:`tags` (and so name prefixes) draw
#: from it as part of their non-pool branch, so the collision pools above keep
#: their density. Ids draw every *character* of the alphabet through
#: :func:`texts`, and whole confusable strings (see :func:`identifiers`).
ADVERSARIAL_POOL: tuple[str, ...] = tuple(dict.fromkeys((
    *CONFUSABLES,
    "io\x0b", "io\x1f", "io\u2028", "io\x7f", "io\x85",
    *LITERAL_ESCAPES,
)))
