"""``run_scenario``: one scenario against one shared store, anomalies returned, not raised."""

from __future__ import annotations

import contextlib
import functools
import shutil
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..faults.network import NETWORK_KEYWORD, Network, takes_network
from ..report.coverage import render_coverage_text
from ..report.masking import mask_secrets
from ..seam.factory import enter_opener, picklability_problem
from .harness import Anomaly, Harness, Opener
from .hints import common_cause
from .picture import history_picture
from .scenarios import SCENARIOS
from .stress_profiles import StressProfile, get_profile

__all__ = ["IntegrityCheck", "ScenarioResult", "open_location", "run_all", "run_scenario",
           "selected"]

#: Store-specific integrity hook: given the opener, return problems ('[]' if intact).
IntegrityCheck = Callable[[Opener], Sequence[str]]


#: Characters a report may take: pytest keeps the last 6000 of a failure's text (and
#: prefixes each line), so a longer report would lose its head mid-line.
REPORT_CHARS = 4500


@dataclass(slots=True)
class ScenarioResult:
    """What one scenario found. ``ok`` (PASS) only when there is no anomaly, no error and
    nothing left unverified; ``errored`` (ERROR) when its set-up failed.

    ``anomalies`` are broken guarantees seen in the logs; ``errors`` are runs
    that could not complete (stuck or crashed workers, a failing setup);
    ``unverified`` says why a verdict could not be reached (the linearizability
    checker ran out of its budget): with no anomaly and no error, the scenario is
    then NOT VERIFIED -- neither PASS nor FAIL. ``setup_failed``: the fresh location
    could not be set up (``make_shared_store()`` raised), so nothing ran -- an error of
    the run, not evidence against the store, as pytest says ERROR, not FAILED.
    """

    scenario: str
    clauses: tuple[str, ...]
    profile: str
    anomalies: list[Anomaly] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)
    ops: int = 0
    busy_seconds: float = 0.0
    wall_seconds: float = 0.0
    log_dir: str | None = None
    #: Why no worker logs are kept, when ``log_dir`` is None.
    logs_note: str | None = None
    #: Numbers the scenario reported about itself (``Harness.stats``).
    stats: dict[str, Any] = field(default_factory=dict)
    #: What the run covered beyond the profile (a fault run's seed, faults and network).
    coverage: list[str] = field(default_factory=list)
    #: The run drawn (``stress.picture``) when it failed or injected faults; else None.
    picture: dict[str, Any] | None = field(default=None, repr=False)
    #: Clauses this run could not judge, and why (a fault run short of the coverage a
    #: clause needs, ``stress.fault_coverage``): NOT VERIFIED while the others are judged.
    unproven: dict[str, str] = field(default_factory=dict)
    #: A fault run's coverage matrix (``stress.fault_coverage.matrix``); else None.
    fault_coverage: dict[str, Any] | None = field(default=None, repr=False)
    #: The set-up failed before any worker ran (its errors say how): ERROR, not FAIL.
    setup_failed: bool = False

    @property
    def errored(self) -> bool:
        """ERROR: the set-up failed, so the scenario never ran (the run is incomplete)."""
        return self.setup_failed

    @property
    def failed(self) -> bool:
        """FAIL: an anomaly or an error of a scenario that ran (whatever else is
        unverified); a failed set-up is ``errored`` instead."""
        return bool(self.anomalies or self.errors) and not self.errored

    @property
    def ok(self) -> bool:
        """PASS: nothing failed and the verdict was reached on every clause."""
        return (not self.failed and not self.errored and not self.unverified
                and not self.unproven)

    @property
    def verdict(self) -> str:
        return ("ERROR" if self.errored else "FAIL" if self.failed
                else "NOT VERIFIED" if self.unverified or self.unproven else "PASS")

    @property
    def ops_per_second(self) -> float:
        return self.ops / self.busy_seconds if self.busy_seconds > 0 else 0.0

    def kinds(self) -> set[str]:
        return {a.kind for a in self.anomalies}

    def blamed(self) -> list[str]:
        """The clauses the anomalies are evidence against (each anomaly's own, else the
        scenario's first); empty when an error, not an anomaly, failed the run -- an error
        says the run could not judge, not which clause broke."""
        if self.errors or not self.anomalies:
            return []
        return sorted({a.clause or self.clauses[0] for a in self.anomalies})

    @property
    def hint(self) -> str | None:
        """The one cause every anomaly shares, when they fit a known pattern (see ``hints``)."""
        return common_cause(self.anomalies)

    def report(self, limit: int = 8, chars: int = REPORT_CHARS) -> str:
        """A readable summary: verdict, where the worker logs are, then errors, then the
        anomalies (the first ``limit`` per kind, each with its slice of the timeline).

        At most ``chars`` characters: whole blocks (an error, an anomaly) are left out from
        the end when they do not fit, and the report says how many; a block is never cut
        in the middle of a line.
        """
        counts = ("ERROR (the set-up failed, nothing ran: not evidence against the store)"
                  if self.errored
                  else f"{len(self.anomalies)} anomalies, {len(self.errors)} errors"
                  if self.failed else "NOT VERIFIED" if self.unverified or self.unproven
                  else "PASS")
        head = [f"stress scenario {self.scenario!r} ({', '.join(self.clauses)}), profile "
                f"{self.profile!r}: {counts}"]
        hint = self.hint
        if hint is not None:
            head.append(f"  hint: {hint}")
        head += [f"  covered: {line}" for line in self.coverage]
        if self.log_dir:
            head.append(f"  worker logs kept in {self.log_dir} (python -m "
                        "chongming_conformance.stress timeline|lincheck LOGDIR)")
        elif not self.ok:
            head.append(f"  worker logs: {self.logs_note or 'none kept'}")
        if self.fault_coverage is not None:
            head += [f"  {line}" for line in render_coverage_text(self.fault_coverage)]
        blocks = [f"  NOT VERIFIED: {u}" for u in self.unverified]
        blocks += [f"  NOT VERIFIED {c}: {why}" for c, why in self.unproven.items()]
        blocks += [f"  ERROR {e}" for e in self.errors[:limit]]
        shown: dict[str, int] = {}
        for a in self.anomalies:
            shown[a.kind] = shown.get(a.kind, 0) + 1
            if shown[a.kind] <= limit:
                blocks.append("  " + a.block().replace("\n", "\n  "))
        tail = [f"  ... {n - limit} more {kind!r} anomalies" for kind, n in shown.items()
                if n > limit]
        return _fit(head, blocks, tail, chars)


