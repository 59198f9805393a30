"""The conformance report: per-clause outcomes from test results, as JSON, Markdown or text.

Outcomes, decided per clause from the tests that declare it with ``checks``:

* PASS -- at least one test checking it ran and every one passed.
* FAIL -- a test checking it failed (or errored in setup/teardown), or a
  declared deviation's tests all passed (the declaration is stale).
* NOT VERIFIED -- no test checking it ran to completion (none exists,
  deselected, skipped, stopped early); every ``review`` clause (with a note);
  every ``cross_process`` clause when no shared store was available.
* UNSUPPORTED -- the store declared the capability the clause needs absent.
* DEVIATION -- the store declared a deviation and its tests failed as expected.

The JSON document follows :data:`REPORT_SCHEMA` (``schema_version`` 1);
:func:`validate_report` checks a document against it without any dependency.
Every string that goes into a document passes through :func:`mask_secrets`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .capabilities import Capabilities
from .clauses import CLAUSES, Clause, Level, Scope

__all__ = [
    "OUTCOMES",
    "REPORT_SCHEMA",
    "SCHEMA_VERSION",
    "ClauseResult",
    "TestResult",
    "evaluate",
    "gate_failures",
    "mask_secrets",
    "render_markdown",
    "render_terminal",
    "validate_report",
]

SCHEMA_VERSION = 1
PASS, FAIL, NOT_VERIFIED, UNSUPPORTED, DEVIATION = (
    "PASS",
    "FAIL",
    "NOT VERIFIED",
    "UNSUPPORTED",
    "DEVIATION",
)
OUTCOMES = (PASS, FAIL, NOT_VERIFIED, UNSUPPORTED, DEVIATION)

#: Per-test outcomes (pytest's, with the strict-xpass case named).
TEST_OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "not run")

PARTIAL_BANNER = "partial — not a conformance claim"

# -- secrets -----------------------------------------------------------------------------

_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s'\"]*):[^@\s'\"/]*@")
_KV_PASSWORD = re.compile(
    r"(?P<key>\b(?:password|passwd|pwd|secret|token)\b\s*[=:]\s*)"
    r"(?P<value>'[^']*'|\"[^\"]*\"|[^\s&;,'\")]+)",
    re.IGNORECASE,
)


def mask_secrets(text: str) -> str:
    """Replace passwords in URLs/DSNs (``scheme://user:***@host``, ``password=***``)."""
    text = _URL_PASSWORD.sub(lambda m: f"{m.group('head')}:***@", text)
    return _KV_PASSWORD.sub(lambda m: f"{m.group('key')}***", text)


def mask_all(value: Any) -> Any:
    """``mask_secrets`` applied to every string inside a JSON-like value."""
    if isinstance(value, str):
        return mask_secrets(value)
    if isinstance(value, Mapping):
        return {k: mask_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_all(v) for v in value]
    return value


# -- evaluation ----------------------------------------------------------------------------


@dataclass
class TestResult:
    """One suite test as it ran (``outcome`` is one of :data:`TEST_OUTCOMES`)."""

    __test__ = False  # not a pytest test class, despite the name

    nodeid: str
    outcome: str = "not run"
    duration_s: float = 0.0
    message: str | None = None
    hypothesis: dict[str, Any] | None = None
    #: Clauses a failure is blamed on (a ``chongming-blame:`` note); empty: all it declares.
    blames: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "nodeid": self.nodeid,
            "outcome": self.outcome,
            "duration_s": round(self.duration_s, 6),
            "message": self.message,
            "hypothesis": self.hypothesis,
            "blames": list(self.blames),
        }


@dataclass
class ClauseResult:
    clause: Clause
    outcome: str
    note: str | None = None
    tests: list[TestResult] = field(default_factory=list)

    @property
    def gated(self) -> bool:
        """Whether ``--chongming-gate`` looks at this clause (review clauses never)."""
        return self.clause.scope is not Scope.REVIEW

    @property
    def failing_tests(self) -> list[TestResult]:
        return [t for t in self.tests if t.outcome == "failed"]


