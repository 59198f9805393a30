"""The HTML report's stylesheet and script are package data, tested as the files they are.

``report/html.py`` inlines ``report/assets/report.css`` and ``report/assets/report.js`` into
every page (one self-contained file, no external asset). Kept as files, each is checked for
what it is: the script parses (``node --check``, where Node.js is installed: it is on the
project's machines), every element and data attribute it looks up is one the renderer
writes, the stylesheet is well formed, and both reach the page unchanged. The wheel
carrying them is tests/test_packaging.py's.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from importlib import resources
from pathlib import Path

import pytest
from test_html import big_history, document

from chongming_conformance.report.html import render_html

ASSETS = resources.files("chongming_conformance.report") / "assets"


def _text(name: str) -> str:
    return (ASSETS / name).read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def page() -> str:
    """A small history and a 3 000-call one (merged runs of calls): all the page can hold."""
    return render_html(document()) + render_html(document(big_history(3_000)))


def test_the_assets_are_package_files() -> None:
    names = sorted(entry.name for entry in ASSETS.iterdir())
    assert names == ["report.css", "report.js"]
    for name in names:
        assert _text(name).strip(), f"{name} is empty"


def test_the_page_inlines_both_files_unchanged(page: str) -> None:
    assert page.count(f"<style>\n{_text('report.css')}</style>") == 2
    assert page.count(f"<script>\n{_text('report.js')}</script>") == 2
    assert 'src="' not in page and "<link" not in page  # still one self-contained file


def test_the_script_parses(tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("Node.js is not installed")
    script = tmp_path / "report.js"
    script.write_text(_text("report.js"), encoding="utf-8")
    done = subprocess.run([node, "--check", str(script)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_script_finds_what_the_page_has(page: str) -> None:
    """Every id the script looks up and every data attribute it reads is written by the
    renderer: a renamed attribute on one side only would break the page silently."""
    script = _text("report.js")
    ids = set(re.findall(r'getElementById\("([\w-]+)"\)', script))
    assert {"filters", "filter-count", "call-details"} <= ids
    missing_ids = sorted(i for i in ids if f'id="{i}"' not in page)
    assert missing_ids == []
    attributes = {re.sub(r"[A-Z]", lambda m: "-" + m.group(0).lower(), name)
                  for name in re.findall(r"\bdataset\.(\w+)", script)}
    attributes |= set(re.findall(r"\[data-([\w-]+)\]", script))
    assert attributes
    missing = sorted(a for a in attributes if f" data-{a}=" not in page)
    assert missing == []


def test_the_stylesheet_is_well_formed(page: str) -> None:
    css = _text("report.css")
    depth = 0
    for char in re.sub(r"/\*.*?\*/", "", css, flags=re.DOTALL):
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0, "a '}' closes nothing"
    assert depth == 0, "a '{' is never closed"
    # A sample of the classes it styles are ones the page uses.
    for cls in ("verdict", "filters"):
        assert re.search(rf"\.{cls}\b", css) and f'class="{cls}' in page, cls
