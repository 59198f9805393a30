"""Real reports (tests/attest/reports, see its README) and what tests make of them."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

REPORTS = Path(__file__).parent / "reports"
MEMORY_STORE = Path(__file__).parents[2] / "reference_stores" / "memory.py"


def report(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((REPORTS / name).read_text(encoding="utf-8"))
    return doc


def conforming(doc: dict[str, Any], spec: str) -> dict[str, Any]:
    """``doc`` as a conforming run of ``spec`` would read: every NOT VERIFIED MUST clause
    PASS, the verdict the kit gives such a run, the must gate passed."""
    doc = copy.deepcopy(doc)
    for entry in doc["clauses"]:
        if entry["outcome"] == "NOT VERIFIED" and entry["level"] == "MUST" and entry["gated"]:
            entry["outcome"] = "PASS"
    doc["verdict"] = "conforms: every gated MUST clause PASS or UNSUPPORTED by declaration"
    doc["run"].update(gate="must", gate_passed=True)
    doc["store"].update(spec=spec, shared_spec=None)
    return doc
