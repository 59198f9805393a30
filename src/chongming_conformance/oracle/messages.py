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

import dataclasses
import re
from datetime import UTC, datetime

__all__ = ["ELLIPSIS", "elide", "elide_start", "refusal", "summarize_error", "unusual_values",
           "with_hint"]

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


# -- a write the store refused: which of its values look out of the ordinary -------------------
#: The last instant a signed 32-bit Unix time holds (MySQL/MariaDB ``TIMESTAMP``), and the
#: first such a column takes (its range starts one second after the epoch).
Y2038 = datetime(2038, 1, 19, 3, 14, 7, tzinfo=UTC)
EPOCH_FLOOR = datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
#: Ids up to this length are ordinary: the controller's own (``uuid4().hex``).
ORDINARY_ID = 32
#: Texts up to this length are ordinary (a ``VARCHAR(255)`` takes them).
ORDINARY_TEXT = 255
#: Fields holding an id (LENGTH-IDS); every other text field is LENGTH-TEXT's.
ID_FIELDS = frozenset({"task_id", "command_id", "pipeline_run_id", "tags", "lease_owner",
                       "issued_by"})
#: Text the controller writes itself (a failure and a transition's reason): a store must
#: take it up to this many characters (LENGTH-TEXT); any other long text it may refuse
#: (LENGTH-TEXT-CAPACITY, a SHOULD).
CONTROLLER_TEXT = frozenset({"failure.error_type", "failure.message", "failure.detail",
                             "error_type", "detail", "reason"})
CONTROLLER_TEXT_LENGTH = 8192


def _values(record: object, path: str = "") -> list[tuple[str, object]]:
    """(field path, value) of a record's datetimes and strings, nested records included."""
    if not dataclasses.is_dataclass(record) or isinstance(record, type):
        return []
    out: list[tuple[str, object]] = []
    for f in dataclasses.fields(record):
        value, name = getattr(record, f.name), f"{path}{f.name}"
        if isinstance(value, (frozenset, set, tuple, list)):
            out += [(name, v) for v in sorted(value, key=repr) if isinstance(v, str)]
        elif dataclasses.is_dataclass(value):
            out += _values(value, f"{name}.")
        elif isinstance(value, (str, datetime)):
            out.append((name, value))
    return out


def unusual_values(*records: object) -> dict[str, list[str]]:
    """What in ``records`` a store may refuse for its column types, by the clause owning the
    value's fidelity: datetimes outside a 32-bit ``TIMESTAMP`` (TIME-UTC-ROUNDTRIP), ids
    longer than the controller's (LENGTH-IDS-CAPACITY: a store may refuse them), texts
    longer than 255 characters: those the controller writes itself, a failure or a reason
    up to 8,192, are LENGTH-TEXT's (a store must take them), any other
    LENGTH-TEXT-CAPACITY's (a store may refuse them, a SHOULD).
    Empty when every value is ordinary."""
    found: dict[str, list[str]] = {}
    for record in records:
        for name, value in _values(record):
            root = name.split(".")[-1]
            if isinstance(value, datetime):
                if value > Y2038:
                    found.setdefault("TIME-UTC-ROUNDTRIP", []).append(
                        f"{name} {value.isoformat()}, past 2038-01-19 (a 32-bit TIMESTAMP "
                        "column?)")
                elif value < EPOCH_FLOOR:
                    found.setdefault("TIME-UTC-ROUNDTRIP", []).append(
                        f"{name} {value.isoformat()}, before 1970-01-01T00:00:01Z (a 32-bit "
                        "TIMESTAMP column?)")
            elif isinstance(value, str) and root in ID_FIELDS and len(value) > ORDINARY_ID:
                # Longer than the controller's ids: a store may refuse it (LENGTH-IDS takes
                # the refusal; 255 is the SHOULD's recommendation).
                found.setdefault("LENGTH-IDS-CAPACITY", []).append(
                    f"{name} of {len(value)} characters")
            elif isinstance(value, str) and root not in ID_FIELDS and len(value) > ORDINARY_TEXT:
                must = (name in CONTROLLER_TEXT or root in CONTROLLER_TEXT) and (
                    len(value) <= CONTROLLER_TEXT_LENGTH)
                found.setdefault("LENGTH-TEXT" if must else "LENGTH-TEXT-CAPACITY", []).append(
                    f"{name} of {len(value)} characters")
    return found


def refusal(exc: BaseException, what: str, *records: object) -> tuple[tuple[str, ...], str] | None:
    """When a write of ``records`` raised ``exc`` and some of their values are out of the
    ordinary: (the clauses owning those values, a message saying the store refused the
    input and naming them). None when nothing in them is unusual (the refusal is then
    the write's own failure)."""
    found = unusual_values(*records)
    if not found:
        return None
    named = "; ".join(v for values in found.values() for v in values[:3])
    return (tuple(sorted(found)),
            f"the store refused {what} ({summarize_error(exc)}); its values include {named}")
