"""Every clause cites sections of docs/backend-guide.md that exist and explain it.

A backend author has this guide (in the repository, and inside the built wheel:
tests/test_packaging.py checks that), not the original one; a clause citing a section must land on a
heading that names the clause, so a renumbered or rewritten guide fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from chongming_conformance.protocol.clauses import CLAUSES, GUIDE, GUIDE_SECTIONS
from chongming_conformance.report.catalogue import render_catalogue

ROOT = Path(__file__).resolve().parent.parent
_HEADING = re.compile(r"^## (\d+)\. (.+)$", re.MULTILINE)


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def guide_sections() -> dict[str, tuple[str, str]]:
    """``§N`` -> (anchor, the section's text up to the next numbered heading)."""
    text = (ROOT / GUIDE).read_text(encoding="utf-8")
    heads = list(_HEADING.finditer(text))
    found: dict[str, tuple[str, str]] = {}
    for i, m in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        found[f"§{m.group(1)}"] = (github_slug(f"{m.group(1)}. {m.group(2)}"), text[m.end():end])
    return found


def test_slug_rule_matches_github_on_known_headings() -> None:
    assert github_slug("4. The side path: `touch`") == "4-the-side-path-touch"
    assert github_slug("10. Decisions this kit made") == "10-decisions-this-kit-made"


def test_guide_sections_table_matches_the_guide_headings() -> None:
    assert {n: anchor for n, (anchor, _) in guide_sections().items()} == GUIDE_SECTIONS


def test_every_cited_section_exists_and_names_the_clause() -> None:
    sections = guide_sections()
    wrong = []
    for cid, clause in CLAUSES.items():
        cited = clause.section.split()
        assert cited, cid
        for number in cited:
            if number not in sections:
                wrong.append(f"{cid}: {number} is not a section of {GUIDE}")
            elif f"`{cid}`" not in sections[number][1]:
                wrong.append(f"{cid}: {number} ({sections[number][0]}) does not name it")
        assert clause.guide_link == f"{GUIDE}#{sections[cited[0]][0]}"
    assert wrong == []


def test_issue_examples_point_where_the_guide_explains_them() -> None:
    # The two clauses issue 12 found mis-cited against this guide.
    assert CLAUSES["TRANSITION-ROUNDTRIP"].guide_link.endswith("#3-history")
    assert CLAUSES["XP-SHARED-VISIBILITY"].guide_link.endswith("#8-sharing-between-processes")



def test_catalogue_links_each_clause_to_its_guide_section() -> None:
    md = render_catalogue("md").splitlines()
    doc = json.loads(render_catalogue("json"))
    by_id = {c["id"]: c for c in doc["clauses"]}
    for cid, clause in CLAUSES.items():
        [row] = [line for line in md if line.startswith(f"| `{cid}` |")]
        first = clause.section.split()[0]
        assert f"[{first}]({GUIDE}#{GUIDE_SECTIONS[first]})" in row, row
        assert by_id[cid]["guide"] == clause.guide_link
        assert by_id[cid]["section"] == clause.section
