"""Progress notes from long steps, for whoever shows them (pytest-free).

A stress scenario runs rounds in processes of its own for tens of seconds; a Postgres
store installs its schema before the first test. Code doing such a step calls
:func:`note` ("stress claim_race: round 3/8"); by default nothing happens. The plugin
installs a reporter for the duration of a run (``plugin/progress.py`` writes each note
as a ``chongming:`` line in pytest's terminal), so the kit never needs pytest here and
a store's own code can report its slow steps the same way::

    from chongming_conformance.seam import progress
    progress.note("postgres: installing the schema in chongming_1a2b")

Notes are for people watching a terminal: never parse them, never rely on them being
shown (under pytest-xdist a worker has no terminal; its notes are dropped).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

__all__ = ["Reporter", "note", "reporting"]

#: Shows one note (one line of text, no newline).
Reporter = Callable[[str], None]

_lock = threading.Lock()
_reporter: Reporter | None = None


def note(text: str) -> None:
    """Show ``text`` through the installed reporter, if there is one. Never raises."""
    reporter = _reporter
    if reporter is None:
        return
    with _lock, contextlib.suppress(Exception):  # a broken terminal must not fail a check
        reporter(text)


@contextlib.contextmanager
def reporting(reporter: Reporter | None) -> Iterator[None]:
    """Install ``reporter`` for the ``with`` block (the previous one is restored after)."""
    global _reporter
    previous, _reporter = _reporter, reporter
    try:
        yield
    finally:
        _reporter = previous
