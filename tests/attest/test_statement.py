"""The statement: its in-toto form, its subjects and how outcomes map onto the predicate."""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from attest_reports import conforming

from chongming_conformance import CATALOGUE_VERSION, __version__
from chongming_conformance.attest import build_statement
from chongming_conformance.attest.digests import BY_PACKAGE_FILES, catalogue_digest
from chongming_conformance.attest.intoto import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    statement_problems,
)
from chongming_conformance.attest.statement import CATALOGUE_NAME, RUN_NAME, configuration_entry


def test_statement_of_a_real_report_is_an_in_toto_test_result(
    memory_report: dict[str, Any]
) -> None:
    statement = build_statement(memory_report)
    assert statement_problems(statement) == []
    assert statement["_type"] == STATEMENT_TYPE
    assert statement["predicateType"] == PREDICATE_TYPE
    names = [s["name"] for s in statement["subject"]]
    assert names == ["reference_stores", f"pkg:pypi/chongming-conformance@{__version__}"]
    store = statement["subject"][0]
    assert store["annotations"]["chongming:identifiedBy"] == BY_PACKAGE_FILES
    files = store["annotations"]["chongming:files"]
    memory = Path(__file__).parents[2] / "reference_stores" / "memory.py"
    assert files["reference_stores/memory.py"] == hashlib.sha256(memory.read_bytes()).hexdigest()
    catalogue = configuration_entry(statement, CATALOGUE_NAME)
    assert catalogue is not None
    assert catalogue["annotations"]["version"] == CATALOGUE_VERSION
    assert catalogue["digest"]["sha256"] == catalogue_digest()


def test_not_proven_is_failed_and_lists_what_was_not_verified(
    memory_report: dict[str, Any]
) -> None:
    predicate = build_statement(memory_report)["predicate"]
    assert predicate["result"] == "FAILED"
    assert predicate["failedTests"] == [] and predicate["warnedTests"] == []
    run = configuration_entry({"predicate": predicate}, RUN_NAME)
    assert run is not None
    assert "XP-CLAIM-EXCLUSIVE" in run["annotations"]["notVerified"]
    assert run["annotations"]["verdict"].startswith("not proven")
    assert "SAVE-CAS" in predicate["passedTests"]


def test_a_must_fail_is_a_failed_test(broken_report: dict[str, Any]) -> None:
    predicate = build_statement(broken_report)["predicate"]
    assert predicate["result"] == "FAILED"
    assert predicate["failedTests"] == ["LENGTH-TEXT"]
    assert "LENGTH-TEXT" not in predicate["passedTests"]


def test_conforming_run_is_passed_and_a_should_fail_is_warned(
    memory_report: dict[str, Any]
) -> None:
    doc = conforming(memory_report, "reference_stores.memory:make_store")
    assert build_statement(doc)["predicate"]["result"] == "PASSED"
    should = next(c for c in doc["clauses"] if c["level"] == "SHOULD" and c["outcome"] == "PASS")
    should["outcome"] = "FAIL"
    doc["verdict"] += "; SHOULD: 1 FAIL, 1 NOT VERIFIED"
    predicate = build_statement(doc)["predicate"]
    assert predicate["result"] == "WARNED"
    assert predicate["warnedTests"] == [should["id"]] and predicate["failedTests"] == []


def test_a_partial_run_is_failed_even_with_every_clause_passing(
    memory_report: dict[str, Any]
) -> None:
    doc = conforming(memory_report, "reference_stores.memory:make_store")
    doc["run"]["partial_reasons"] = ["126 suite test(s) deselected by -k"]
    assert build_statement(doc)["predicate"]["result"] == "FAILED"


def test_a_report_of_another_catalogue_is_refused(old_report: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"catalogue '1\.6'.*this kit's is"):
        build_statement(old_report)


def test_no_secret_reaches_the_statement(memory_report: dict[str, Any]) -> None:
    doc = copy.deepcopy(memory_report)
    doc["run"]["topology"] = "deployment postgresql://admin:hunter2@db.example/prod"
    text = repr(build_statement(doc))
    assert "hunter2" not in text
    assert "postgresql://admin:***@db.example/prod" in text


def test_a_store_in_its_own_package_is_its_own_subject(
    memory_report: dict[str, Any], store_package: Callable[[], Path]
) -> None:
    package = store_package()
    doc = conforming(memory_report, f"{package.name}:make_store")
    subject = build_statement(doc)["subject"][0]
    assert subject["name"] == package.name
    assert sorted(subject["annotations"]["chongming:files"]) == [
        f"{package.name}/__init__.py", f"{package.name}/extra.txt"]


def _good() -> dict[str, Any]:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": "x", "digest": {"sha256": "a" * 64}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {"result": "PASSED", "configuration": [], "passedTests": ["A"],
                      "warnedTests": [], "failedTests": []},
    }


@pytest.mark.parametrize(("spoil", "problem"), [
    (lambda s: s.update(_type="https://in-toto.io/Statement/v0.1"), "_type is"),
    (lambda s: s.update(subject=[]), "subject is missing or empty"),
    (lambda s: s["subject"][0].pop("digest"), "MUST have one"),
    (lambda s: s["subject"][0].update(digest={"sha256": "A" * 64}), "not lowercase hex"),
    (lambda s: s["subject"][0].update(digest={"sha256": "a" * 63}), "63 hex digits"),
    (lambda s: s.update(predicateType="https://slsa.dev/provenance/v1"), "predicateType is"),
    (lambda s: s["predicate"].update(result="pass"), "not one of PASSED, WARNED, FAILED"),
    (lambda s: s["predicate"].pop("configuration"), "configuration is missing"),
    (lambda s: s["predicate"].update(configuration=[{"name": "c"}]),
     "none of uri, digest, content"),
    (lambda s: s["predicate"].update(failedTests=["B"]), "PASSED but"),
    (lambda s: s["predicate"].update(passedTests="A"), "not a list of strings"),
    (lambda s: s["subject"][0].update(annotations=[]), "annotations is not an object"),
])
def test_schema_check_names_each_departure_from_the_spec(
    spoil: Callable[[dict[str, Any]], None], problem: str
) -> None:
    assert statement_problems(_good()) == []
    statement = _good()
    spoil(statement)
    problems = statement_problems(statement)
    assert len(problems) == 1 and problem in problems[0], problems
