"""No kit module over 600 lines, the limit docs/architecture.md asks for.

A module that keeps growing stops having one job; splitting it along its seams (a public
module re-exporting its private helpers, as ``oracle``, ``strategies`` and ``stateful``
do) keeps every file readable in one sitting. The few modules allowed over the limit are
listed in ``EXCEPTIONS`` with the reason, so an exception is a decision, not an accident.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "chongming_conformance"
MAX_LINES = 600

#: Modules allowed over the limit (path relative to the package -> why).
EXCEPTIONS: dict[str, str] = {
    "report/html.py": "a renderer with an embedded stylesheet and script: one self-contained page",
    "faults/proxy.py": (
        "TCP proxy with toxics; split pending (one class over shared connection state)"
    ),
    # Found over the limit when this test was added; not yet split.
    "stress/lincheck/projection.py": "linearizability projection of every call; split pending",
}


def _line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_is_over_the_limit() -> None:
    over = {
        str(path.relative_to(PACKAGE)): lines
        for path in sorted(PACKAGE.rglob("*.py"))
        if (lines := _line_count(path)) > MAX_LINES
    }
    unexcused = {name: lines for name, lines in over.items() if name not in EXCEPTIONS}
    assert not unexcused, (
        f"modules over {MAX_LINES} lines (split them along their seams, see "
        f"docs/architecture.md): {unexcused}"
    )


def test_every_exception_is_still_needed() -> None:
    """An exception that exists no more, or is back under the limit, is dropped from the list."""
    stale = [
        name for name in EXCEPTIONS
        if not (PACKAGE / name).exists() or _line_count(PACKAGE / name) <= MAX_LINES
    ]
    assert not stale, f"EXCEPTIONS lists modules at or under {MAX_LINES} lines: {stale}"