def _names(tests: Iterable[TestResult]) -> str:
    return ", ".join(t.nodeid.rsplit("::", 1)[-1] for t in tests)


def _evaluate_one(
    clause: Clause,
    tests: list[TestResult],
    capabilities: Capabilities,
    unsupported: Mapping[str, str],
    shared_available: bool,
) -> ClauseResult:
    cid = clause.id
    if clause.scope is Scope.REVIEW:
        return ClauseResult(
            clause,
            NOT_VERIFIED,
            "review clause: not observable through the protocol; check it by review "
            "(excluded from the gate)",
            tests,
        )
    if cid in unsupported:
        return ClauseResult(clause, UNSUPPORTED, unsupported[cid], tests)
    if clause.scope is Scope.CROSS_PROCESS and not shared_available:
        return ClauseResult(
            clause,
            NOT_VERIFIED,
            "needs a shared store (--chongming-shared-store or make_shared_store in the "
            "store's module); none was available",
            tests,
        )
    # A failure blamed on other clauses (a state-machine run stopped by a SAVE-KEEPS-LEASE
    # bug, say) is no evidence for or against this one: leave it out.
    elsewhere = [t for t in tests if t.outcome == "failed" and t.blames and cid not in t.blames]
    tests_here = [t for t in tests if t not in elsewhere]
    failed = [t for t in tests_here if t.outcome == "failed"]
    if cid in capabilities.deviations:
        reason = capabilities.deviations[cid]
        xfailed = [t for t in tests if t.outcome == "xfailed"]
        stale = [t for t in tests if t.outcome == "xpassed"]
        if failed:
            return ClauseResult(clause, FAIL, f"failed: {_names(failed)}", tests)
        if xfailed:
            return ClauseResult(clause, DEVIATION, f"declared deviation: {reason}", tests)
        if stale:
            return ClauseResult(
                clause,
                FAIL,
                f"declared as a deviation ({reason}) but its tests passed (XPASS strict): "
                "the store now meets the clause, remove the deviation",
                tests,
            )
        return ClauseResult(clause, NOT_VERIFIED, "no test checking it ran", tests)
    if failed:
        return ClauseResult(clause, FAIL, f"failed: {_names(failed)}", tests)
    # A strict xpass of a test deviating from *another* clause still passed all its checks.
    passed = [t for t in tests_here if t.outcome in ("passed", "xpassed")]
    incomplete = [t for t in tests_here if t.outcome not in ("passed", "xpassed")]
    if not tests:
        return ClauseResult(clause, NOT_VERIFIED, "no test in this run checks it", tests)
    if not tests_here:
        return ClauseResult(
            clause,
            NOT_VERIFIED,
            f"its only checks failed on other clauses: {_names(elsewhere)}",
            tests,
        )
    if incomplete:
        why = "; ".join(f"{t.nodeid.rsplit('::', 1)[-1]} {t.outcome}" for t in incomplete)
        return ClauseResult(clause, NOT_VERIFIED, f"not every test checking it ran: {why}", tests)
    assert passed
    return ClauseResult(clause, PASS, None, tests)


def evaluate(
    clause_tests: Mapping[str, Sequence[TestResult]],
    capabilities: Capabilities,
    *,
    shared_available: bool,
) -> list[ClauseResult]:
    """One result per catalogue clause, in catalogue order."""
    unsupported = capabilities.unsupported_clauses()
    return [
        _evaluate_one(
            clause,
            list(clause_tests.get(cid, ())),
            capabilities,
            unsupported,
            shared_available,
        )
        for cid, clause in CLAUSES.items()
    ]


