"""``run_scenario``: one scenario against one shared store, anomalies returned, not raised."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..factory import enter_opener, picklability_problem
from .harness import Anomaly, Harness, Opener
from .hints import common_cause
from .scenarios import SCENARIOS
from .stress_profiles import StressProfile, get_profile

__all__ = ["IntegrityCheck", "ScenarioResult", "run_all", "run_scenario"]

#: Store-specific integrity hook: given the opener, return problems ('[]' if intact).
IntegrityCheck = Callable[[Opener], Sequence[str]]


@dataclass(slots=True)
class ScenarioResult:
    """What one scenario found. ``ok`` only when there is neither anomaly nor error.

    ``anomalies`` are broken guarantees seen in the logs; ``errors`` are runs
    that could not complete (stuck or crashed workers, a failing setup).
    """

    scenario: str
    clauses: tuple[str, ...]
    profile: str
    anomalies: list[Anomaly] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    ops: int = 0
    busy_seconds: float = 0.0
    wall_seconds: float = 0.0
    log_dir: str | None = None

    @property
    def ok(self) -> bool:
        return not self.anomalies and not self.errors

    @property
    def ops_per_second(self) -> float:
        return self.ops / self.busy_seconds if self.busy_seconds > 0 else 0.0

    def kinds(self) -> set[str]:
        return {a.kind for a in self.anomalies}

    @property
    def hint(self) -> str | None:
        """The one cause every anomaly shares, when they fit a known pattern (see ``hints``)."""
        return common_cause(self.anomalies)

    def report(self, limit: int = 8) -> str:
        """A readable summary: verdict, then errors, then the first anomalies per kind."""
        head = (f"stress scenario {self.scenario!r} ({', '.join(self.clauses)}), profile "
                f"{self.profile!r}: " + ("PASS" if self.ok else
                                         f"{len(self.anomalies)} anomalies, "
                                         f"{len(self.errors)} errors"))
        lines = [head]
        hint = self.hint
        if hint is not None:
            lines.append(f"  hint: {hint}")
        lines += [f"  ERROR {e}" for e in self.errors[:limit]]
        shown: dict[str, int] = {}
        for a in self.anomalies:
            shown[a.kind] = shown.get(a.kind, 0) + 1
            if shown[a.kind] <= limit:
                lines.append(f"  {a}")
        for kind, n in shown.items():
            if n > limit:
                lines.append(f"  ... {n - limit} more {kind!r} anomalies")
        if self.log_dir:
            lines.append(f"  worker logs kept in {self.log_dir}")
        return "\n".join(lines)


def _generic_integrity(h: Harness) -> None:
    """Whatever the backend: a fresh connection can read everything, and counts add up."""
    try:
        with h.store() as store:
            tasks = list(store.query())
            total = sum(store.counts().values())
            for snap in tasks[:500]:
                store.history(snap.task_id)
    except Exception as exc:
        h.anomaly("not-intact", f"a fresh connection cannot read the store back after the "
                  f"scenario: {type(exc).__name__}: {exc}")
        return
    if total != len(tasks):
        h.anomaly("not-intact", f"counts() adds up to {total} but query() returns "
                  f"{len(tasks)} tasks", counts=total, tasks=len(tasks))


def run_scenario(
    name: str,
    opener: Opener,
    profile: StressProfile | str | None = None,
    *,
    integrity: IntegrityCheck | None = None,
    keep_logs: bool | None = None,
) -> ScenarioResult:
    """Run scenario ``name`` against the shared store ``opener`` opens; never raises for a
    store's failure (it is in the result).

    The store location must be fresh (each scenario creates fixed ids).
    ``keep_logs``: True keeps the worker logs, False deletes them, None (default)
    keeps them only when the result is not ok.
    """
    if name not in SCENARIOS:
        raise ValueError(f"unknown stress scenario {name!r}; known: {', '.join(SCENARIOS)}")
    prof = get_profile(profile)
    scenario = SCENARIOS[name]
    result = ScenarioResult(name, scenario.clauses, prof.name)
    problem = picklability_problem(opener)
    if problem is not None:
        result.errors.append(problem)
        return result
    logdir = Path(tempfile.mkdtemp(prefix=f"chongming-stress-{name}-"))
    h = Harness(name, opener, prof, logdir)
    started = time.monotonic()
    try:
        scenario.run(h)
    except Exception as exc:
        h.errors.append(f"scenario {name!r} failed in the parent: {type(exc).__name__}: {exc}\n"
                        + traceback.format_exc(limit=6))
    if not h.errors:
        _generic_integrity(h)
        if integrity is not None:
            try:
                problems = list(integrity(opener))
            except Exception as exc:
                problems = [f"the integrity check raised {type(exc).__name__}: {exc}"]
            for p in problems:
                h.anomaly("integrity", f"store-specific integrity check: {p}")
    result.anomalies, result.errors = h.anomalies, h.errors
    result.ops, result.busy_seconds = h.ops, h.busy
    result.wall_seconds = time.monotonic() - started
    if keep_logs or (keep_logs is None and not result.ok):
        result.log_dir = str(logdir)
    else:
        shutil.rmtree(logdir, ignore_errors=True)
    return result


def run_all(
    make_shared_store: Callable[[], Any],
    profile: StressProfile | str | None = None,
    *,
    scenarios: Sequence[str] | None = None,
    integrity: IntegrityCheck | None = None,
    keep_logs: bool | None = None,
) -> list[ScenarioResult]:
    """Every scenario (or ``scenarios``), each on a fresh location from ``make_shared_store``.

    A factory that fails to set up is reported as that scenario's error, not raised.
    """
    results = []
    for name in scenarios if scenarios is not None else list(SCENARIOS):
        with contextlib.ExitStack() as stack:
            try:
                opener = enter_opener(make_shared_store, stack)
            except Exception as exc:
                failed = ScenarioResult(name, SCENARIOS[name].clauses,
                                        get_profile(profile).name)
                failed.errors.append(f"make_shared_store() failed: {type(exc).__name__}: {exc}")
                results.append(failed)
                continue
            results.append(run_scenario(name, opener, profile, integrity=integrity,
                                        keep_logs=keep_logs))
    return results
