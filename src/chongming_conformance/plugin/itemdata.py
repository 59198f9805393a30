"""What the controller process can tell about a suite test from its node id and report.

Under pytest-xdist the controller sees only node ids and test reports:

* :func:`is_stress_nodeid` -- the packaged stress scenarios, recognised by
  their file, so they can be scheduled together and announced
  (:mod:`.distribution`, :mod:`.progress`);
* :func:`dispatch_rank` -- which suite tests are long (the stress scenarios,
  the state machine, the property checks), so xdist hands them out first
  (:mod:`.distribution`);
* :func:`serial_nodeid` -- xdist's ``xdist_group`` mark appends ``@group`` to a
  node id on pytest < 9 (a user's own mark on a suite test, say); the report
  uses the node id a serial run would show;
* :func:`clause_properties` -- each suite test's clauses as ``user_properties``,
  which travel with every report to the controller and which pytest's JUnit XML
  writes as ``<property>`` elements, so CI test views show them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..protocol.clauses import CLAUSES

__all__ = [
    "CLAUSE_PROPERTY",
    "SHORT_RANK",
    "STRESS_GROUP",
    "clause_properties",
    "dispatch_rank",
    "is_stress_nodeid",
    "serial_nodeid",
]

#: The scheduling group every packaged stress scenario is put in.
STRESS_GROUP = "chongming-stress"
_STRESS_FILE = "suite/test_stress.py::"
#: ``user_properties`` name of one clause a suite test checks; the value is ``ID [LEVEL]``.
CLAUSE_PROPERTY = "chongming_clause"


def is_stress_nodeid(nodeid: str) -> bool:
    """Whether the test is one of the packaged suite's stress scenarios."""
    return _STRESS_FILE in nodeid


def is_fault_nodeid(nodeid: str) -> bool:
    """Whether the test is the fault run (it runs only with ``--chongming-faults``)."""
    return is_stress_nodeid(nodeid) and "::test_xp_fault_" in nodeid


#: The suite's long tests by file, longest kind first: the stress scenarios (one group,
#: seconds each on a server), the state machine (the longest single test: 11-25 s), the
#: hypothesis properties (2-10 s each). Everything else takes milliseconds.
_LONG_FILES = ("suite/test_stress.py::", "suite/test_stateful.py::", "suite/test_properties.py::")
#: :func:`dispatch_rank` of every other test (the suite's millisecond checks, a user's own).
SHORT_RANK = len(_LONG_FILES)


def dispatch_rank(nodeid: str) -> int:
    """Where the test goes in xdist's queue: 0, 1, 2 for the long kinds, SHORT_RANK else.

    Handing the long tests out first and the millisecond ones last lets the workers end
    together: with the long ones last (their place in collection order), a worker took
    the state machine with a property check queued behind it while the other sat idle.
    """
    if nodeid == STRESS_GROUP:
        return 0
    for rank, marker in enumerate(_LONG_FILES):
        if marker in nodeid:
            return rank
    return SHORT_RANK


def serial_nodeid(nodeid: str) -> str:
    """The node id a serial run gives the test (an xdist ``@group`` suffix removed)."""
    head, sep, group = nodeid.rpartition("@")
    return head if sep and "]" not in group and "::" not in group else nodeid


def clause_properties(cids: Sequence[str]) -> list[tuple[str, object]]:
    """One ``(CLAUSE_PROPERTY, "ID [LEVEL]")`` pair per clause, for ``user_properties``."""
    return [(CLAUSE_PROPERTY, f"{cid} [{CLAUSES[cid].level.value}]") for cid in cids]