def gate_failures(results: Iterable[ClauseResult], level: str) -> list[ClauseResult]:
    """Gated clauses at ``level`` ('must' or 'should') or above that are FAIL or NOT VERIFIED."""
    levels = {Level.MUST} if level == "must" else {Level.MUST, Level.SHOULD}
    return [
        r
        for r in results
        if r.gated and r.clause.level in levels and r.outcome in (FAIL, NOT_VERIFIED)
    ]


def clause_entry(result: ClauseResult) -> dict[str, Any]:
    c = result.clause
    return {
        "id": c.id,
        "level": c.level.value,
        "section": c.section,
        "scope": c.scope.value,
        "text": c.text,
        "outcome": result.outcome,
        "gated": result.gated,
        "note": result.note,
        "tests": [t.to_json() for t in result.tests],
    }


def summary_counts(results: Iterable[ClauseResult]) -> dict[str, dict[str, int]]:
    out = {lvl.value: dict.fromkeys(OUTCOMES, 0) for lvl in Level}
    for r in results:
        out[r.clause.level.value][r.outcome] += 1
    return out


# -- schema --------------------------------------------------------------------------------

_STR, _NUM, _BOOL, _NULL = "string", "number", "boolean", "null"
_INT = "integer"

_HYPOTHESIS: dict[str, Any] = {
    "type": ["object", _NULL],
    "required": ["seeds", "falsifying_examples", "notes"],
    "properties": {
        "seeds": {"type": "array", "items": {"type": _STR}},
        "falsifying_examples": {"type": "array", "items": {"type": _STR}},
        "notes": {"type": "array", "items": {"type": _STR}},
    },
}

_TEST: dict[str, Any] = {
    "type": "object",
    "required": ["nodeid", "outcome", "duration_s", "message", "hypothesis", "blames"],
    "properties": {
        "nodeid": {"type": _STR},
        "outcome": {"type": _STR, "enum": list(TEST_OUTCOMES)},
        "duration_s": {"type": _NUM},
        "message": {"type": [_STR, _NULL]},
        "hypothesis": _HYPOTHESIS,
        "blames": {"type": "array", "items": {"type": _STR}},
    },
}

_COUNTS: dict[str, Any] = {
    "type": "object",
    "required": list(OUTCOMES),
    "properties": {o: {"type": _INT} for o in OUTCOMES},
}

