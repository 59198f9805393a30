"""blame() writes the note and parse_blames() reads it back, as the report sees failures."""

from __future__ import annotations

import traceback

from chongming_conformance.oracle.blame import BLAME_NOTE, blame, parse_blames


def _as_pytest_prints(exc: BaseException) -> str:
    """The failure text as pytest shows it: each line of the exception behind ``E   ``."""
    lines = "".join(traceback.format_exception_only(exc)).splitlines()
    return "\n".join(f"E       {line}" for line in lines) + "\n"


def test_parse_blames_reads_back_what_blame_wrote() -> None:
    exc = AssertionError("get() after save():\n  expected a\n  got      b")
    blame(exc, ("SAVE-KEEPS-LEASE", "SAVE-CAS"))
    assert parse_blames(_as_pytest_prints(exc)) == ("SAVE-KEEPS-LEASE", "SAVE-CAS")
    # The raw text without pytest's prefixes reads the same.
    raw = "".join(traceback.format_exception_only(exc))
    assert parse_blames(raw) == ("SAVE-KEEPS-LEASE", "SAVE-CAS")


def test_only_the_first_note_is_written_and_unknown_ids_are_dropped() -> None:
    exc = AssertionError("boom")
    blame(exc, ("NO-SUCH-CLAUSE", "SAVE-CAS"))
    blame(exc, ("SAVE-KEEPS-LEASE",))  # an outer check: the innermost note already won
    assert parse_blames(_as_pytest_prints(exc)) == ("SAVE-CAS",)


def test_no_note_means_no_blames() -> None:
    assert parse_blames("E   AssertionError: x\nE   chongming-blamed: SAVE-CAS") == ()
    assert parse_blames("") == ()


def test_repeated_ids_are_read_once_in_first_seen_order() -> None:
    text = f"E  {BLAME_NOTE}SAVE-CAS, QUERY-ALL\n{BLAME_NOTE}QUERY-ALL,SAVE-CAS, CLOSE-IDEMPOTENT\n"
    assert parse_blames(text) == ("SAVE-CAS", "QUERY-ALL", "CLOSE-IDEMPOTENT")
