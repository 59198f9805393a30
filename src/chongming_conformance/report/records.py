"""The plain records a verdict is computed from: one per suite test, one per clause.

Nothing here knows pytest. The plugin's harvest turns pytest's reports into
:class:`TestResult` records and collects them in a :class:`SuiteRecords`; from
then on everything (outcomes, verdict, document) is a function of plain data,
so it can be unit-tested by building records by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypedDict

from ..protocol.clauses import Clause, Scope
from .schema import OPTIONAL_KEY, Enum, as_json

__all__ = [
    "DEVIATION",
    "FAIL",
    "NOT_VERIFIED",
    "OUTCOMES",
    "PARTIAL_BANNER",
    "PASS",
    "SETUP_PREFIX",
    "TEST_OUTCOMES",
    "UNSUPPORTED",
    "ClauseResult",
    "HypothesisInfo",
    "SuiteRecords",
    "TestResult",
]

PASS, FAIL, NOT_VERIFIED, UNSUPPORTED, DEVIATION = (
    "PASS",
    "FAIL",
    "NOT VERIFIED",
    "UNSUPPORTED",
    "DEVIATION",
)
#: Per-clause outcomes, in the order reports list them.
OUTCOMES = (PASS, FAIL, NOT_VERIFIED, UNSUPPORTED, DEVIATION)

#: Per-test outcomes (pytest's, with the strict-xpass case named).
TEST_OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "not run")

#: How a failed test's ``message`` starts when it failed before its body ran (opening the
#: store: the factory or the store's constructor raised). Such a failure proves nothing
#: about the clauses the test declares, unless a blame note says otherwise.
SETUP_PREFIX = "[setup] "

PARTIAL_BANNER = "partial — not a conformance claim"


class HypothesisInfo(TypedDict):
    """What a hypothesis failure printed that lets an author reproduce it."""

    seeds: list[str]
    falsifying_examples: list[str]
    notes: list[str]


@dataclass
class TestResult:
    """One suite test as it ran (``outcome`` is one of :data:`TEST_OUTCOMES`).

    Its fields are, in order, the keys of a test entry in the JSON report.
    """

    __test__ = False  # not a pytest test class, despite the name

    nodeid: str
    outcome: Annotated[str, Enum(TEST_OUTCOMES)] = "not run"
    duration_s: float = 0.0
    message: str | None = None
    hypothesis: HypothesisInfo | None = None
    #: Clauses a failure is blamed on (a ``chongming-blame:`` note); empty: all it declares.
    blames: tuple[str, ...] = ()
    #: For a generated check: examples tried (``examples``) and how many met each targeted
    #: input case (``chongming_conformance.checking.cases``); None for other tests.
    cases: Annotated[dict[str, int] | None, OPTIONAL_KEY] = None
    #: For a stress test that failed or injected faults: its run drawn as data
    #: (``stress.picture``, schema ``chongming-history``); None for other tests.
    history: Annotated[dict[str, Any] | None, OPTIONAL_KEY] = None
    #: For a fault run: what its faults exercised (``stress.fault_coverage``, schema
    #: ``chongming-fault-coverage``); None for other tests.
    coverage: Annotated[dict[str, Any] | None, OPTIONAL_KEY] = None
    #: Clauses the test declares that it passed without exercising enough to judge them,
    #: and why (a fault run short of a cell): NOT VERIFIED, never PASS; None: none.
    unproven: Annotated[dict[str, str] | None, OPTIONAL_KEY] = None

    @property
    def failed_in_setup(self) -> bool:
        """Failed before the test's body ran (see :data:`SETUP_PREFIX`)."""
        return self.outcome == "failed" and (self.message or "").startswith(SETUP_PREFIX)

    def to_json(self) -> dict[str, object]:
        encoded: dict[str, object] = as_json(self)
        return encoded


@dataclass
class ClauseResult:
    """One catalogue clause's outcome and the tests it was decided from."""

    clause: Clause
    outcome: str
    note: str | None = None
    tests: list[TestResult] = field(default_factory=list)
    #: Why the gate does not look at it in this run (a fault clause when faults were not
    #: requested); None: the gate looks at it unless it is a review clause.
    excluded: str | None = None

    @property
    def gated(self) -> bool:
        """Whether ``--chongming-gate`` looks at this clause (review clauses never, nor a
        clause this run left out)."""
        return self.clause.scope is not Scope.REVIEW and self.excluded is None

    @property
    def failing_tests(self) -> list[TestResult]:
        return [t for t in self.tests if t.outcome == "failed"]


@dataclass(frozen=True)
class SuiteRecords:
    """Everything one run of the suite produced, as plain data: the input of every verdict.

    ``tests`` and ``declared`` are keyed by node id in collection order; ``may_blame``
    maps a node id to the clauses its test may blame without declaring them
    (``clauses.may_blame``: a stress scenario and its after-scenario integrity check);
    ``narrowed`` holds the reasons collection steering found the suite cut down
    (explicit paths or node ids); ``deselected_by`` names the options that
    deselected ``deselected`` suite tests.
    """

    tests: Mapping[str, TestResult]
    declared: Mapping[str, tuple[str, ...]]
    narrowed: Sequence[str] = ()
    deselected: int = 0
    deselected_by: str = "a plugin"
    collection_errors: Sequence[str] = ()
    may_blame: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def result(self, nodeid: str) -> TestResult:
        """The record of a collected test; one that left none did not run."""
        return self.tests.get(nodeid) or TestResult(nodeid)
