"""The conformance report: per-clause outcomes from plain test records, as JSON, Markdown or text.

This package owns the document end to end, and nothing in it imports pytest:

* :mod:`.records` -- the plain per-test and per-clause records (:class:`TestResult`,
  :class:`ClauseResult`, :class:`SuiteRecords`) and the outcome names;
* :mod:`.outcomes` -- per-clause evaluation, blame narrowing, partial runs, the gate
  and the verdict (:func:`assess`); the outcome rules are in its docstring;
* :mod:`.blames` -- reading ``chongming-blame:`` notes out of failure text;
* :mod:`.document` -- the JSON document, declared once; :data:`REPORT_SCHEMA` is
  derived from the same declaration (:mod:`.schema`), and :func:`validate_report`
  checks a document against it without any dependency;
* :mod:`.terminal`, :mod:`.markdown`, :mod:`.catalogue` -- renderers;
* :mod:`.masking` -- every string that goes into a document passes through
  :func:`mask_secrets`.
"""

from __future__ import annotations

from .blames import blamed_among, parse_blames
from .catalogue import render_catalogue
from .document import (
    REPORT_SCHEMA,
    SCHEMA_VERSION,
    Environment,
    RunSettings,
    StoreInfo,
    build_document,
    clause_entry,
    describe_environment,
    dumps,
)
from .markdown import render_markdown
from .masking import mask_all, mask_secrets
from .outcomes import (
    Assessment,
    assess,
    evaluate,
    gate_failures,
    partial_reasons,
    summary_counts,
    verdict,
)
from .records import (
    DEVIATION,
    FAIL,
    NOT_VERIFIED,
    OUTCOMES,
    PARTIAL_BANNER,
    PASS,
    TEST_OUTCOMES,
    UNSUPPORTED,
    ClauseResult,
    HypothesisInfo,
    SuiteRecords,
    TestResult,
)
from .schema import validate_report
from .terminal import render_gate, render_terminal

__all__ = [
    "DEVIATION",
    "FAIL",
    "NOT_VERIFIED",
    "OUTCOMES",
    "PARTIAL_BANNER",
    "PASS",
    "REPORT_SCHEMA",
    "SCHEMA_VERSION",
    "TEST_OUTCOMES",
    "UNSUPPORTED",
    "Assessment",
    "ClauseResult",
    "Environment",
    "HypothesisInfo",
    "RunSettings",
    "StoreInfo",
    "SuiteRecords",
    "TestResult",
    "assess",
    "blamed_among",
    "build_document",
    "clause_entry",
    "describe_environment",
    "dumps",
    "evaluate",
    "gate_failures",
    "mask_all",
    "mask_secrets",
    "parse_blames",
    "partial_reasons",
    "render_catalogue",
    "render_gate",
    "render_markdown",
    "render_terminal",
    "summary_counts",
    "validate_report",
    "verdict",
]
