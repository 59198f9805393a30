"""Shortening text for a message without cutting a token in half, and summarising driver errors.

A message is read by a person: ``ERROR:  duplicate key value violates unique constr`` or an
SQL statement cut after ``WHERE task_id = %(ta`` costs a minute of guessing what was lost,
and a hint glued to the end of a driver's text reads as part of it. Every place the kit
shortens text goes through here:

* :func:`elide` keeps the head (:func:`elide_start` the tail) and cuts at a token boundary
  -- between words, or after punctuation -- saying how much was left out;
* :func:`summarize_error` turns a driver error into one line: its class, its code
  (SQLSTATE, a MySQL error number, SQLite's error name), the first line of its message,
  and the SQL, if the text carries it, trimmed at a token boundary. Parameters are left out:
  they may hold the data (and, in a DSN, a secret) and are rarely what explains the error.

Hints are the kit's own words and go on a line of their own (:func:`with_hint`).
Nothing here imports pytest or a driver.
"""

from __future__ import annotations

import re

__all__ = ["ELLIPSIS", "elide", "elide_start", "summarize_error", "with_hint"]

ELLIPSIS = "…"
#: Characters of SQL kept in an error summary.
SQL_LIMIT = 160
#: Characters of a driver's first line kept in an error summary.
LINE_LIMIT = 240

# SQLAlchemy appends "[SQL: ...]", "[parameters: ...]" and a background link to its texts;
# psycopg and PyMySQL put the statement nowhere, but a store may quote it itself.
_SQL = re.compile(r"\[SQL:\s*(?P<sql>.*?)\](?=\s*(?:\[|\(Background|$))", re.DOTALL)
_NOISE = re.compile(r"\s*(\[parameters:.*?\]|\(Background on this error at:[^)]*\))", re.DOTALL)


def _boundary(text: str, limit: int) -> int:
    """The last index <= ``limit`` where ``text`` may be cut: whitespace or after punctuation
    (never inside a word or a number); ``limit`` itself when no boundary is near."""
    floor = max(limit * 2 // 3, 1)
    for i in range(limit, floor - 1, -1):
        if text[i - 1].isspace() or text[i].isspace():
            return i
    for i in range(limit, floor - 1, -1):
        if not text[i - 1].isalnum() and text[i - 1] not in "_%'\"":
            return i
    for i in range(floor - 1, 0, -1):  # a long token: keep less rather than half of it
        if text[i - 1].isspace() or text[i].isspace():
            return i
    return limit  # one token longer than the limit: its head is all there is to show


def elide(text: str, limit: int) -> str:
    """``text`` if it fits ``limit``; else its head, cut at a token boundary, with the count
    of characters left out: ``UPDATE tasks SET … (+212 characters)``."""
    if len(text) <= limit:
        return text
    cut = _boundary(text, limit)
    return f"{text[:cut].rstrip()} {ELLIPSIS} (+{len(text) - cut} characters)"


def elide_start(text: str, limit: int) -> str:
    """Like :func:`elide`, keeping the tail (a traceback's end says the most)."""
    if len(text) <= limit:
        return text
    start = len(text) - limit
    for i in range(start, min(start + limit // 3, len(text) - 1)):
        if text[i - 1] == "\n" or text[i - 1].isspace():
            start = i
            break
    return f"({start} characters before) {ELLIPSIS} {text[start:].lstrip()}"


def _code(exc: BaseException) -> str | None:
    for attr in ("sqlstate", "pgcode", "sqlite_errorname"):
        value = getattr(exc, attr, None)
        if value:
            return str(value)
    args: tuple[object, ...] = tuple(getattr(exc, "args", ()))
    if args and isinstance(args[0], int):  # PyMySQL: (1213, 'Deadlock found ...')
        return str(args[0])
    return None


def _message(exc: BaseException) -> str:
    args: tuple[object, ...] = tuple(getattr(exc, "args", ()))
    if len(args) >= 2 and isinstance(args[0], int) and isinstance(args[1], str):
        return args[1]
    return str(exc)


def summarize_error(exc: BaseException) -> str:
    """One line for a (driver) error: class, code, first line, SQL trimmed at a token boundary.

    The cause chain is followed to the innermost driver error when ``exc`` is a wrapper
    (a StoreError raised ``from`` the driver's): that is the one with a code.
    """
    inner: BaseException = exc
    seen = {id(exc)}
    while inner.__cause__ is not None and id(inner.__cause__) not in seen:
        inner = inner.__cause__
        seen.add(id(inner))
    text = _message(inner)
    sql_match = _SQL.search(text)
    sql = " ".join(sql_match.group("sql").split()) if sql_match else None
    text = _NOISE.sub("", _SQL.sub("", text))
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    name = f"{type(inner).__module__}.{type(inner).__qualname__}"
    if name.startswith("builtins."):
        name = type(inner).__qualname__
    code = _code(inner)
    parts = [name + (f" [{code}]" if code else ""), elide(first, LINE_LIMIT)]
    if sql:
        parts.append(f"SQL: {elide(sql, SQL_LIMIT)}")
    summary = ": ".join(parts[:2]) + ("; " + parts[2] if len(parts) > 2 else "")
    if inner is not exc:
        summary = f"{type(exc).__qualname__} from {summary}"
    return summary


def with_hint(message: str, hint: str | None) -> str:
    """``message``, and the kit's hint on a line of its own (never glued to a driver's text)."""
    return message if not hint else f"{message}\n  hint: {hint}"
