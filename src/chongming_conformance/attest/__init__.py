"""A conformance result others can check without re-running the suite.

* :func:`attestation` turns a JSON report into an in-toto Statement v1 with the
  test-result predicate, bound by digest to the store's code, the kit and the clause
  catalogue (:mod:`.statement`, :mod:`.digests`), optionally signed (:mod:`.signing`);
* :func:`verify_statement` checks one against what is installed (:mod:`.verify`);
* :func:`compare_reports` says what changed between two reports (:mod:`.diff`);
* :func:`badge` is the shields.io endpoint JSON for a report (:mod:`.badge`).

The console front is :mod:`.command` (``chongming-conformance attest|verify|diff|badge``);
the plugin writes the files with the report (``--chongming-attest``, ``--chongming-badge``).

The part ``attest`` (docs/architecture.md, "The parts") may import ``seam`` (spec
resolution and usage errors), ``report`` and ``protocol``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..report.files import write_atomically
from .badge import badge
from .diff import compare_reports, render_comparison, report_problem
from .signing import sign_statement
from .statement import build_statement
from .verify import verify_statement

__all__ = [
    "attestation",
    "badge",
    "build_statement",
    "compare_reports",
    "render_comparison",
    "report_problem",
    "verify_statement",
    "write_attestation",
    "write_badge",
]


def attestation(doc: Mapping[str, Any], key: Path | None = None) -> dict[str, Any]:
    """The statement for report ``doc``, in a DSSE envelope signed with ``key`` if given."""
    statement = build_statement(doc)
    return sign_statement(statement, key) if key is not None else statement


def _dump(value: Mapping[str, Any]) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def write_attestation(doc: Mapping[str, Any], target: Path, key: Path | None = None) -> None:
    """Write the attestation of ``doc`` to ``target`` (atomically, as reports are)."""
    write_atomically(target, _dump(attestation(doc, key)))


def write_badge(doc: Mapping[str, Any], target: Path) -> None:
    """Write the badge endpoint JSON of ``doc`` to ``target``."""
    write_atomically(target, _dump(badge(doc)))
