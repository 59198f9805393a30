"""``diff`` on real report pairs from two kit versions, and the badge of each report."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from attest_reports import REPORTS, conforming

from chongming_conformance.attest import badge, compare_reports, render_comparison
from chongming_conformance.attest import diff as diff_module
from chongming_conformance.attest.command import main as command_main


def _kinds(old: dict[str, Any], new: dict[str, Any]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for change in compare_reports(old, new).changes:
        found.setdefault(change.kind, []).append(change.id)
    return found


def test_catalogue_upgrade_reports_added_and_reworded_clauses_not_regressions(
    old_report: dict[str, Any], memory_report: dict[str, Any]
) -> None:
    """Kit catalogue 1.6 -> 1.8 on the memory store (tests/attest/reports/README.md)."""
    comparison = compare_reports(old_report, memory_report)
    kinds = _kinds(old_report, memory_report)
    assert comparison.regressions == []
    assert kinds["added"] == ["LENGTH-IDS-CAPACITY", "LENGTH-TEXT-CAPACITY"]
    assert set(kinds["text"]) == {"QUERY-LIMIT", "COUNTS-AGGREGATED", "CLAIM-LIMIT",
                                  "COMPLETE-IDEMPOTENT", "RELEASE-FINISHED-NOOP",
                                  "LENGTH-IDS", "LENGTH-TEXT"}
    assert set(kinds) == {"added", "text"}
    lines = render_comparison(comparison)
    assert lines[0] == "catalogue 1.6 -> 1.8"
    assert "Added to the catalogue (2):" in lines
    assert lines[-1] == "0 regression(s)"


def test_planted_regression_comes_first_and_fails_the_command(
    memory_report: dict[str, Any], broken_report: dict[str, Any],
    capsys: pytest.CaptureFixture[str],
) -> None:
    comparison = compare_reports(memory_report, broken_report)
    assert [(c.id, c.old, c.new) for c in comparison.regressions] == [
        ("LENGTH-TEXT", "PASS", "FAIL")]
    assert comparison.changes[0].kind == "regression"
    assert command_main("diff", [str(REPORTS / "kit-cat1.8-memory.json"),
                                 str(REPORTS / "kit-cat1.8-broken.json")]) == 1
    out = capsys.readouterr().out
    assert "Regressions (1):\n  LENGTH-TEXT: PASS -> FAIL" in out
    assert "does not conform: 1 MUST clause(s) FAIL" in out
    # The other way round the same change is a fix: no regression.
    assert command_main("diff", [str(REPORTS / "kit-cat1.8-broken.json"),
                                 str(REPORTS / "kit-cat1.8-memory.json")]) == 0
    assert "Other outcome changes (1):\n  LENGTH-TEXT: FAIL -> PASS" in capsys.readouterr().out


def test_regressions_across_a_catalogue_upgrade_are_still_found(
    old_report: dict[str, Any], broken_report: dict[str, Any]
) -> None:
    kinds = _kinds(old_report, broken_report)
    assert kinds["regression"] == ["LENGTH-TEXT"]
    assert kinds["added"] == ["LENGTH-IDS-CAPACITY", "LENGTH-TEXT-CAPACITY"]


def test_pass_to_fail_leads_other_regressions(memory_report: dict[str, Any]) -> None:
    new = copy.deepcopy(memory_report)
    by_id = {c["id"]: c for c in new["clauses"]}
    by_id["XP-CLAIM-EXCLUSIVE"]["outcome"] = "FAIL"  # NOT VERIFIED -> FAIL, earlier in order
    by_id["GET-MISSING-NONE"]["outcome"] = "NOT VERIFIED"  # PASS -> NOT VERIFIED
    by_id["SAVE-CAS"]["outcome"] = "FAIL"  # PASS -> FAIL
    ids = [c.id for c in compare_reports(memory_report, new).regressions]
    assert ids[0] == "SAVE-CAS"
    assert set(ids) == {"SAVE-CAS", "XP-CLAIM-EXCLUSIVE", "GET-MISSING-NONE"}


def test_a_renamed_clause_is_followed_not_lost(
    memory_report: dict[str, Any], broken_report: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = copy.deepcopy(memory_report)
    entry = next(c for c in old["clauses"] if c["id"] == "LENGTH-TEXT")
    entry["id"] = "TEXT-LENGTH"  # as an older catalogue might have called it
    kinds = _kinds(old, broken_report)  # matched by its identical text
    assert kinds["renamed"] == ["LENGTH-TEXT"] and kinds["regression"] == ["LENGTH-TEXT"]
    assert "added" not in kinds and "removed" not in kinds
    entry["text"] = "an older wording"  # the text differs: only the catalogue's record helps
    assert _kinds(old, broken_report)["removed"] == ["TEXT-LENGTH"]
    monkeypatch.setattr(diff_module, "RENAMED", {"TEXT-LENGTH": "LENGTH-TEXT"})
    kinds = _kinds(old, broken_report)
    assert kinds["renamed"] == ["LENGTH-TEXT"] and kinds["text"] == ["LENGTH-TEXT"]
    rename = next(c for c in compare_reports(old, broken_report).changes if c.kind == "renamed")
    assert rename.describe() == "TEXT-LENGTH -> LENGTH-TEXT (renamed; PASS -> FAIL)"


def test_diff_refuses_what_is_not_a_report(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.json"
    junk.write_text(json.dumps({"clauses": []}))
    good = str(REPORTS / "kit-cat1.8-memory.json")
    assert command_main("diff", [good, str(junk)]) == 4
    assert "junk.json: not a chongming-conformance JSON report" in capsys.readouterr().err
    junk.write_text("{")
    assert command_main("diff", [str(junk), good]) == 4
    assert "junk.json: not JSON" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "message", "color"), [
    ("kit-cat1.8-memory.json", "not proven · catalogue 1.8 · kit 0.1.0", "orange"),
    ("kit-cat1.8-broken.json", "does not conform · catalogue 1.8 · kit 0.1.0", "red"),
    ("kit-cat1.6-memory.json", "not proven · catalogue 1.6 · kit 0.1.0", "orange"),
])
def test_badge_of_each_real_report(name: str, message: str, color: str) -> None:
    doc = json.loads((REPORTS / name).read_text(encoding="utf-8"))
    assert badge(doc) == {"schemaVersion": 1, "label": "chongming conformance",
                          "message": message, "color": color}


def test_badge_of_conforming_partial_and_should_gaps(memory_report: dict[str, Any]) -> None:
    doc = conforming(memory_report, "reference_stores.memory:make_store")
    assert (badge(doc)["message"], badge(doc)["color"]) == (
        "conforms · catalogue 1.8 · kit 0.1.0", "brightgreen")
    doc["verdict"] += "; SHOULD: 0 FAIL, 1 NOT VERIFIED"  # PRUNE-LARGE outside thorough
    assert badge(doc)["color"] == "brightgreen"
    next(c for c in doc["clauses"] if c["id"] == "PROTOCOL-KEYWORD-ONLY")["outcome"] = "FAIL"
    assert (badge(doc)["message"], badge(doc)["color"]) == (
        "conforms, a SHOULD fails · catalogue 1.8 · kit 0.1.0", "yellow")
    doc["run"]["partial"] = True
    assert badge(doc)["message"].startswith("partial run")
    # A partial run that FAILs a MUST clause says "does not conform" first, in red.
    doc["verdict"] = ("does not conform: 1 MUST clause(s) FAIL (partial run — not a "
                      "conformance claim)")
    assert (badge(doc)["message"].split(" · ")[0], badge(doc)["color"]) == (
        "does not conform", "red")


def test_badge_command_writes_the_endpoint_json(tmp_path: Path) -> None:
    target = tmp_path / "badge" / "chongming.json"
    assert command_main("badge", [str(REPORTS / "kit-cat1.8-broken.json"), "-o",
                                  str(target)]) == 0
    assert json.loads(target.read_text())["color"] == "red"
