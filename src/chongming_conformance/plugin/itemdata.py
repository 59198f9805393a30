"""What a suite test carries with it across processes: its serial node id and its clauses.

Under pytest-xdist the controller sees only test reports. Two facts make those
reports mean the same as a serial run's:

* :func:`serial_nodeid` -- xdist's ``--dist loadgroup`` appends ``@group`` to the
  node ids of grouped tests (the stress scenarios, see :mod:`.distribution`);
  the report uses the node id a serial run would show;
* :func:`clause_properties` -- each suite test's clauses as ``user_properties``,
  which travel with every report to the controller and which pytest's JUnit XML
  writes as ``<property>`` elements, so CI test views show them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..clauses import CLAUSES

__all__ = ["CLAUSE_PROPERTY", "STRESS_GROUP", "clause_properties", "serial_nodeid"]

#: The xdist group every cross-process (stress) test is put in.
STRESS_GROUP = "chongming-stress"
#: ``user_properties`` name of one clause a suite test checks; the value is ``ID [LEVEL]``.
CLAUSE_PROPERTY = "chongming_clause"


def serial_nodeid(nodeid: str) -> str:
    """The node id a serial run gives the test (xdist's ``@chongming-stress`` suffix removed)."""
    return nodeid.removesuffix("@" + STRESS_GROUP)


def clause_properties(cids: Sequence[str]) -> list[tuple[str, object]]:
    """One ``(CLAUSE_PROPERTY, "ID [LEVEL]")`` pair per clause, for ``user_properties``."""
    return [(CLAUSE_PROPERTY, f"{cid} [{CLAUSES[cid].level.value}]") for cid in cids]
