"""The JSON report document, declared once: its schema and its values both come from here.

Each section is a dataclass whose fields, in order, are the section's keys;
:data:`REPORT_SCHEMA` is derived from these declarations and
:func:`build_document` fills them, so a key cannot be added to one and
forgotten in the other. ``schema_version`` changes whenever a key is removed or
changes meaning; new keys may be added within a version (as
:data:`~.schema.OPTIONAL_KEY`).
"""

from __future__ import annotations

import datetime as _dt
import json
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from .. import __version__
from ..protocol.capabilities import Capabilities
from ..protocol.clauses import CATALOGUE_VERSION, CLAUSES, Level, Scope
from .masking import mask_all
from .outcomes import Assessment
from .records import OUTCOMES, ClauseResult, TestResult
from .schema import OPTIONAL_KEY, Enum, Keys, as_json, schema_of, validate

__all__ = [
    "REPORT_SCHEMA",
    "SCHEMA_VERSION",
    "Environment",
    "RunSettings",
    "StoreInfo",
    "StoreReuseInfo",
    "build_document",
    "clause_entry",
    "describe_environment",
    "dumps",
    "validate_report",
]

SCHEMA_VERSION = 1
_LEVELS = tuple(lvl.value for lvl in Level)


@dataclass(frozen=True)
class StoreInfo:
    """Which store was checked, and where each spec came from (option, env, ini, found)."""

    spec: str
    source: str
    type: str | None = None
    repr: str | None = None
    shared_spec: str | None = None
    shared_source: str | None = None


@dataclass(frozen=True)
class Environment:
    python: str
    implementation: str
    platform: str
    pytest: str
    hypothesis: str | None


def describe_environment(pytest_version: str) -> Environment:
    """The interpreter and library versions a report was produced with."""
    try:
        import hypothesis

        hyp_version: str | None = hypothesis.__version__
    except ImportError:  # pragma: no cover - hypothesis is a dependency
        hyp_version = None
    return Environment(
        python=platform.python_version(),
        implementation=platform.python_implementation(),
        platform=platform.platform(),
        pytest=pytest_version,
        hypothesis=hyp_version,
    )


@dataclass(frozen=True)
class StoreReuseInfo:
    """The ``reset_store`` seam in this run: which function emptied the kept stores, how many
    stores the factory opened and how often one was reset and handed out again (summed
    over every process of the run)."""

    reset_store: str
    stores_opened: int
    reuses: int


@dataclass(frozen=True)
class RunSettings:
    """How the run was configured and when it ran: what the plugin knows, the verdict does not."""

    started: float  # seconds since the epoch
    finished: float
    timeout_s: float
    timeout_mechanism: str
    profile: str | None = None
    stress_profile: dict[str, Any] | None = None
    hypothesis_seed: str | None = None
    pytest_exit_status: int = 0
    #: None: no reset_store, a new store per test and example.
    store_reuse: StoreReuseInfo | None = None
    #: The faults requested and the deployment the cross-process verdicts ran on (None:
    #: no shared store, so no cross-process verdict).
    topology: str | None = None
    #: --chongming-seed (resolved): the one seed of the run; None: the gate's fixed schedule.
    seed: int | None = None


@dataclass(frozen=True)
class _Run:
    started_at: str
    duration_s: float
    partial: bool
    partial_reasons: list[str]
    timeout_s: float
    timeout_mechanism: str
    profile: str | None
    stress_profile: Annotated[dict[str, Any] | None, OPTIONAL_KEY]
    hypothesis_seed: str | None
    store_reuse: Annotated[StoreReuseInfo | None, OPTIONAL_KEY]
    topology: Annotated[str | None, OPTIONAL_KEY]
    seed: Annotated[int | None, OPTIONAL_KEY]
    gate: Annotated[str | None, Enum(("must", "should", None))]
    gate_passed: bool | None
    pytest_exit_status: int
    tests_collected: int
    collection_errors: list[str]


@dataclass(frozen=True)
class _Capabilities:
    origin: str | None
    unsupported: dict[str, str]
    deviations: dict[str, str]


