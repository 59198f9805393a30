"""docs/architecture.md stays true: every file or folder it names exists.

The page answers "where do I go to add X" with paths; a rename that forgets the
page would send a newcomer to a file that is gone. Paths are resolved against
the package, the repository root, tests/ and the parts. Its table of parts has a
row for every part, and the top of the package stays at most 15 entries.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "chongming_conformance"
DOC = ROOT / "docs" / "architecture.md"

_PATHLIKE = re.compile(r"`([A-Za-z_][\w/.<>-]*(?:\.py|/))`")


def _named_paths() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return sorted({m for m in _PATHLIKE.findall(text) if "<" not in m})


def _exists(name: str) -> bool:
    groups = ("report", "plugin", "attest", "checking", "checking/contract", "oracle", "seam",
              "strategies", "protocol", "commands", "stress/scenarios")
    bases = (PACKAGE, ROOT, ROOT / "tests", *(PACKAGE / group for group in groups))
    return any((base / name).exists() for base in bases)


def test_the_table_names_every_part() -> None:
    """One row per part: every package at the top of the kit is in the table of parts."""
    text = DOC.read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| \w+ \| `(\w+)/` \|", text, flags=re.MULTILINE))
    parts = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert rows == parts


def test_the_top_level_stays_small() -> None:
    """At most 15 entries at the top of the package (issue 43): new modules go into a part."""
    entries = sorted(p.name for p in PACKAGE.iterdir() if p.name != "__pycache__")
    assert len(entries) <= 15, entries


def test_the_page_names_paths() -> None:
    assert len(_named_paths()) > 20


def test_every_named_path_exists() -> None:
    missing = [name for name in _named_paths() if not _exists(name)]
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"
