"""Messages never cut a token in half; driver errors are summarised to one readable line."""

from __future__ import annotations

import sqlite3

import pytest

from chongming_conformance import StoreError
from chongming_conformance.oracle.messages import (
    ELLIPSIS,
    elide,
    elide_start,
    summarize_error,
    with_hint,
)

SQL = ("UPDATE chongming_t_0123456789abcdef.tasks SET name = %(name)s, status = %(status)s, "
       "status_version = %(status_version)s WHERE task_id = %(task_id)s AND status_version = "
       "%(expect_version)s")


@pytest.mark.parametrize("limit", range(20, 120, 7))
def test_elide_cuts_between_tokens_and_says_how_much(limit: int) -> None:
    got = elide(SQL, limit)
    head, _, rest = got.partition(f" {ELLIPSIS} ")
    assert SQL.startswith(head)
    cut = len(head)
    assert SQL[cut].isspace() or not SQL[cut - 1].isalnum(), (head, SQL[cut:cut + 10])
    assert "%(ta" not in head or "%(task_id)s" in head  # never half a placeholder
    left = int(rest.removeprefix("(+").split()[0])
    assert left == len(SQL) - len(SQL[:len(SQL) - left]) and cut + left >= len(SQL) - 1


def test_elide_start_keeps_the_tail_from_a_boundary() -> None:
    text = "first line\n" + "x " * 200 + "\nlast line"
    got = elide_start(text, 50)
    assert got.endswith("last line") and "characters before" in got
    assert elide_start("short", 50) == "short"


def test_a_wrapped_driver_error_is_one_line_with_class_code_and_trimmed_sql() -> None:
    class FakeSqlalchemyError(Exception):
        pass

    driver = FakeSqlalchemyError(
        "(psycopg.errors.LockNotAvailable) canceling statement due to lock timeout\n"
        f"[SQL: {SQL}]\n[parameters: {{'name': 'secret-data'}}]\n"
        "(Background on this error at: https://sqlalche.me/e/20/e3q8)")
    driver.sqlstate = "55P03"  # type: ignore[attr-defined]
    try:
        try:
            raise driver
        except FakeSqlalchemyError as exc:
            raise StoreError("save failed") from exc
    except StoreError as wrapped:
        got = summarize_error(wrapped)
    assert got.startswith("StoreError from ")
    assert "[55P03]" in got and "canceling statement due to lock timeout" in got
    assert "SQL: UPDATE chongming_t_0123456789abcdef.tasks SET" in got
    assert "secret-data" not in got and "sqlalche.me" not in got and "\n" not in got


def test_pymysql_and_sqlite_codes() -> None:
    class OperationalError(Exception):
        pass

    got = summarize_error(OperationalError(1213, "Deadlock found when trying to get lock"))
    assert got.endswith("OperationalError [1213]: Deadlock found when trying to get lock")
    con = sqlite3.connect(":memory:")
    try:
        con.execute("SELEC 1")
    except sqlite3.Error as exc:
        got = summarize_error(exc)
    assert got.startswith("sqlite3.OperationalError") and "syntax error" in got


def test_a_hint_is_its_own_line() -> None:
    assert with_hint("database is locked", "give SQLite a busy timeout") == (
        "database is locked\n  hint: give SQLite a busy timeout")
    assert with_hint("x", None) == "x"
