"""The HTML report through the plugin: a failing stress test's run travels with its test
record (``user_properties``, so across pytest-xdist workers too) into the report document,
and ``--chongming-report=FILE.html`` draws it.

The broken store is the check-then-write save of test_stress_wiring (correct on one
connection, caught by the save race in every measured run).
"""

from __future__ import annotations

import re

import pytest
from plugin_helpers import clause, load_report, run
from test_stress_wiring import CHECK_THEN_WRITE


def test_a_failing_stress_test_is_drawn_in_the_html_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(brokenshared=CHECK_THEN_WRITE)
    result = run(
        pytester,
        "--chongming-store=brokenshared:make_store",
        "--chongming-stress=quick",
        "--chongming-report=r.json",
        "--chongming-report=r.html",
        "-n", "2",
        "-k", "save_atomic or save_race or roundtrip",
    )
    assert result.ret == 1, result.stdout.str()
    doc = load_report(pytester.path / "r.json")
    entry = clause(doc, "XP-SAVE-ATOMIC")
    assert entry["outcome"] == "FAIL"
    [test] = [t for t in entry["tests"] if t["outcome"] == "failed"]
    history = test["history"]
    assert history["scenario"] == "save_race" and history["verdict"] == "FAIL"
    assert history["anomalies"][0]["core"] and len(history["lanes"]) >= 2
    # Passing tests carry no picture (the report stays small).
    passed = [t for c in doc["clauses"] for t in c["tests"] if t["outcome"] == "passed"]
    assert passed and all(t.get("history") is None for t in passed)

    page = (pytester.path / "r.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert 'data-clause="XP-SAVE-ATOMIC" data-outcome="FAIL"' in page
    assert re.search(r'<svg[^>]*class="timeline[^"]*"[^>]*data-scenario="save_race"', page)
    assert 'data-core="1"' in page
    assert not re.search(r'(src|href)="https?://', page)  # nothing fetched from anywhere
