"""Shared helpers for the plugin's dogfood tests (imported as a plain module)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from chongming_conformance.report import validate_report

#: A whole plugin run of a reference store (contract, properties, state machine, controller
#: checks, twelve stress scenarios) in a subprocess. Generous on purpose: on a loaded 2-core
#: box under ``-n 2`` a green run took up to ~5 min; the bound is there so CI never hangs.
SUBPROCESS_TIMEOUT = 900.0


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """pytest in a fresh interpreter in the pytester directory (no cache, no user ini)."""
    return pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", *args, timeout=SUBPROCESS_TIMEOUT
    )


def load_report(path: Path) -> dict[str, Any]:
    """Read a JSON report and check it against the documented schema."""
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    problems = validate_report(doc)
    assert problems == [], "report does not match REPORT_SCHEMA:\n" + "\n".join(problems)
    return doc


def clause(doc: dict[str, Any], cid: str) -> dict[str, Any]:
    [entry] = [c for c in doc["clauses"] if c["id"] == cid]
    return entry


def table_outcome(output: str, cid: str) -> str:
    """The outcome column of one clause row of the terminal clause table."""
    m = re.search(
        rf"^{re.escape(cid)}\s+(MUST|SHOULD)\s+(PASS|FAIL|NOT VERIFIED|UNSUPPORTED|DEVIATION)\b",
        output,
        re.MULTILINE,
    )
    assert m is not None, f"no row for {cid} in the clause table:\n{output}"
    return m.group(2)
