"""Harvest: pytest's per-phase test reports turned into plain per-test records.

This is the last place pytest objects appear: :meth:`Harvest.records` hands
the report package a :class:`~chongming_conformance.report.SuiteRecords`, from
which every outcome and the verdict are computed. Failure text is masked here,
in pytest's own output as well, and scraped for hypothesis reproduction details
and ``chongming-blame`` notes.
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Generator, Iterable
from typing import Any

import pytest

from ..checking.cases import take_counts
from ..oracle.blame import failure_blames
from ..oracle.messages import elide_start
from ..report import (
    HypothesisInfo,
    SuiteRecords,
    TestResult,
    mask_all,
    mask_secrets,
    parse_blames,
)
from ..report.records import SETUP_PREFIX
from ..seam.reuse import StoreReuseError
from .collection import MESSAGE_LIMIT, SuiteCollection, is_suite_item
from .itemdata import serial_nodeid

__all__ = ["BLAMES_PROPERTY", "USAGE_PROPERTY", "Harvest", "hypothesis_info", "usage_error"]

#: The ``user_properties`` key marking a test stopped by a usage problem of the run (a
#: ``reset_store`` that did not empty the store), not by anything the store did.
USAGE_PROPERTY = "chongming-usage-error"

#: The ``user_properties`` key carrying the input cases a generated check met (cases.py).
CASES_PROPERTY = "chongming-cases"

#: The ``user_properties`` key carrying a failing phase's blamed clauses. Read from the
#: exception objects while they exist (every leaf of an ExceptionGroup included) and
#: kept on the report, so the blames survive pytest-xdist's report serialisation.
BLAMES_PROPERTY = "chongming-blames"
#: The ``user_properties`` key carrying the picture of the stress run a test made
#: (``stress.picture``), drawn by the HTML report.
HISTORY_PROPERTY = "chongming-history"
#: The ``user_properties`` keys carrying a fault run's coverage matrix and the clauses it
#: passed without judging (``stress.evidence``).
COVERAGE_PROPERTY = "chongming-fault-coverage"
UNPROVEN_PROPERTY = "chongming-unproven"

_SEED = re.compile(r"@seed\((\d+)\)|--hypothesis-seed=(\S+)")
_REPRO = re.compile(r"@reproduce_failure\([^)]*\)")
_E_PREFIX = re.compile(r"^E(\s|$)")
# Hypothesis' wording changed over releases; both name the minimal failing input.
_EXAMPLE_HEADS = ("Falsifying", "Failing test case")


def hypothesis_info(texts: Iterable[str]) -> HypothesisInfo:
    """Seeds, falsifying examples and ``@reproduce_failure`` blobs found in a test's output."""
    seeds: list[str] = []
    examples: list[str] = []
    notes: list[str] = []
    for text in texts:
        lines = [" " + line[1:] if _E_PREFIX.match(line) else line for line in text.splitlines()]
        block: list[str] | None = None
        for line in lines:
            if line.lstrip().startswith(_EXAMPLE_HEADS):
                block = [line.rstrip()]
                examples.append("")
                continue
            if block is not None:
                if not line.strip() or line.lstrip().startswith(("Traceback", "You can")):
                    block = None
                else:
                    block.append(line.rstrip())
                    examples[-1] = textwrap.dedent("\n".join(block))
                    continue
            for m in _SEED.finditer(line):
                seed = m.group(1) or m.group(2)
                if seed not in seeds:
                    seeds.append(seed)
            for m in _REPRO.finditer(line):
                if m.group(0) not in notes:
                    notes.append(m.group(0))
        if examples and examples[-1] == "" and block:
            examples[-1] = textwrap.dedent("\n".join(block))
    for i, ex in enumerate(examples):
        if not ex:
            examples[i] = "(failing example not shown)"
    return HypothesisInfo(
        seeds=seeds, falsifying_examples=list(dict.fromkeys(examples)), notes=notes
    )


def _blames(report: pytest.TestReport, text: str) -> tuple[str, ...]:
    """The clauses a failing phase is blamed on: from the exceptions (kept by makereport),
    else from the notes in the failure text. Clauses the test does not declare count too:
    they make the failure a knock-on for the ones it does."""
    for key, value in report.user_properties:
        if key == BLAMES_PROPERTY and isinstance(value, list):
            return tuple(sorted(str(v) for v in value))
    return tuple(sorted(parse_blames(text)))


def usage_error(exc: BaseException) -> str | None:
    """The message of a :class:`~chongming_conformance.seam.reuse.StoreReuseError` inside ``exc``
    (itself, a leaf of an exception group, or a cause), or None."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, StoreReuseError):
            return str(current)
        if isinstance(current, BaseExceptionGroup):
            todo.extend(current.exceptions)
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


def _take_evidence() -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The fault coverage matrix and the unproven clauses the test that just ran kept
    (nothing when no stress module was ever imported)."""
    evidence = sys.modules.get("chongming_conformance.stress.evidence")
    if evidence is None:
        return None, {}
    return evidence.take_coverage(), dict(evidence.take_unproven())


def _take_pictures() -> list[dict[str, object]]:
    """The stress runs' pictures kept by the test that just ran (none when no stress
    module was ever imported: the harness is not loaded for them)."""
    picture = sys.modules.get("chongming_conformance.stress.picture")
    return [] if picture is None else list(picture.take_pictures())