#: The JSON report's structure, in a JSON-Schema-like subset (type, required,
#: properties, items, enum); documented in docs/plugin.md.
REPORT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "schema", "schema_version", "kit_version", "catalogue_version", "store",
        "environment", "run", "capabilities", "verdict", "summary", "clauses",
        "unmapped_tests",
    ],
    "properties": {
        "schema": {"type": _STR, "enum": ["chongming-conformance-report"]},
        "schema_version": {"type": _INT, "enum": [SCHEMA_VERSION]},
        "kit_version": {"type": _STR},
        "catalogue_version": {"type": _STR},
        "store": {
            "type": "object",
            "required": ["spec", "source", "type", "repr", "shared_spec", "shared_source"],
            "properties": {
                "spec": {"type": _STR},
                "source": {"type": _STR},
                "type": {"type": [_STR, _NULL]},
                "repr": {"type": [_STR, _NULL]},
                "shared_spec": {"type": [_STR, _NULL]},
                "shared_source": {"type": [_STR, _NULL]},
            },
        },
        "environment": {
            "type": "object",
            "required": ["python", "implementation", "platform", "pytest", "hypothesis"],
            "properties": {
                "python": {"type": _STR},
                "implementation": {"type": _STR},
                "platform": {"type": _STR},
                "pytest": {"type": _STR},
                "hypothesis": {"type": [_STR, _NULL]},
            },
        },
        "run": {
            "type": "object",
            "required": [
                "started_at", "duration_s", "partial", "partial_reasons", "timeout_s",
                "timeout_mechanism", "profile", "hypothesis_seed", "gate", "gate_passed",
                "pytest_exit_status", "tests_collected", "collection_errors",
            ],
            "properties": {
                "started_at": {"type": _STR},
                "duration_s": {"type": _NUM},
                "partial": {"type": _BOOL},
                "partial_reasons": {"type": "array", "items": {"type": _STR}},
                "timeout_s": {"type": _NUM},
                "timeout_mechanism": {"type": _STR},
                "profile": {"type": [_STR, _NULL]},
                "hypothesis_seed": {"type": [_STR, _NULL]},
                "gate": {"type": [_STR, _NULL], "enum": ["must", "should", None]},
                "gate_passed": {"type": [_BOOL, _NULL]},
                "pytest_exit_status": {"type": _INT},
                "tests_collected": {"type": _INT},
                "collection_errors": {"type": "array", "items": {"type": _STR}},
            },
        },
        "capabilities": {
            "type": "object",
            "required": ["origin", "unsupported", "deviations"],
            "properties": {
                "origin": {"type": [_STR, _NULL]},
                "unsupported": {"type": "object"},
                "deviations": {"type": "object"},
            },
        },
        "verdict": {"type": _STR},
        "summary": {
            "type": "object",
            "required": [lvl.value for lvl in Level],
            "properties": {lvl.value: _COUNTS for lvl in Level},
        },
        "clauses": {
            "type": "array",
            "items": {
                "type": "object",
                "required": [
                    "id", "level", "section", "scope", "text", "outcome", "gated", "note",
                    "tests",
                ],
                "properties": {
                    "id": {"type": _STR, "enum": list(CLAUSES)},
                    "level": {"type": _STR, "enum": [lvl.value for lvl in Level]},
                    "section": {"type": _STR},
                    "scope": {"type": _STR, "enum": [s.value for s in Scope]},
                    "text": {"type": _STR},
                    "outcome": {"type": _STR, "enum": list(OUTCOMES)},
                    "gated": {"type": _BOOL},
                    "note": {"type": [_STR, _NULL]},
                    "tests": {"type": "array", "items": _TEST},
                },
            },
        },
        "unmapped_tests": {"type": "array", "items": _TEST},
    },
}

_PY_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def _type_ok(value: Any, name: str) -> bool:
    if name in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, _PY_TYPES[name])


