"""The clause catalogue as a document (``chongming-conformance clauses``): Markdown or JSON.

It lists what a report judges, so it is rendered next to the report's other formats.
Sections cite the kit's own guide, ``docs/backend-guide.md``, and link to the
heading that explains each clause.
"""

from __future__ import annotations

import json

from ..protocol.clauses import CATALOGUE_VERSION, CLAUSES, GUIDE, Clause

__all__ = ["render_catalogue", "section_link"]


def section_link(clause: Clause) -> str:
    """The clause's sections as Markdown, the first linked to the guide heading explaining it."""
    first, *rest = clause.section.split()
    return " ".join([f"[{first}]({clause.guide_link})", *rest])


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
                    "guide": c.guide_link,
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
        f"Sections are those of the kit's backend guide, `{GUIDE}`.",
        "",
        "| ID | Level | Section | Scope | Requirement |",
        "|---|---|---|---|---|",
    ]
    for c in CLAUSES.values():
        text = c.text.replace("|", "\\|")
        lines.append(
            f"| `{c.id}` | {c.level.value} | {section_link(c)} | {c.scope.value} | {text} |"
        )
    return "\n".join(lines)
