"""Reading ``chongming-blame:`` notes back out of a failure's text.

:mod:`chongming_conformance.blame` owns the note (it writes ``BLAME_NOTE`` +
clause ids onto an exception); this is its one reader. pytest prints exception
notes as ``E   chongming-blame: ID, ID`` lines, so the pattern allows that prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..blame import BLAME_NOTE

__all__ = ["blamed_among", "parse_blames"]

_NOTE_LINE = re.compile(r"^(?:E\s+)?" + re.escape(BLAME_NOTE.strip()) + r"\s*(.*)$", re.MULTILINE)


def parse_blames(text: str) -> tuple[str, ...]:
    """Every clause id any blame note in ``text`` names, sorted and without repeats."""
    named = {c.strip() for m in _NOTE_LINE.finditer(text) for c in m.group(1).split(",")}
    return tuple(sorted(n for n in named if n))


def blamed_among(text: str, declared: Iterable[str]) -> tuple[str, ...]:
    """The clauses a failure's notes name, among those its test declares.

    Empty (blame everything the test declares) when there is no note or it names
    none of the declared clauses -- the conservative reading.
    """
    return tuple(sorted(set(parse_blames(text)) & set(declared)))