class Harvest:
    """Hooks that keep every suite test's phase reports, masked, until the run ends."""

    def __init__(self, collection: SuiteCollection, deselecting: str) -> None:
        self.collection = collection
        self.deselecting = deselecting
        self.reports: dict[str, dict[str, pytest.TestReport]] = {}

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        if is_suite_item(item) and call.when == "call":
            counts = take_counts()  # what this test's hypothesis runs met (cases.py)
            if counts:
                merged: dict[str, int] = {}
                for per_check in counts.values():
                    for case, n in per_check.items():
                        merged[case] = merged.get(case, 0) + n
                report.user_properties.append((CASES_PROPERTY, merged))
            pictures = _take_pictures()
            if pictures:  # a stress test runs one scenario: its last run is the one judged
                report.user_properties.append((HISTORY_PROPERTY, mask_all(pictures[-1])))
            coverage, unproven = _take_evidence()
            if coverage is not None:
                report.user_properties.append((COVERAGE_PROPERTY, mask_all(coverage)))
            if unproven:
                report.user_properties.append((UNPROVEN_PROPERTY, mask_all(unproven)))
        if is_suite_item(item):
            if report.failed and call.excinfo is not None:
                ids, _ = failure_blames(call.excinfo.value)
                report.user_properties.append((BLAMES_PROPERTY, list(ids)))
                usage = usage_error(call.excinfo.value)
                if usage is not None:
                    # The run cannot go on: one precise message, then stop (exit 4).
                    report.user_properties.append((USAGE_PROPERTY, mask_secrets(usage)))
                    item.session.shouldstop = f"usage error: {mask_secrets(usage)}"
            if report.failed:
                text = report.longreprtext
                masked = mask_secrets(text)
                if masked != text:
                    report.longrepr = masked
            elif report.skipped and isinstance(report.longrepr, tuple):
                path, line, reason = report.longrepr  # -rs and JUnit show the skip reason
                report.longrepr = (path, line, mask_secrets(reason))
            report.sections = [(t, mask_secrets(c)) for t, c in report.sections]
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Kept whatever the test: under xdist the controller learns which tests are
        # suite tests only when the workers finish (see .distribution); records()
        # picks the suite's.
        self.reports.setdefault(serial_nodeid(report.nodeid), {})[report.when] = report

    def usage_error(self, nodeid: str) -> str | None:
        """The usage problem that stopped test ``nodeid``, if one did."""
        for report in self.reports.get(nodeid, {}).values():
            for key, value in report.user_properties:
                if key == USAGE_PROPERTY:
                    return str(value)
        return None

    def usage_errors(self) -> list[str]:
        """Every usage problem that stopped a test of this run, first seen first."""
        found = (self.usage_error(nodeid) for nodeid in self.reports)
        return list(dict.fromkeys(u for u in found if u is not None))

    def records(self) -> SuiteRecords:
        """Every collected suite test as a plain record, with what collection cut."""
        col = self.collection
        return SuiteRecords(
            tests={nodeid: self._test_result(nodeid) for nodeid in col.declared},
            declared=dict(col.declared),
            may_blame=dict(col.may_blame),
            narrowed=tuple(col.narrowed),
            deselected=len(col.deselected),
            deselected_by=self.deselecting,
            collection_errors=tuple(col.collection_errors),
        )

    def _test_result(self, nodeid: str) -> TestResult:
        phases = self.reports.get(nodeid, {})
        result = TestResult(nodeid)
        if not phases:
            return result
        result.duration_s = round(sum(r.duration for r in phases.values()), 6)
        call = phases.get("call")
        xfailed = [r for r in phases.values() if r.skipped and hasattr(r, "wasxfail")]
        failed = [r for r in phases.values() if r.failed]
        skipped = [r for r in phases.values() if r.skipped and not hasattr(r, "wasxfail")]
        if failed:
            first = failed[0]
            text = first.longreprtext
            if first.when == "call" and text.startswith("[XPASS(strict)]"):
                result.outcome = "xpassed"
                result.message = text
            else:
                result.outcome = "failed"
                where = {"call": "", "setup": SETUP_PREFIX}.get(first.when, f"[{first.when}] ")
                if self.usage_error(nodeid) is not None:
                    where = SETUP_PREFIX  # a usage problem before any check: proves nothing
                result.message = where + elide_start(text, MESSAGE_LIMIT)
                result.blames = _blames(first, text)
        elif xfailed:
            result.outcome = "xfailed"
            result.message = f"expected failure: {xfailed[0].wasxfail}\n" + elide_start(
                xfailed[0].longreprtext, MESSAGE_LIMIT)
        elif skipped:
            result.outcome = "skipped"
            longrepr = skipped[0].longrepr
            result.message = (
                str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
            )
        elif call is not None and call.passed:
            result.outcome = "passed"
        for report in phases.values():
            for key, value in report.user_properties:
                if key == CASES_PROPERTY and isinstance(value, dict):
                    result.cases = {str(k): int(v) for k, v in value.items()}
                if key == HISTORY_PROPERTY and isinstance(value, dict):
                    result.history = value
                if key == COVERAGE_PROPERTY and isinstance(value, dict):
                    result.coverage = value
                if key == UNPROVEN_PROPERTY and isinstance(value, dict) \
                        and result.outcome == "passed":
                    result.unproven = {str(k): str(v) for k, v in value.items()}
        # Property checks may run hypothesis inside a plain test method, so look at every
        # failing test's output, not only at @given tests.
        texts = [r.longreprtext for r in phases.values() if r.longrepr and not r.passed]
        texts += [c for r in phases.values() for _, c in r.sections]
        info = hypothesis_info(texts)
        if nodeid in self.collection.hypothesis_items or any(info.values()):
            result.hypothesis = info
        if result.message is not None:
            result.message = mask_secrets(result.message)
        return result
