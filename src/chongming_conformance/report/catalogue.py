"""The clause catalogue as a document (``chongming-conformance clauses``): Markdown or JSON.

It lists what a report judges, so it is rendered next to the report's other formats.
"""

from __future__ import annotations

import json

from ..clauses import CATALOGUE_VERSION, CLAUSES

__all__ = ["render_catalogue"]


def render_catalogue(fmt: str = "md") -> str:
    """Every clause with its level, section and scope; ``fmt`` is ``"md"`` or ``"json"``."""
    if fmt == "json":
        doc = {
            "catalogue_version": CATALOGUE_VERSION,
            "clauses": [
                {
                    "id": c.id,
                    "level": c.level.value,
                    "section": c.section,
                    "scope": c.scope.value,
                    "text": c.text,
                }
                for c in CLAUSES.values()
            ],
        }
        return json.dumps(doc, indent=2, ensure_ascii=False)
    lines = [
        f"# chongming-conformance clause catalogue {CATALOGUE_VERSION}",
        "",
        "| ID | Level | Section | Scope | Requirement |",
        "|---|---|---|---|---|",
    ]
    for c in CLAUSES.values():
        text = c.text.replace("|", "\\|")
        lines.append(f"| `{c.id}` | {c.level.value} | {c.section} | {c.scope.value} | {text} |")
    return "\n".join(lines)