def _fit(head: list[str], blocks: list[str], tail: list[str], chars: int) -> str:
    """``head``, as many ``blocks`` as fit in ``chars`` (a first block that does not fit
    keeps its first whole lines), then ``tail``."""
    # Room kept for the two lines that say what was left out.
    used = sum(len(x) + 1 for x in head + tail) + 200
    out = list(head)
    left = 0
    for k, block in enumerate(blocks):
        if used + len(block) + 1 <= chars:
            out.append(block)
            used += len(block) + 1
            continue
        if k == 0:
            lines = block.splitlines()
            kept: list[str] = []
            for line in lines:
                if used + len(line) + 1 > chars:
                    break
                kept.append(line)
                used += len(line) + 1
            out.append("\n".join([*kept, f"    ... {len(lines) - len(kept)} more lines"]))
            left = len(blocks) - 1
        else:
            left = len(blocks) - k
        break
    if left:
        out.append(f"  ... {left} more block(s) not shown (the report is kept short; every "
                   "call is in the worker logs)")
    return "\n".join(out + tail)


#: What the after-scenario integrity check reports, and the clause each finding is against:
#: never the scenario's own. The check judges the state the scenario left, not the guarantee
#: the scenario tests, so a store whose counts drift fails COUNTS-PER-STATUS once per run
#: of any scenario, not every scenario's clause beside it.
INTEGRITY = "after-scenario integrity check"
#: counts() disagrees with the tasks the store's own reads return.
COUNTS_CLAUSE = "COUNTS-PER-STATUS"
#: A fresh instance cannot read back (or the store's own check finds broken) what the
#: other processes left: a half-written state (docs/backend-guide.md §8), the clause of
#: the shared_visibility scenario (XP-SHARED-VISIBILITY; each XP id is written once).
UNREADABLE_CLAUSE = SCENARIOS["shared_visibility"].clause
#: Every clause the check may blame: each scenario's test carries them with
#: ``clauses.may_blame`` (stress.contract), so the report FAILs them on a finding.
INTEGRITY_CLAUSES = (COUNTS_CLAUSE, UNREADABLE_CLAUSE)
#: Tasks whose history a fresh connection reads back (a bound on the reads).
HISTORY_READS = 500


