"""A stress run's history as data a picture can be drawn from (the HTML report's timeline).

The text timeline (``stress.timeline``) quotes a few dozen calls around each anomaly;
a person looking for a race would rather see the whole run: one lane per worker, each
call a bar from invoke to return, the failing core marked, the faults shaded. This
module turns a finished run -- its workers' logs, the nemesis log and the anomalies'
cited calls -- into one plain, JSON-ready dict (schema ``chongming-history`` v1, keys
below) that travels with the test's record into the report document, where
``report.html`` draws it. It never looks at pytest or at HTML.

Keys: ``scenario``, ``clause``, ``profile``, ``seed``, ``verdict``, ``duration_s``,
``lanes`` (worker labels), ``kinds`` (method names), ``calls`` (``[lane, seq, kind, t0,
t1 | None, outcome, detail]``, times in seconds since the first invoke, outcome one of
:data:`OUTCOMES`, detail an index into ``details`` or -1), ``details`` (``[call text,
result text]``), ``anomalies`` (``kind``, ``clause``, ``message``, ``core`` and
``context`` as call indexes, ``stuck``), ``faults`` (``label``, ``what``, ``detail``,
``start``, ``end``), ``thinned`` (what was left out, or None) and ``text`` (the text
timeline: the picture's text alternative).

**Size.** A quick mixed workload logs ~1,500 calls, a thorough fault run tens of
thousands. Every call keeps its bar (its lane, kind, times and outcome: ~40 bytes);
its text -- the call with its arguments and its result, a few hundred bytes -- is kept
for the calls an anomaly cites or names as context, and for the calls nearest them in
time, up to :data:`DETAIL_LIMIT` calls in all; the
others keep only their method name, and ``thinned`` says so. A 10,000-call history
stays around 1 MB of JSON.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .timeline import NEMESIS, Entry, origin_of, run_entries

if TYPE_CHECKING:
    from .harness import Harness

__all__ = [
    "DETAIL_LIMIT",
    "OUTCOMES",
    "SCHEMA",
    "history_picture",
    "keep_picture",
    "picture_of_entries",
    "take_pictures",
]

SCHEMA = "chongming-history"
#: What a bar's colour says: returned normally, lost an optimistic-concurrency race,
#: raised anything else (an unknown effect), never returned (killed, or still running).
OUTCOMES = ("ok", "conflict", "raised", "crashed")
#: At most this many calls keep their full text (the rest keep their method name).
DETAIL_LIMIT = 3000
#: Texts longer than this are cut (the kept logs have every byte).
TEXT_LIMIT = 600


def _outcome(entry: Entry) -> str:
    if entry.t_return is None or entry.outcome == "pending":
        return "crashed"
    if entry.outcome == "ok":
        return "ok"
    if entry.outcome.startswith("ConcurrencyConflict"):
        return "conflict"
    return "raised"


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[:TEXT_LIMIT] + "…"


def _method(entry: Entry) -> str:
    return entry.call.split("(", 1)[0] or entry.call


def _round(t: float) -> float:
    return round(t, 5)


def picture_of_entries(
    entries: Sequence[Entry],
    anomalies: Iterable[tuple[str, str | None, str, Sequence[int], Sequence[int], str | None]],
    *,
    scenario: str,
    clause: str,
    profile: str,
    seed: int | None,
    verdict: str,
    text: str = "",
) -> dict[str, Any]:
    """The picture of a run's ``entries`` (``timeline.run_entries``: calls and faults).

    ``anomalies``: ``(kind, clause, message, core refs, context refs, stuck)`` where the
    refs are the ``Entry.ref`` of the calls (``id()`` of their logged ``Op``).
    """
    calls = [e for e in entries if e.worker != NEMESIS]
    faults = [e for e in entries if e.worker == NEMESIS]
    zero = origin_of(calls) if calls else origin_of(entries)
    lanes = sorted({e.worker for e in calls}, key=_lane_key)
    lane_of = {w: i for i, w in enumerate(lanes)}
    kinds: list[str] = []
    kind_of: dict[str, int] = {}
    index_of: dict[int, int] = {}
    rows: list[list[Any]] = []
    for i, e in enumerate(calls):
        m = _method(e)
        if m not in kind_of:
            kind_of[m] = len(kinds)
            kinds.append(m)
        index_of[e.ref] = i
        rows.append([lane_of[e.worker], e.seq, kind_of[m], _round(e.t_invoke - zero),
                     None if e.t_return is None else _round(e.t_return - zero), _outcome(e), -1])
    shown: list[dict[str, Any]] = []
    marked: list[int] = []
    for kind, against, message, core, context, stuck in anomalies:
        core_ix = sorted(index_of[r] for r in core if r in index_of)
        context_ix = sorted(index_of[r] for r in context if r in index_of)
        marked += core_ix + context_ix
        shown.append({"kind": kind, "clause": against or clause, "message": message,
                      "core": core_ix, "context": context_ix, "stuck": stuck})
    detailed = _detailed(calls, marked, zero)
    details: list[list[str]] = []
    for i in detailed:
        e = calls[i]
        rows[i][6] = len(details)
        result = e.outcome if e.result is None else f"{e.outcome} {e.result}"
        details.append([_cut(e.call), _cut(result)])
    end = max([*(r[4] for r in rows if r[4] is not None), *(r[3] for r in rows), 0.0])
    thinned = None
    if len(detailed) < len(calls):
        thinned = (f"{len(calls) - len(detailed):,} of {len(calls):,} calls keep only their "
                   "method and times (their arguments and results are in the kept worker "
                   "logs); the cited calls and every call near them keep their text.")
    return {
        "schema": SCHEMA,
        "scenario": scenario,
        "clause": clause,
        "profile": profile,
        "seed": seed,
        "verdict": verdict,
        "duration_s": _round(end),
        "lanes": lanes,
        "kinds": kinds,
        "calls": rows,
        "details": details,
        "anomalies": shown,
        "faults": [{"label": f"nemesis #{f.seq}", "what": f.call, "detail": f.outcome,
                    "start": _round(f.t_invoke - zero),
                    "end": _round((f.t_return if f.t_return is not None else f.t_invoke) - zero)}
                   for f in faults],
        "thinned": thinned,
        "text": text,
    }


def _lane_key(worker: str) -> tuple[str, int]:
    """``w2`` before ``w10``; ``g1.w0`` groups kept together."""
    head, _, tail = worker.rpartition("w")
    return (head, int(tail) if tail.isdigit() else 0)


def _detailed(calls: Sequence[Entry], marked: Sequence[int], zero: float) -> list[int]:
    """Which calls keep their text: every call when they fit, else the marked ones and
    the calls nearest them in time, up to :data:`DETAIL_LIMIT` (the text timeline quotes
    the same neighbourhood, a few dozen calls; the picture shows a hundred times more)."""
    if len(calls) <= DETAIL_LIMIT:
        return list(range(len(calls)))
    keep = dict.fromkeys(i for i in marked if 0 <= i < len(calls))
    if not keep:  # nothing cited: the run's start (a failure before any call, a PASS)
        return list(range(DETAIL_LIMIT))
    centres = sorted(calls[i].t_invoke for i in keep)
    # Nearest first: each call's distance to the closest cited call.
    def distance(i: int) -> float:
        t = calls[i].t_invoke
        k = bisect.bisect_left(centres, t)
        near = [abs(t - centres[j]) for j in (k - 1, k) if 0 <= j < len(centres)]
        return min(near)

    window = sorted((i for i in range(len(calls)) if i not in keep), key=distance)
    for i in window[:max(DETAIL_LIMIT - len(keep), 0)]:
        keep[i] = None
    return sorted(keep)


def history_picture(h: Harness, *, clause: str, verdict: str) -> dict[str, Any]:
    """The picture of a finished run on harness ``h`` (its logs must still be on disk)."""
    entries = run_entries(h.named_groups(), h.logdir)
    anomalies = []
    for a in h.anomalies:
        stuck = a.evidence.get("stuck")
        anomalies.append((a.kind, a.clause, a.message, [id(o) for o in a.cites],
                          [id(o) for o in a.context], None if stuck is None else str(stuck)))
    text = "\n\n".join(a.block() for a in h.anomalies[:3])
    return picture_of_entries(entries, anomalies, scenario=h.scenario, clause=clause,
                              profile=h.profile.name, seed=h.profile.seed, verdict=verdict,
                              text=text)


#: Pictures of the runs of the test running now, until the plugin takes them (a test's
#: report carries them across processes, as ``cases.take_counts`` does for input cases).
_KEPT: list[dict[str, Any]] = []


def keep_picture(picture: dict[str, Any]) -> None:
    """Hold ``picture`` for the report of the test running now (``take_pictures``)."""
    _KEPT.append(picture)


def take_pictures() -> list[dict[str, Any]]:
    """The pictures kept since the last call, oldest first; forgets them."""
    taken = list(_KEPT)
    _KEPT.clear()
    return taken
