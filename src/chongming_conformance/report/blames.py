"""Reading ``chongming-blame:`` notes back out of a failure's text, for the report.

:mod:`chongming_conformance.oracle.blame` owns the note: it writes it (``blame``) and reads it
(``parse_blames``, re-exported here); :func:`blamed_among` narrows a failure's blames
to the clauses its test declares.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..oracle.blame import parse_blames

__all__ = ["blamed_among", "parse_blames"]


def blamed_among(text: str, declared: Iterable[str]) -> tuple[str, ...]:
    """The clauses a failure's notes name, among those its test declares (sorted).

    Empty when there is no note or it names none of the declared clauses.
    """
    return tuple(sorted(set(parse_blames(text)) & set(declared)))
