"""A report document for stress runs made outside pytest (the stress CLI, the soak).

The HTML, Markdown and JSON renderers all read one document (``report.document``);
the plugin builds it from a pytest run. ``python -m chongming_conformance.stress ...
--html FILE`` and ``chongming-conformance soak ... --html FILE`` have scenario results
instead. Rather than a second format, each result becomes the record of the suite test
that runs the same scenario (``stress::test_xp_...``, its clauses, its outcome, the
failure text, the blamed clauses and the run's picture), and the document is built by
the same ``assess`` and ``build_document``. Everything the run did not check stays NOT
VERIFIED, and the document says it is partial and why -- a stress run is never
mistaken for a whole conformance run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from ..protocol.capabilities import Capabilities
from ..report.document import RunSettings, StoreInfo, build_document, describe_environment
from ..report.outcomes import assess
from ..report.records import SETUP_PREFIX, SuiteRecords, TestResult
from ..seam.timeouts import DEFAULT_TIMEOUT
from .runner import INTEGRITY_CLAUSES, ScenarioResult
from .scenarios import SCENARIOS
from .stress_profiles import StressProfile

__all__ = ["NODE_PREFIX", "stress_document"]

#: The node id prefix of a scenario's record (no pytest collected it).
NODE_PREFIX = "stress::"


def _record(result: ScenarioResult) -> TestResult:
    test = TestResult(f"{NODE_PREFIX}{SCENARIOS[result.scenario].test_name}",
                      duration_s=round(result.wall_seconds, 3), history=result.picture,
                      coverage=result.fault_coverage)
    if result.errored:
        # As the plugin records a test whose store could not be opened: failed before its
        # body ran, so its clauses are NOT VERIFIED, never FAIL (records.SETUP_PREFIX).
        test.outcome = "failed"
        test.message = SETUP_PREFIX + result.report()
    elif result.failed:
        test.outcome = "failed"
        test.message = result.report()
        test.blames = tuple(result.blamed())  # as StressContract.assert_stress blames it
    elif result.unverified:
        test.outcome = "skipped"
        test.message = result.report()
    else:
        test.outcome = "passed"  # and the clauses it could not judge NOT VERIFIED, one by one
        test.unproven = dict(result.unproven) or None
    return test


def stress_document(
    results: Sequence[ScenarioResult],
    *,
    spec: str,
    profile: StressProfile,
    started: float,
    finished: float | None = None,
    topology: str | None = None,
    why_partial: str = "only the stress scenarios ran (python -m chongming_conformance.stress)",
) -> dict[str, Any]:
    """The report document of ``results`` (wall-clock ``started``/``finished``, seconds
    since the epoch), every string masked."""
    tests = {}
    declared = {}
    may_blame = {}
    for r in results:
        record = _record(r)
        tests[record.nodeid] = record
        declared[record.nodeid] = tuple(r.clauses)
        # as StressContract's scenario tests carry them (clauses.may_blame)
        may_blame[record.nodeid] = tuple(c for c in INTEGRITY_CLAUSES if c not in r.clauses)
    records = SuiteRecords(tests=tests, declared=declared, narrowed=(why_partial,),
                           may_blame=may_blame)
    assessment = assess(records, Capabilities(), shared_available=True, faults=profile.faults)
    try:
        pytest_version = metadata.version("pytest")
    except metadata.PackageNotFoundError:  # pragma: no cover - pytest is a dependency
        pytest_version = "not installed"
    settings = RunSettings(
        started=started,
        finished=time.time() if finished is None else finished,
        timeout_s=DEFAULT_TIMEOUT,
        timeout_mechanism="the stress harness's own deadline",
        stress_profile=dataclasses.asdict(profile),
        topology=topology,
        seed=profile.seed,
        pytest_exit_status=1 if any(r.failed or r.errored for r in results) else 0,
    )
    return build_document(
        assessment,
        store=StoreInfo(spec=spec, source="command line", type="shared store factory",
                        shared_spec=spec, shared_source="command line"),
        environment=describe_environment(pytest_version),
        settings=settings,
        capabilities=Capabilities(),
        tests_collected=len(tests),
        collection_errors=[],
    )
