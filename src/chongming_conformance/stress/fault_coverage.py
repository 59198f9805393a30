"""What a fault run exercised, and whether that was enough to judge each fault clause.

A fault clause PASSes only where the run exercised what it is about. The nemesis aims
its faults (``faults.plan``, ``faults.aim``); this module says what it must aim at -- the
*cells* of each clause, a fault kind at a kind of call, with a minimum and the reason for
it (:data:`REQUIRED`) -- and, after the run, counts what landed where and how each call
it landed in ended (the coverage *matrix*): a clause whose cells are all met may PASS; a
clause with a short cell is NOT VERIFIED, with a note naming the cells short and by how
much. A PASS never stands for a run that did not exercise it.

The minimums and why:

* **a lost reply after the commit, three times per write kind** (XP-FAULT-SAFETY). The
  commit ran, the client only sees its connection die: the unknown effect that a store
  most often takes for a known one -- a save retried into a conflict, an insert "resolved"
  by reading the id back, a claim whose commands are leased to nobody. Each kind of write
  has its own code path, so each gets its own cell; three landings per kind leave room
  for landings where a mistake cannot show (a retried save whose task nobody reads
  again).
* **a lost request, twice per kind of call** (XP-FAULT-SAFETY): the request never reached
  the server, so a call that answers must answer truthfully -- a claim that returns
  ``[]``, a write that says done; twice, because the read that would show the untruth
  may meet a fault of its own (an unknown effect explains anything). Three times for each
  kind of call whose effect a store most often assumes (``faults.plan.QUALIFIERS``): an
  insert of an id that exists (a store that "resolves" a lost reply by reading the id
  back answers "inserted" for a duplicate), a complete or release of a held command (one
  that swallows the error says "done" for a command still held);
* **a lost reply after a claim of every claimable command**, twice (XP-FAULT-SAFETY):
  the check phase's claim, which leases whatever is claimable -- its lost reply leaves
  commands leased to nobody, which a store that answers ``[]`` on an error hides.
* **a pause inside a write** (XP-FAULT-SAFETY): a holder stopped between its requests,
  row locks held, while the others go on (once under network faults; three times when
  pauses are the only faults a store can get).
* **a blackhole during a read, once** (XP-FAULT-NO-HANG): the request vanishes and no
  reply ever comes; only a client-side timeout ends the call.
* **a broken connection, once** (XP-FAULT-RECOVERY): a lost reply, a lost request or a
  reset -- something a pool must find out and replace.

Counted are the aimed faults (the proxy saw the very call, ``faults.aim``), pauses (the
call board shows the paused worker's call) and blackholes on a connection with a request
in flight; a reset, a cut or a lost reply at a random instant is shown in the matrix but
counts for no cell: it may have landed between calls.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..faults.applied import Applied
from ..faults.plan import READS, WRITES, Cell
from .log import Logs

__all__ = [
    "EFFECT_ASSUMED",
    "MATRIX_SCHEMA",
    "NO_HANG",
    "RECOVERY",
    "REQUIRED",
    "SAFETY",
    "cells_for",
    "matrix",
    "unproven",
]

SAFETY, RECOVERY, NO_HANG = "XP-FAULT-SAFETY", "XP-FAULT-RECOVERY", "XP-FAULT-NO-HANG"
#: The kinds of call whose effect a store most often assumes after an error (the mixed
#: workload qualifies its calls so: ``stress/scenarios/_mix_calls.py``).
EFFECT_ASSUMED = ("create:dup", "submit_command:dup", "complete_command:held",
                  "release_command:held")
MATRIX_SCHEMA = "chongming-fault-coverage"

_LOST_REPLY = ("a write whose commit ran and whose reply was lost is the unknown effect a "
               "store most often takes for a known one; each kind of write has its own code "
               "path; three landings leave room for ones where a mistake cannot show")
_LOST_REQUEST = ("a request that never reached the server: a call that answers must answer "
                 "truthfully; twice, as the next read that would show the untruth may meet "
                 "a fault of its own")
_EFFECT_ASSUMED = ("a request that never reached the server, of a call whose effect a store "
                   "most often assumes: it must not answer as if it had happened; three "
                   "landings, as the reads that decide it may meet faults of their own")
_CLAIM_ALL = ("a claim that leased every claimable command, its reply lost: the commands are "
              "leased to nobody, which a claim that answers [] on an error hides; twice, as "
              "the check phase's claim comes once a round")
_PAUSE = "a holder stopped between its requests, its row locks held, while the others go on"
_BLACKHOLE = "a request that vanishes: only a client-side timeout ends the call"
_BROKEN = "a connection broken under a call: the pool must find out and replace it"

#: Per fault mode, clause -> the cells its verdict needs.
#: The calls whose fault leaves a claim or prune of unknown effect, which may hold any
#: command row locked for as long as the checker knows: their cells come last (stage 3),
#: after the claim of every claimable command's (stage 2), so that the claims deciding the
#: other cells' evidence come before any such call (``faults.plan.Planner``).
_LOCKS_ANY = ("claim_commands", "prune")


def _stage(method: str) -> int:
    return 2 if method == "claim_commands:all" else 3 if method in _LOCKS_ANY else 1


REQUIRED: dict[str, dict[str, tuple[Cell, ...]]] = {
    "network": {
        SAFETY: (
            *(Cell(("lost-reply",), (w,), 3, _LOST_REPLY, _stage(w)) for w in WRITES),
            *(Cell(("lost-request",), (m,), 2, _LOST_REQUEST, _stage(m))
              for m in (*WRITES, *READS)),
            *(Cell(("lost-request",), (k,), 3, _EFFECT_ASSUMED) for k in EFFECT_ASSUMED),
            Cell(("lost-reply",), ("claim_commands:all",), 2, _CLAIM_ALL, stage=2),
            Cell(("pause",), WRITES, 1, _PAUSE),
        ),
        NO_HANG: (Cell(("blackhole",), READS, 1, _BLACKHOLE),),
        RECOVERY: (Cell(("lost-reply", "lost-request", "reset"), (), 1, _BROKEN, stage=3),),
    },
    "pause": {
        SAFETY: (Cell(("pause",), WRITES, 3, _PAUSE + " (the only fault a store with no "
                                                     "network gets, so three)"),),
    },
}
REQUIRED["deployment"] = REQUIRED["network"]


def cells_for(mode: str, *, network: bool) -> dict[str, tuple[Cell, ...]]:
    """The cells each clause needs in a run of ``mode`` (a store with no network to break,
    or none routed, is judged on pauses: the pause mode's cells)."""
    if mode in ("network", "deployment") and not network:
        return REQUIRED["pause"]
    return REQUIRED.get(mode, {})


def _outcome(logs: Logs, worker: int, seq: int) -> str:
    """How the logged call ``seq`` of ``worker`` ended: returned, conflict, raised or
    pending (it never returned: its worker was killed, or hung)."""
    for op in logs.ops.get(worker, ()):
        if op.seq == seq:
            if op.pending:
                return "pending"
            if op.ok:
                return "returned"
            return "conflict" if op.conflict else "raised"
    return "pending"


def matrix(applied: Sequence[Applied], logs: Logs, required: Mapping[str, Sequence[Cell]], *,
           mode: str, seed: int, round_trips: Mapping[str, int] | None = None
           ) -> dict[str, Any]:
    """The coverage matrix of a run, as plain data (the report's ``coverage``): per fault
    kind and method, how many faults landed in such a call and how those calls ended;
    every required cell with its count; the faults aimed, landed and missed."""
    rows: dict[str, dict[str, dict[str, int]]] = {}
    counted: dict[tuple[str, str], int] = {}
    aimed = missed = 0
    for a in applied:
        kind = a.fault.kind
        if a.fault.target:
            aimed += 1
            missed += not a.landed
        for landing in a.landed:
            cell = rows.setdefault(kind, {}).setdefault(
                landing.method, {"landed": 0, "counted": 0, "returned": 0, "conflict": 0,
                                 "raised": 0, "pending": 0})
            cell["landed"] += 1
            cell[_outcome(logs, landing.worker, landing.seq)] += 1
            if landing.counts(kind):
                cell["counted"] += 1
                counted[(kind, landing.method)] = counted.get((kind, landing.method), 0) + 1
    cells = [
        {"clause": clause, "label": c.label, "kinds": list(c.kinds), "methods": list(c.methods),
         "minimum": c.minimum, "landed": c.landed(counted), "met": c.landed(counted) >= c.minimum,
         "reason": c.reason}
        for clause, needed in required.items() for c in needed
    ]
    methods = [m for m in (*WRITES, *READS) if any(m in r for r in rows.values())]
    methods += sorted({m for r in rows.values() for m in r} - set(methods))
    return {"schema": MATRIX_SCHEMA, "mode": mode, "seed": seed, "methods": methods,
            "rows": {k: rows[k] for k in sorted(rows)}, "required": cells,
            "faults": len(applied), "aimed": aimed, "aimed_missed": missed,
            "round_trips": dict(round_trips or {})}


def unproven(coverage: Mapping[str, Any]) -> dict[str, str]:
    """Clause -> why it is NOT VERIFIED: the cells it needs that the run left short."""
    short: dict[str, list[str]] = {}
    for cell in coverage.get("required", ()):
        if not cell["met"]:
            short.setdefault(cell["clause"], []).append(
                f"{cell['label']} {cell['landed']} of {cell['minimum']}")
    return {clause: (f"the fault run did not exercise enough to judge it: {', '.join(cells)} "
                     f"(seed {coverage.get('seed')}; a longer run, or another seed, reaches "
                     "them)")
            for clause, cells in short.items()}
