"""docs/architecture.md stays true: every file or folder it names exists.

The page answers "where do I go to add X" with paths; a rename that forgets the
page would send a newcomer to a file that is gone. Paths are resolved against
the package, the repository root and tests/, in that order.
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
    groups = ("report", "plugin", "contract", "attest")
    bases = (PACKAGE, ROOT, ROOT / "tests", *(PACKAGE / group for group in groups))
    return any((base / name).exists() for base in bases)


def test_the_page_names_paths() -> None:
    assert len(_named_paths()) > 20


def test_every_named_path_exists() -> None:
    missing = [name for name in _named_paths() if not _exists(name)]
    assert missing == [], f"docs/architecture.md names paths that do not exist: {missing}"
