"""Which renderer writes a report file: the file's suffix decides, in one table.

The plugin (``--chongming-report``), ``chongming-conformance check --report``, the
stress command and the soak (``--html``) all write through :func:`write_report`, so a
format added here is offered everywhere at once and every writer checks a path the same
way before its run starts (:func:`format_problem`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .document import dumps
from .files import write_atomically
from .html import render_html
from .markdown import render_markdown

__all__ = ["REPORT_FORMATS", "format_problem", "write_report"]

#: Suffix -> renderer of the report document.
REPORT_FORMATS: Mapping[str, Callable[[Mapping[str, Any]], str]] = {
    ".json": dumps,
    ".md": render_markdown,
    ".html": render_html,
}


def format_problem(path: str | Path) -> str | None:
    """Why ``path`` names no report format (None: it does)."""
    if Path(path).suffix in REPORT_FORMATS:
        return None
    return (f"{str(path)!r} must end in {', '.join(REPORT_FORMATS)} (the format follows the "
            "suffix)")


def write_report(doc: Mapping[str, Any], target: Path) -> None:
    """Render ``doc`` in the format ``target``'s suffix names and write it atomically."""
    write_atomically(target, REPORT_FORMATS[target.suffix](doc))
