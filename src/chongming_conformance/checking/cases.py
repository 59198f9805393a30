"""The input cases that matter, and how often a run met them.

A generated test is only as strong as the inputs it happens to draw. The bugs real
stores have hide in narrow cases: a ``limit`` below the match count with a filter
that excludes the first rows (a LIMIT applied before the WHERE), terminal tasks
whose ``updated_at`` order differs from their ``created_at`` order (a prune that
sorts by the wrong column), a claim inside a fractional lease past its whole
seconds (a whole-second TTL), a prefix holding a GLOB or regex metacharacter. The
strategies aim at those cases; this module names them, marks them as hypothesis
``event``\\ s when a check meets one, and counts them per check, so a run can show
-- and the kit's own tests can assert -- that each case really occurred.

* :func:`query_cases`, :func:`prune_cases`, :func:`claim_cases` say which cases
  an input is (pure functions of the input and what the store holds);
* :func:`mark` records them as events (inside a hypothesis test);
* :func:`counting` counts, per hypothesis test run, the examples that met each
  case (from the statistics hypothesis keeps anyway); :func:`take_counts` hands the
  counts of the last runs to the plugin, which puts them in the report
  (``tests[].cases``) and, with ``--chongming-cases``, in the terminal.

:data:`TARGETED` lists, per check, the cases the default (ci) profile must meet;
``tests/test_cases.py`` runs each check at that profile and asserts it.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from hypothesis import event
from hypothesis.statistics import collector

from ..oracle import instant, matches
from ..protocol.alphabet import METACHARACTERS
from ..protocol.model import TaskQuery, TaskSnapshot
from ..strategies.single_field import SAVED_FIELDS

__all__ = [
    "EXAMPLES",
    "PREFIX",
    "TARGETED",
    "claim_cases",
    "counting",
    "mark",
    "prune_cases",
    "query_cases",
    "take_counts",
]

#: How a case's event is spelled (hypothesis shows events under ``--hypothesis-show-
#: statistics`` too).
PREFIX = "chongming case: "
#: The count of examples a run tried, under this key in :func:`take_counts`' result.
EXAMPLES = "examples"

#: check (test method name) -> the cases the ci profile must meet in it.
TARGETED: dict[str, tuple[str, ...]] = {
    "test_query_matches_model": (
        "query: a filter matches a stored task",
        "query: limit below the match count",
        "query: a limit, and a non-matching task first in the order",
        "query: newest_first with a limit",
        "query: name_prefix with a LIKE metacharacter",
        "query: name_prefix with a GLOB metacharacter",
        "query: name_prefix with a regex metacharacter",
        "query: tag with a JSON-path metacharacter",
        "query: the empty string as a filter value",
    ),
    "test_single_field_save": tuple(f"save: one field changed: {f}" for f in SAVED_FIELDS),
    "test_prune_matches_model": (
        "prune: terminal tasks in another order by updated_at than by created_at",
        "prune: keep_terminal below the terminal count",
        "prune: a pruned id and a kept one a pattern, case or prefix confuses",
    ),
    "test_claim_matches_model": (
        "claim: fractional lease",
        "claim: again inside a fractional lease, past its whole seconds",
        "claim: again after a lease ended",
    ),
    "test_state_machine": (
        "query: a limit, and a non-matching task first in the order",
        "claim: fractional lease",
        "claim: again inside a fractional lease, past its whole seconds",
        *(f"save: one field changed: {f}" for f in SAVED_FIELDS),
    ),
}


def mark(cases: Iterable[str]) -> None:
    """Record each case as a hypothesis event (call it inside a hypothesis test)."""
    for case in dict.fromkeys(cases):
        event(PREFIX + case)


def _metacharacter_classes(text: str) -> list[str]:
    return [name for name, chars in METACHARACTERS.items() if any(c in text for c in chars)]


def query_cases(q: TaskQuery, tasks: Sequence[TaskSnapshot]) -> list[str]:
    """The cases ``q`` is, against ``tasks`` (what the store holds)."""
    out: list[str] = []
    hits = [t for t in tasks if matches(t, q)]
    filtered = any(getattr(q, f) is not None for f in
                   ("statuses", "name", "name_prefix", "tag", "buckets", "pipeline_run_id"))
    if filtered and hits:
        out.append("query: a filter matches a stored task")
    if q.limit is not None and 0 < q.limit < len(hits):
        out.append("query: limit below the match count")
    if q.limit is not None and hits and 0 < q.limit < len(tasks):
        # The bug this aims at: a LIMIT taken before the filter returns too few.
        ordered = sorted(tasks, key=lambda t: (instant(t.created_at), t.task_id),
                         reverse=q.newest_first)
        if any(not matches(t, q) for t in ordered[: q.limit]):
            out.append("query: a limit, and a non-matching task first in the order")
    if q.limit is not None and q.newest_first and hits:
        out.append("query: newest_first with a limit")
    if q.name_prefix is not None:
        for cls in _metacharacter_classes(q.name_prefix):
            if cls != "JSON path":
                out.append(f"query: name_prefix with a {cls} metacharacter")
    if q.tag is not None and "JSON path" in _metacharacter_classes(q.tag):
        out.append("query: tag with a JSON-path metacharacter")
    if "" in (q.name, q.tag, q.pipeline_run_id):
        # A filter tested by truthiness (``if q.tag:``) takes "" for "no filter".
        out.append("query: the empty string as a filter value")
    return out


def prune_cases(tasks: Sequence[TaskSnapshot], keep_terminal: int) -> list[str]:
    """The cases a prune of ``tasks`` with ``keep_terminal`` is."""
    terminal = [t for t in tasks if t.status.is_terminal]
    out: list[str] = []
    by_created = [t.task_id for t in sorted(terminal, key=lambda t: (t.created_at, t.task_id))]
    by_updated = [t.task_id for t in sorted(terminal, key=lambda t: (t.updated_at, t.task_id))]
    if len(terminal) > 1 and by_created != by_updated:
        out.append("prune: terminal tasks in another order by updated_at than by created_at")
    if 0 < keep_terminal < len(terminal):
        out.append("prune: keep_terminal below the terminal count")
    by_instant = sorted(terminal, key=lambda t: (instant(t.created_at), t.task_id))
    doomed = {t.task_id for t in by_instant[: max(len(terminal) - keep_terminal, 0)]}
    kept = [t.task_id for t in tasks if t.task_id not in doomed]
    if any(_confused(d, k) for d in doomed for k in kept):
        out.append("prune: a pruned id and a kept one a pattern, case or prefix confuses")
    return out


def _confused(target: str, other: str) -> bool:
    """Does a delete by ``target`` done wrong reach ``other``: ``LIKE target`` (wildcards,
    ASCII case folded), a prefix, trailing spaces ignored?"""
    like = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in target)
    return (re.fullmatch(like, other, re.IGNORECASE | re.DOTALL) is not None
            or other.startswith(target) or other.rstrip(" ") == target.rstrip(" "))


def claim_cases(
    lease_seconds: float, now: datetime, leases: Iterable[tuple[datetime, float]]
) -> list[str]:
    """The cases a claim at ``now`` is; ``leases`` holds (claimed at, lease_seconds) of the
    commands currently leased."""
    out: list[str] = []
    if lease_seconds != math.floor(lease_seconds):
        out.append("claim: fractional lease")
    for claimed_at, seconds in leases:
        elapsed = (now.astimezone(UTC) - claimed_at.astimezone(UTC)).total_seconds()
        if seconds != math.floor(seconds) and math.floor(seconds) <= elapsed < seconds:
            out.append("claim: again inside a fractional lease, past its whole seconds")
        if elapsed > seconds:
            out.append("claim: again after a lease ended")
    return out


#: check name -> Counter of case -> examples that met it (EXAMPLES: examples tried).
_COUNTS: dict[str, Counter[str]] = {}


@contextlib.contextmanager
def counting(check: str) -> Iterator[None]:
    """Count, for the hypothesis runs inside the block, the examples meeting each case.

    Read from the statistics hypothesis keeps anyway (``hypothesis.statistics.collector``,
    what ``--hypothesis-show-statistics`` prints): free, where an observability callback
    made the checks eight times slower.
    """
    counts = _COUNTS.setdefault(check, Counter())

    def note(stats: Mapping[str, Any]) -> None:
        for phase in stats.values():
            if not isinstance(phase, Mapping):
                continue
            for case in phase.get("test-cases", ()):
                if case.get("status") not in ("valid", "interesting"):
                    continue
                counts[EXAMPLES] += 1
                for name in dict.fromkeys(case.get("events", ())):
                    if isinstance(name, str) and name.startswith(PREFIX):
                        counts[name[len(PREFIX):]] += 1

    # hypothesis declares the variable as DynamicVariable(None); it holds a callback.
    with collector.with_value(note):  # type: ignore[arg-type]
        yield


def take_counts() -> dict[str, dict[str, int]]:
    """The counts gathered since the last call, per check (then forgotten)."""
    taken = {check: dict(c) for check, c in _COUNTS.items() if c}
    _COUNTS.clear()
    return taken