def _tally(tasks: Sequence[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in tasks:
        out[t.status.value] = out.get(t.status.value, 0) + 1
    return out


def _generic_integrity(h: Harness) -> None:
    """Whatever the backend: a fresh connection can read everything, and counts() agrees,
    status by status, with the tasks query() returns.

    Each finding names its own clause (``INTEGRITY``, ``COUNTS_CLAUSE``,
    ``UNREADABLE_CLAUSE``), never the scenario's: the scenario's verdict is about its
    guarantee, this check about the state any scenario leaves.

    Interleaving assumption: none -- it runs after every worker has exited (or been
    killed), so nothing writes while it reads, and counts() must then equal the tasks
    query() returns, in every status.
    """
    try:
        with h.store() as store:
            tasks = list(store.query())
            counts = {s.value: n for s, n in store.counts().items()}
            for snap in tasks[:HISTORY_READS]:
                store.history(snap.task_id)
    except Exception as exc:
        h.anomaly("not-intact", f"{INTEGRITY}: a fresh connection cannot read the store back "
                  f"after every worker exited: {type(exc).__name__}: {exc}",
                  clause=UNREADABLE_CLAUSE)
        return
    tally = _tally(tasks)
    differ = {s: (counts.get(s, 0), tally.get(s, 0)) for s in sorted(set(counts) | set(tally))
              if counts.get(s, 0) != tally.get(s, 0)}
    if differ:
        shown = ", ".join(f"{s}: counts() {c}, query() {q}" for s, (c, q) in differ.items())
        h.anomaly("not-intact", f"{INTEGRITY}: after every worker exited, counts() disagrees "
                  f"with the {len(tasks)} tasks query() returns ({shown}); counts() must map "
                  "each status to the number of tasks in it",
                  clause=COUNTS_CLAUSE, counts=counts, query=tally)


def run_scenario(
    name: str,
    opener: Opener,
    profile: StressProfile | str | None = None,
    *,
    integrity: IntegrityCheck | None = None,
    keep_logs: bool | None = None,
    network: Any = None,
    network_absent: str | None = None,
    deployment: Any = None,
) -> ScenarioResult:
    """Run scenario ``name`` against the shared store ``opener`` opens; never raises for a
    store's failure (it is in the result).

    The store location must be fresh (each scenario creates fixed ids).
    ``keep_logs``: True keeps the worker logs, False deletes them, None (default)
    keeps them only when the result is not ok. ``network``: the seam the opener's
    connections were routed through (``faults.Network``; see :func:`open_location`),
    ``network_absent``: why the store has none, when it declares so; ``deployment``: the
    store's own topology and fault actions (``faults.Deployment``), if it describes them.
    """
    if name not in SCENARIOS:
        raise ValueError(f"unknown stress scenario {name!r}; known: {', '.join(SCENARIOS)}")
    prof = get_profile(profile)
    scenario = SCENARIOS[name]
    result = ScenarioResult(name, scenario.clauses, prof.name)
    problem = picklability_problem(opener)
    if problem is not None:
        result.errors.append(problem)
        result.logs_note = "none (no worker ran)"
        return result
    logdir = Path(tempfile.mkdtemp(prefix=f"chongming-stress-{name}-"))
    # A fault run waits out blackholes and pauses, and a recovery window: twice the time.
    h = Harness(name, opener, prof, logdir, network=network, network_absent=network_absent,
                deadline=prof.deadline * 2 if scenario.faults else None, deployment=deployment)
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
                h.anomaly("integrity", f"{INTEGRITY} (the store's own): {p}",
                          clause=UNREADABLE_CLAUSE)
    try:
        h.quote_timelines()
    except Exception as exc:  # the evidence must never hide the verdict
        h.errors.append(f"quoting the timeline failed: {type(exc).__name__}: {exc}")
    result.anomalies, result.errors, result.unverified = h.anomalies, h.errors, h.unverified
    result.unproven, result.fault_coverage = dict(h.unproven), h.fault_coverage
    result.ops, result.busy_seconds, result.stats = h.ops, h.busy, h.stats
    result.coverage = h.coverage
    result.wall_seconds = time.monotonic() - started
    if not result.ok or scenario.faults:
        try:  # drawn in the HTML report; a run that passed without faults has nothing to see
            result.picture = history_picture(h, clause=scenario.clause, verdict=result.verdict)
        except Exception as exc:  # the evidence must never hide the verdict
            result.stats["picture_error"] = f"{type(exc).__name__}: {exc}"
    if keep_logs or (keep_logs is None and not result.ok):
        result.log_dir = str(logdir)
    else:
        shutil.rmtree(logdir, ignore_errors=True)
        result.logs_note = "deleted (keep_logs=False)"
    return result


def open_location(
    make_shared_store: Callable[..., Any],
    scenario: str,
    profile: StressProfile,
    stack: contextlib.ExitStack,
    *,
    origin: str = "make_shared_store()",
    takes: bool | None = None,
) -> tuple[Opener, Any]:
    """Set up a fresh shared location for ``scenario``: the opener, and the network seam its
    connections go through (None when the scenario injects no network fault, faults are
    not requested, or the factory takes no ``network`` keyword; ``takes`` says whether it
    does when its signature cannot tell, as for a wrapper).

    The network is entered on ``stack`` before the factory, so it outlives the factory's
    teardown; it is healthy while the factory sets up and tears down (the nemesis heals
    everything before a scenario returns).
    """
    network = None
    factory = make_shared_store
    if takes is None:
        takes = takes_network(factory)
    routed = SCENARIOS[scenario].faults or SCENARIOS[scenario].aims
    if routed and profile.faults == "network" and takes:
        network = stack.enter_context(Network(profile.seed))
        factory = functools.partial(make_shared_store, **{NETWORK_KEYWORD: network})
    return enter_opener(factory, stack, origin=origin), network


def selected(profile: StressProfile, scenarios: Sequence[str] | None = None) -> list[str]:
    """The scenarios a run takes: ``scenarios``, or every registered one -- a fault run only
    when faults are requested (``profile.faults``)."""
    if scenarios is not None:
        return list(scenarios)
    return [n for n, s in SCENARIOS.items() if not s.faults or profile.faults != "none"]


def run_all(
    make_shared_store: Callable[..., Any],
    profile: StressProfile | str | None = None,
    *,
    scenarios: Sequence[str] | None = None,
    integrity: IntegrityCheck | None = None,
    keep_logs: bool | None = None,
    network_absent: str | None = None,
    deployment: Any = None,
) -> list[ScenarioResult]:
    """Every scenario (or ``scenarios``), each on a fresh location from ``make_shared_store``.

    Never raises for the store: a factory that fails to set up is that scenario's ERROR
    (``setup_failed``: nothing ran, so nothing was judged); one that fails to tear down
    is that scenario's error (a fault during teardown included).
    """
    prof = get_profile(profile)
    results = []
    for name in selected(prof, scenarios):
        stack = contextlib.ExitStack()
        try:
            opener, network = open_location(make_shared_store, name, prof, stack)
        except Exception as exc:
            failed = ScenarioResult(name, SCENARIOS[name].clauses, prof.name,
                                    setup_failed=True, logs_note="none (no worker ran)")
            failed.errors.append(mask_secrets(f"make_shared_store() failed: {_described(exc)}"))
            failed.errors += _close(stack)
            results.append(failed)
            continue
        result = run_scenario(name, opener, prof, integrity=integrity, keep_logs=keep_logs,
                              network=network, network_absent=network_absent,
                              deployment=deployment)
        result.errors += _close(stack)
        results.append(result)
    return results


def _close(stack: contextlib.ExitStack) -> list[str]:
    """Tear the location down; a failure is that run's error, never the caller's crash."""
    try:
        stack.close()
    except Exception as exc:
        return [mask_secrets(f"make_shared_store()'s teardown failed: {_described(exc)}")]
    return []


def _described(exc: BaseException) -> str:
    """``Type: message``, then the notes the error carries, one a line: a factory says
    there what it could not clean up (the reference stores: "and dropping what the failed
    set-up left failed too: ..., the database '...' may be left behind: drop it with ...")."""
    notes = [n for n in getattr(exc, "__notes__", ()) if isinstance(n, str)]
    return f"{type(exc).__name__}: {exc}" + "".join(f"\n  {n}" for n in notes)
