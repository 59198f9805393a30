"""The report document and its schema come from one declaration; v1 has not changed."""

from __future__ import annotations

import json
from pathlib import Path

from chongming_conformance.protocol.capabilities import Capabilities
from chongming_conformance.protocol.clauses import CLAUSES
from chongming_conformance.report import (
    REPORT_SCHEMA,
    Environment,
    RunSettings,
    StoreInfo,
    SuiteRecords,
    TestResult,
    assess,
    build_document,
    render_gate,
    render_markdown,
    render_terminal,
    validate_report,
)

V1 = Path(__file__).with_name("report_schema_v1.json")
FAILING = "chongming_conformance/suite/test_contract.py::TestStoreContract::test_cas"


def document(gate: str | None = "must") -> dict[str, object]:
    failing = TestResult(FAILING, "failed", 0.25, "boom at postgresql://app:hunter2@db/x",
                         {"seeds": ["7"], "falsifying_examples": [], "notes": []})
    records = SuiteRecords(tests={FAILING: failing}, declared={FAILING: ("SAVE-CAS",)})
    assessment = assess(records, Capabilities(), shared_available=False, gate=gate)
    return build_document(
        assessment,
        store=StoreInfo("m:make_store", "--chongming-store", "m.Store",
                        "Store(dsn='postgresql://app:hunter2@db/x')"),
        environment=Environment("3.11.9", "CPython", "Linux", "8.3", None),
        settings=RunSettings(started=0.0, finished=1.5, timeout_s=30.0,
                             timeout_mechanism="SIGALRM", pytest_exit_status=1),
        capabilities=Capabilities(),
        tests_collected=1,
        collection_errors=[],
    )


def test_derived_schema_is_v1_plus_the_optional_keys_added_since() -> None:
    v1 = json.loads(V1.read_text(encoding="utf-8"))
    derived = json.loads(json.dumps(REPORT_SCHEMA))
    run = derived["properties"]["run"]
    # Added within v1, described but not required: documents without it still conform.
    assert run["properties"].pop("stress_profile") == {"type": ["object", "null"]}
    assert "stress_profile" not in run["required"]
    reuse = run["properties"].pop("store_reuse")
    assert reuse["type"] == ["object", "null"]
    assert reuse["required"] == ["reset_store", "stores_opened", "reuses"]
    assert "store_reuse" not in run["required"]
    assert run["properties"].pop("topology") == {"type": ["string", "null"]}
    assert "topology" not in run["required"]
    assert run["properties"].pop("seed") == {"type": ["integer", "null"]}
    assert "seed" not in run["required"]
    entry = derived["properties"]["clauses"]["items"]
    assert entry["properties"].pop("guide") == {"type": "string"}
    assert "guide" not in entry["required"]
    # The clause ids grow with the catalogue (its own version), not the schema's.
    assert entry["properties"]["id"].pop("enum") == list(CLAUSES)
    v1["properties"]["clauses"]["items"]["properties"]["id"].pop("enum")
    for tests in (entry["properties"]["tests"], derived["properties"]["unmapped_tests"]):
        assert tests["items"]["properties"].pop("cases") == {"type": ["object", "null"]}
        assert "cases" not in tests["items"]["required"]
        # A stress run drawn (stress.picture), for the HTML report.
        assert tests["items"]["properties"].pop("history") == {"type": ["object", "null"]}
        assert "history" not in tests["items"]["required"]
        # A fault run's coverage matrix and the clauses it passed without judging.
        assert tests["items"]["properties"].pop("coverage") == {"type": ["object", "null"]}
        assert tests["items"]["properties"].pop("unproven") == {"type": ["object", "null"]}
        assert not {"coverage", "unproven"} & set(tests["items"]["required"])
    assert derived == v1


def test_built_document_conforms_with_keys_in_schema_order() -> None:
    doc = document()
    assert validate_report(doc) == []
    assert list(doc) == REPORT_SCHEMA["required"]
    run = doc["run"]
    assert isinstance(run, dict)
    assert [k for k in run if k not in ("stress_profile", "store_reuse", "topology", "seed")] == (
        REPORT_SCHEMA["properties"]["run"]["required"]
    )
    assert run["started_at"] == "1970-01-01T00:00:00+00:00" and run["duration_s"] == 1.5


def test_document_carries_the_assessment() -> None:
    doc = document()
    run = doc["run"]
    assert isinstance(run, dict)
    assert run["gate"] == "must" and run["gate_passed"] is False and run["partial"] is False
    assert doc["verdict"] == "does not conform: 1 MUST clause(s) FAIL"
    clauses = doc["clauses"]
    assert isinstance(clauses, list)
    [cas] = [c for c in clauses if c["id"] == "SAVE-CAS"]
    assert cas["outcome"] == "FAIL" and cas["tests"][0]["hypothesis"]["seeds"] == ["7"]
    assert cas["tests"][0]["blames"] == []


def test_every_string_in_the_document_is_masked() -> None:
    text = json.dumps(document())
    assert "hunter2" not in text and "postgresql://app:***@db/x" in text


def test_renderers_show_the_verdict_and_the_gate() -> None:
    doc = document()
    lines = [line for line, _ in render_terminal(doc)]
    assert lines[-1] == "verdict: does not conform: 1 MUST clause(s) FAIL"
    assert any(line.startswith("SAVE-CAS") and "FAIL" in line and "test_cas" in line
               for line in lines)
    assert render_gate(doc, ["SAVE-CAS"]) == ("chongming gate (must): FAILED (SAVE-CAS)", "red")
    assert render_gate(document(gate=None), []) is None
    markdown = render_markdown(doc)
    assert "**Verdict:** does not conform" in markdown
    assert "| `SAVE-CAS` | MUST | [§2](docs/backend-guide.md#2-snapshots) | **FAIL** |" in markdown
