"""A shields.io endpoint badge for a report: the verdict and the catalogue it was judged on.

shields.io's endpoint badge reads a small JSON document (``schemaVersion`` 1, ``label``,
``message``, optional ``color``) from a URL the author publishes, e.g. the file
committed to a ``badges`` branch or served from GitHub Pages; docs/ci-gating.md has the
GitHub Actions step. The message names the catalogue version and the kit version, so a
badge never claims more than the report behind it: "conforms · catalogue 1.8 · kit 0.1.0".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..report.records import PARTIAL_BANNER

__all__ = ["BADGE_LABEL", "badge"]

BADGE_LABEL = "chongming conformance"

#: The report's state -> (word, colour).
_STATES = {
    "conforms": ("conforms", "brightgreen"),
    "should": ("conforms, a SHOULD fails", "yellow"),
    "partial": ("partial run", "lightgrey"),
    "fails": ("does not conform", "red"),
    "unproven": ("not proven", "orange"),
}


def _state(doc: Mapping[str, Any]) -> str:
    verdict = str(doc["verdict"])
    if verdict.startswith("does not conform"):  # a FAIL says so, a partial run or not
        return "fails"
    if doc["run"]["partial"] or verdict == PARTIAL_BANNER:
        return "partial"
    if not verdict.startswith("conforms"):
        return "unproven"
    should_fails = any(c["level"] == "SHOULD" and c["outcome"] == "FAIL" and c.get("gated")
                       for c in doc["clauses"])
    return "should" if should_fails else "conforms"


def badge(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The endpoint JSON for the report document ``doc``."""
    word, colour = _STATES[_state(doc)]
    return {
        "schemaVersion": 1,
        "label": BADGE_LABEL,
        "message": f"{word} · catalogue {doc['catalogue_version']} · kit {doc['kit_version']}",
        "color": colour,
    }
