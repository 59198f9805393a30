"""``python -m chongming_conformance.stress ... --report FILE`` / ``--html FILE``: a stress
run written as a conformance report, through the same document and renderers as the
plugin's, partial and saying so.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from chongming_conformance.report import validate_report
from chongming_conformance.stress.__main__ import main

BROKEN = ("from stress_stores import SelectThenDeleteEachPrune, shared\n"
          "make_shared_store = shared(SelectThenDeleteEachPrune)\n")


def test_a_failing_run_is_written_as_json_and_html(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "brokenprune.py").write_text(BROKEN, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("brokenprune", None)
    status = main(["brokenprune:make_shared_store", "--profile", "quick", "--scenario",
                   "prune_race", "--scenario", "save_race", "--report", str(tmp_path / "r.json"),
                   "--html", str(tmp_path / "r.html")])
    assert status == 1, capsys.readouterr()
    doc = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert validate_report(doc) == []
    assert doc["run"]["partial"] and "only the stress scenarios ran" in doc["run"][
        "partial_reasons"][0]
    outcomes = {c["id"]: c["outcome"] for c in doc["clauses"]}
    assert outcomes["XP-PRUNE-SAVE-RACE"] == "FAIL" and outcomes["XP-SAVE-ATOMIC"] == "PASS"
    assert outcomes["CREATE-THEN-GET"] == "NOT VERIFIED"  # nothing else was checked
    [test] = next(c for c in doc["clauses"] if c["id"] == "XP-PRUNE-SAVE-RACE")["tests"]
    assert test["history"]["anomalies"][0]["core"]
    assert doc["run"]["seed"] == 0 and doc["run"]["topology"].startswith("faults none")
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'data-scenario="prune_race"' in page and 'data-core="1"' in page


def test_a_report_path_without_a_format_is_refused_before_the_run(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["reference_stores.sqlite:make_shared_store", "--report", "out.txt"])
    assert stop.value.code == 2
    assert "'out.txt' must end in .json, .md, .html" in capsys.readouterr().err