@dataclass(frozen=True)
class _ClauseEntry:
    id: Annotated[str, Enum(tuple(CLAUSES))]
    level: Annotated[str, Enum(_LEVELS)]
    section: str
    guide: Annotated[str, OPTIONAL_KEY]
    scope: Annotated[str, Enum(tuple(s.value for s in Scope))]
    text: str
    outcome: Annotated[str, Enum(OUTCOMES)]
    gated: bool
    note: str | None
    tests: list[TestResult]

    @classmethod
    def of(cls, result: ClauseResult) -> _ClauseEntry:
        c = result.clause
        return cls(
            id=c.id,
            level=c.level.value,
            section=c.section,
            guide=c.guide_link,
            scope=c.scope.value,
            text=c.text,
            outcome=result.outcome,
            gated=result.gated,
            note=result.note,
            tests=list(result.tests),
        )


_Counts = Annotated[dict[str, int], Keys(OUTCOMES, int)]


@dataclass(frozen=True, kw_only=True)
class _Report:
    schema: Annotated[str, Enum(("chongming-conformance-report",))] = (
        "chongming-conformance-report"
    )
    schema_version: Annotated[int, Enum((SCHEMA_VERSION,))] = SCHEMA_VERSION
    kit_version: str = __version__
    catalogue_version: str = CATALOGUE_VERSION
    store: StoreInfo
    environment: Environment
    run: _Run
    capabilities: _Capabilities
    verdict: str
    summary: Annotated[dict[str, dict[str, int]], Keys(_LEVELS, _Counts)]
    clauses: list[_ClauseEntry]
    unmapped_tests: list[TestResult]


#: The JSON report's structure, in a JSON-Schema-like subset (type, required,
#: properties, items, enum); documented in docs/plugin.md.
REPORT_SCHEMA: dict[str, Any] = schema_of(_Report)


def validate_report(doc: Any, schema: Mapping[str, Any] | None = None) -> list[str]:
    """Every way ``doc`` departs from ``schema`` (default: :data:`REPORT_SCHEMA`); '[]' if none."""
    return validate(doc, REPORT_SCHEMA if schema is None else schema)


def clause_entry(result: ClauseResult) -> dict[str, Any]:
    """One clause's entry in the ``clauses`` list of the document."""
    entry: dict[str, Any] = as_json(_ClauseEntry.of(result))
    return entry


def build_document(
    assessment: Assessment,
    *,
    store: StoreInfo,
    environment: Environment,
    settings: RunSettings,
    capabilities: Capabilities,
    tests_collected: int,
    collection_errors: list[str],
) -> dict[str, Any]:
    """The report document (every string masked), laid out from a decided assessment."""
    run = _Run(
        started_at=_dt.datetime.fromtimestamp(settings.started, _dt.UTC).isoformat(),
        duration_s=round(settings.finished - settings.started, 3),
        partial=assessment.partial,
        partial_reasons=assessment.partial_reasons,
        timeout_s=settings.timeout_s,
        timeout_mechanism=settings.timeout_mechanism,
        profile=settings.profile,
        stress_profile=settings.stress_profile,
        hypothesis_seed=settings.hypothesis_seed,
        store_reuse=settings.store_reuse,
        topology=settings.topology,
        seed=settings.seed,
        gate=assessment.gate,
        gate_passed=assessment.gate_passed,
        pytest_exit_status=settings.pytest_exit_status,
        tests_collected=tests_collected,
        collection_errors=collection_errors,
    )
    report = _Report(
        store=store,
        environment=environment,
        run=run,
        capabilities=_Capabilities(**capabilities.to_json()),
        verdict=assessment.verdict,
        summary=assessment.summary,
        clauses=[_ClauseEntry.of(r) for r in assessment.results],
        unmapped_tests=assessment.unmapped,
    )
    doc: dict[str, Any] = mask_all(as_json(report))
    return doc


def dumps(doc: Mapping[str, Any]) -> str:
    """The document as the ``.json`` report file holds it."""
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
