"""Assertion helpers the contract, the properties and the state machine share.

``expect_raises`` states "this call must raise X" with every other outcome
named; ``QUERY_CLAUSES`` is the one list of clauses a query-vs-oracle
comparison can show broken. Blame notes (which clause a failure is evidence
against) are :mod:`chongming_conformance.blame`'s job, not this module's.
"""

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
