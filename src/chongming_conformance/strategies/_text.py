"""Text strategies: adversarial strings, ids, names and tags inside the text domain.

One job: the characters that break stores (LIKE wildcards, controls, combining marks,
confusable pairs) drawn often enough to meet them. Split out of
:mod:`chongming_conformance.strategies` because every other strategy builds on these, and
the text domain (no NUL, no surrogate; see that module's docstring) is decided here alone.
Import the names from :mod:`chongming_conformance.strategies`.
"""

from __future__ import annotations

import functools

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from ..protocol.alphabet import C0_CONTROLS, DEL, ESCAPED_CHARACTERS, NUL
from .pools import ADVERSARIAL_POOL, BROKE_STORES, CONFUSABLES, NAME_POOL, TAG_POOL

__all__ = [
    "CONFUSABLE_IDS",
    "command_ids",
    "identifiers",
    "names",
    "tag_sets",
    "tags",
    "task_ids",
    "texts",
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
