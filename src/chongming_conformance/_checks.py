"""Small helpers shared by the kit's checks (contract, properties, state machine)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["QUERY_CLAUSES", "expect_raises"]

#: Every clause a comparison of query() against a model can show broken.
QUERY_CLAUSES: tuple[str, ...] = (
    "QUERY-ALL",
    "QUERY-ORDER-CREATED",
    "QUERY-TIES-COMPLETE",
    "QUERY-STATUSES",
    "QUERY-NAME-EXACT",
    "QUERY-NAME-PREFIX-LITERAL",
    "QUERY-TAG-EXACT",
    "QUERY-BUCKETS",
    "QUERY-PIPELINE",
    "QUERY-LIMIT",
    "QUERY-FILTERS-COMBINE",
    "QUERY-EMPTY-SET-MATCHES-NOTHING",
    "TIME-INSTANT-ORDER",
)


def expect_raises(exc_type: type[BaseException], call: Callable[[], object], what: str) -> Any:
    """Assert that ``call()`` raises ``exc_type`` (naming any other outcome); return it."""
    try:
        call()
    except exc_type as exc:
        return exc
    except Exception as exc:
        raise AssertionError(
            f"{what}: expected {exc_type.__name__}, got {type(exc).__name__}: {exc}"
        ) from exc
    raise AssertionError(f"{what}: expected {exc_type.__name__}, nothing was raised")