def validate_report(doc: Any, schema: Mapping[str, Any] = REPORT_SCHEMA, path: str = "$") -> (
    list[str]
):
    """Every way ``doc`` departs from ``schema`` ('[]' when it conforms)."""
    problems: list[str] = []
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        if not any(_type_ok(doc, n) for n in names):
            return [f"{path}: expected {' or '.join(names)}, got {type(doc).__name__}"]
    if "enum" in schema and doc not in schema["enum"]:
        problems.append(f"{path}: {doc!r} is not one of {schema['enum']!r}")
    if isinstance(doc, dict):
        for key in schema.get("required", ()):
            if key not in doc:
                problems.append(f"{path}: missing key {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in doc:
                problems.extend(validate_report(doc[key], sub, f"{path}.{key}"))
    if isinstance(doc, list) and "items" in schema:
        for i, item in enumerate(doc):
            problems.extend(validate_report(item, schema["items"], f"{path}[{i}]"))
    return problems


# -- rendering -------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _failing(entry: Mapping[str, Any]) -> list[str]:
    return [t["nodeid"].rsplit("::", 1)[-1] for t in entry["tests"] if t["outcome"] == "failed"]


def render_markdown(doc: Mapping[str, Any]) -> str:
    """A report fit for a pull-request comment (already masked: ``doc`` is)."""
    run, store, env = doc["run"], doc["store"], doc["environment"]
    shared = f"`{store['shared_spec']}`" if store["shared_spec"] else "none"
    lines = [f"# Conformance report: `{store['spec']}`", ""]
    if run["partial"]:
        lines += [
            f"> **{PARTIAL_BANNER}.** " + "; ".join(run["partial_reasons"]),
            "",
        ]
    lines += [f"**Verdict:** {doc['verdict']}", ""]
    lines += [
        "| | |",
        "|---|---|",
        f"| Store | `{store['spec']}` ({_cell(store['type'] or '?')}) |",
        f"| Shared store | {shared} |",
        f"| Kit / catalogue | {doc['kit_version']} / {doc['catalogue_version']} |",
        f"| Python | {env['implementation']} {env['python']} on {_cell(env['platform'])} |",
        f"| pytest / hypothesis | {env['pytest']} / {env['hypothesis'] or '-'} |",
        f"| Gate | {run['gate'] or 'none'}"
        + ("" if run["gate_passed"] is None else (" — passed" if run["gate_passed"] else
                                                  " — **failed**"))
        + " |",
        "",
        "| Level | " + " | ".join(OUTCOMES) + " |",
        "|---|" + "---|" * len(OUTCOMES),
    ]
    for lvl, counts in doc["summary"].items():
        lines.append(f"| {lvl} | " + " | ".join(str(counts[o]) for o in OUTCOMES) + " |")
    lines += ["", "| Clause | Level | Outcome | Failing tests / note |", "|---|---|---|---|"]
    for entry in doc["clauses"]:
        failing = _failing(entry)
        detail = ", ".join(f"`{n}`" for n in failing) if failing else (entry["note"] or "")
        outcome = entry["outcome"]
        shown = f"**{outcome}**" if outcome in (FAIL, NOT_VERIFIED) and entry["gated"] else outcome
        lines.append(
            f"| `{entry['id']}` | {entry['level']} | {shown} | {_cell(detail)} |"
        )
    failures = [
        (entry["id"], t) for entry in doc["clauses"] for t in entry["tests"]
        if t["outcome"] == "failed" and t["message"]
    ]
    if failures:
        lines += ["", "## Failures", ""]
        seen: set[str] = set()
        for cid, t in failures:
            if t["nodeid"] in seen:
                continue
            seen.add(t["nodeid"])
            lines += [
                f"<details><summary><code>{t['nodeid']}</code> ({cid})</summary>",
                "",
                "```text",
                t["message"].strip(),
                "```",
                "",
                "</details>",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"


def render_terminal(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The clause table for the end of the terminal output, as (line, colour) pairs."""
    rows = []
    for entry in doc["clauses"]:
        failing = _failing(entry)
        detail = ", ".join(failing) if failing else ""
        if not failing and entry["outcome"] != PASS and entry["note"]:
            detail = entry["note"]
        colour = ""
        if entry["gated"]:
            colour = {PASS: "green", FAIL: "red", NOT_VERIFIED: "yellow"}.get(
                entry["outcome"], "yellow"
            )
        rows.append((entry["id"], entry["level"], entry["outcome"], detail, colour))
    width = max(len(r[0]) for r in rows)
    lines = [(f"{'CLAUSE':<{width}}  LEVEL   OUTCOME       FAILING TESTS / NOTE", "")]
    for cid, level, outcome, detail, colour in rows:
        lines.append((f"{cid:<{width}}  {level:<6}  {outcome:<12}  {detail}".rstrip(), colour))
    lines.append(("", ""))
    for lvl, counts in doc["summary"].items():
        text = f"{lvl}: " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES if counts[o])
        lines.append((text, ""))
    if doc["unmapped_tests"]:
        lines.append((
            f"{len(doc['unmapped_tests'])} suite test(s) declare no clause: "
            + ", ".join(t["nodeid"] for t in doc["unmapped_tests"]),
            "yellow",
        ))
    for err in doc["run"]["collection_errors"]:
        lines.append((f"suite collection error: {err.splitlines()[0]}", "red"))
    if doc["run"]["partial"]:
        lines.append((
            f"{PARTIAL_BANNER.upper()}: " + "; ".join(doc["run"]["partial_reasons"]),
            "red",
        ))
    lines.append((f"verdict: {doc['verdict']}", "bold"))
    return lines


def dumps(doc: Mapping[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
