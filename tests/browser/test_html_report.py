"""The HTML report of a failing stress run, opened in a real browser and read back.

Two runs go into one report, as the stress command writes it (``--html``): a broken
store's prune race (``SelectThenDeleteEachPrune``, caught in every measured run: the
failing clause, its lanes and its core) and the reference SQLite store's fault run under
pauses (the fault intervals). The test reads what Chromium drew -- elements present, with
a non-zero size on the page -- hovers and focuses a core call to see its details, and
keeps a screenshot (``CHONGMING_ARTIFACTS``).
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
from stress_helpers import run_shared, until_caught
from stress_stores import SelectThenDeleteEachPrune, shared

from chongming_conformance.report.html import render_html
from chongming_conformance.stress import get_profile
from chongming_conformance.stress.report_document import stress_document
from reference_stores.sqlite import make_shared_store


@pytest.fixture(scope="module")
def report() -> tuple[dict[str, Any], str]:
    """The report document of the two runs, and its HTML."""
    started = time.time()
    _, failing = until_caught(shared(SelectThenDeleteEachPrune), "prune_race", "quick",
                              attempts=5)
    assert failing.failed, failing.report()
    paused = dataclasses.replace(get_profile("quick"), faults="pause")
    faulted = run_shared(make_shared_store, "fault_workload", paused,
                         network_absent="one SQLite file, no server")
    assert faulted.picture is not None and faulted.picture["faults"], faulted.report()
    doc = stress_document([failing, faulted], spec="stress_stores:SelectThenDeleteEachPrune",
                          profile=paused, started=started)
    return doc, render_html(doc)


def _history(doc: dict[str, Any], scenario: str) -> dict[str, Any]:
    for clause in doc["clauses"]:
        for test in clause["tests"]:
            if (test.get("history") or {}).get("scenario") == scenario:
                history: dict[str, Any] = test["history"]
                return history
    raise AssertionError(f"no history of {scenario} in the document")


def _drawn(element: Any) -> bool:
    size = element.size
    return bool(size["width"] > 0 and size["height"] > 0)


def test_the_failing_run_is_drawn_and_read_back(browser: Any, report: tuple[dict[str, Any], str],
                                                tmp_path: Path, artifacts: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    doc, page = report
    target = tmp_path / "conformance.html"
    target.write_text(page, encoding="utf-8")
    browser.get(target.as_uri())
    find = browser.find_elements

    # The failing clause is on the page, as a failing row.
    rows = find(By.CSS_SELECTOR, 'tr[data-clause="XP-PRUNE-SAVE-RACE"][data-outcome="FAIL"]')
    assert rows and rows[0].is_displayed() and "FAIL" in rows[0].text

    # Its history: one lane per worker, the core highlighted, every piece with a size.
    history = _history(doc, "prune_race")
    svg = find(By.CSS_SELECTOR, 'svg.timeline[data-scenario="prune_race"]')
    assert svg and _drawn(svg[0])
    lanes = svg[0].find_elements(By.CSS_SELECTOR, "g.lane")
    assert sorted({lane.get_attribute("data-lane") for lane in lanes}) == sorted(
        history["lanes"])
    core = svg[0].find_elements(By.CSS_SELECTOR, 'rect.call[data-core="1"]')
    assert core and all(_drawn(c) for c in core)
    core_ix = set(history["anomalies"][0]["core"])
    assert {int(c.get_attribute("data-call")) for c in core} & core_ix

    # Hover over a core call: the details panel shows that call's text.
    call = next(c for c in core if int(c.get_attribute("data-call")) in core_ix)
    index = int(call.get_attribute("data-call"))
    text = history["details"][history["calls"][index][6]][0]
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", call)
    ActionChains(browser).move_to_element(call).perform()
    panel = browser.find_element(By.ID, "call-details")
    assert text[:40] in panel.text, panel.text

    # Keyboard focus on another core call shows it too (no mouse needed).
    others = [c for c in core if c.get_attribute("data-call") != str(index)]
    if others:
        other = others[0]
        browser.execute_script("arguments[0].focus()", other)
        detail = history["calls"][int(other.get_attribute("data-call"))][6]
        if detail >= 0:
            assert history["details"][detail][0][:40] in panel.text, panel.text

    # The fault run: its fault intervals shaded, with a size.
    faulted = find(By.CSS_SELECTOR, 'svg.timeline[data-scenario="fault_workload"]')
    assert faulted, "the fault run's history is not drawn"
    browser.execute_script("arguments[0].scrollIntoView()", faulted[0])
    faults = faulted[0].find_elements(By.CSS_SELECTOR, "rect.fault")
    assert faults and all(_drawn(f) for f in faults)
    assert find(By.CSS_SELECTOR, "svg.latency")

    browser.execute_script("window.scrollTo(0, 0)")
    shot = artifacts / "html-report-failing-stress-run.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


def test_the_outcome_filter_hides_the_rows_of_an_unticked_outcome(browser: Any,
                                               report: tuple[dict[str, Any], str],
                                               tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    _, page = report
    target = tmp_path / "filter.html"
    target.write_text(page, encoding="utf-8")
    browser.get(target.as_uri())
    passing = browser.find_elements(By.CSS_SELECTOR, 'tr[data-outcome="PASS"]')
    failing = browser.find_elements(By.CSS_SELECTOR, 'tr[data-outcome="FAIL"]')
    assert passing and failing
    assert any(r.is_displayed() for r in passing)  # every outcome is shown at first
    control = browser.find_element(By.CSS_SELECTOR, '[data-filter="PASS"]')
    browser.execute_script("arguments[0].click()", control)  # untick PASS
    assert any(r.is_displayed() for r in failing)
    assert not any(r.is_displayed() for r in passing)
    browser.execute_script("arguments[0].click()", control)
    assert any(r.is_displayed() for r in passing)
