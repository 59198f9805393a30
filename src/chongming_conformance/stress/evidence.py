"""What a stress test leaves for its report beyond pass or fail.

A fault run's test passes or fails as one test, but it judges several clauses, and it
may have exercised enough for some of them and not for others (``stress.fault_coverage``).
Under the plugin, the test leaves here its coverage matrix and the clauses it could not
judge, and the plugin's report hook takes them into the test's record (across xdist
workers too, as ``user_properties``), as ``stress.picture`` does for the drawn run and
``cases`` for the input cases met: the report then shows the matrix and marks exactly
those clauses NOT VERIFIED.
"""

from __future__ import annotations

from typing import Any

__all__ = ["keep_coverage", "keep_unproven", "take_coverage", "take_unproven"]

_COVERAGE: list[dict[str, Any]] = []
_UNPROVEN: dict[str, str] = {}


def keep_coverage(coverage: dict[str, Any]) -> None:
    """Hold a fault run's matrix for the report of the test running now."""
    _COVERAGE.append(coverage)


def take_coverage() -> dict[str, Any] | None:
    """The last matrix kept since the previous call (a test runs one fault run); forgets."""
    taken = _COVERAGE[-1] if _COVERAGE else None
    _COVERAGE.clear()
    return taken


def keep_unproven(unproven: dict[str, str]) -> None:
    """Hold the clauses the test running now passed without judging (clause -> why)."""
    _UNPROVEN.update(unproven)


def take_unproven() -> dict[str, str]:
    """The clauses kept since the previous call; forgets them."""
    taken = dict(_UNPROVEN)
    _UNPROVEN.clear()
    return taken
