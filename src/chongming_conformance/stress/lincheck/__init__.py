"""Linearizability checker: is a recorded concurrent history one the sequential model allows?

A history is *linearizable* if every call can be given one instant between its
invoke and its return (its linearization point) such that running the calls one
at a time in the order of those instants, on the sequential model
(``chongming_conformance.oracle``), gives exactly the answers the store gave.
That is the one property every correct store has, whatever the interleaving:
where hand-written invariants each encode an assumption about interleavings,
this checks the whole history against the model and needs no new scenario per
race.

Usage::

    from chongming_conformance.stress.lincheck import check, read_history, Budget

    result = check(read_history(logdir))        # logs of calls made with record=True
    result.verdict      # Verdict.LINEARIZABLE / VIOLATION / INCONCLUSIVE
    print(result.report())  # summary, then each violation's minimal calls as a timeline

or ``python -m chongming_conformance.stress lincheck LOGDIR``.

Decisions, and why each is sound (a correct store's history always passes)
--------------------------------------------------------------------------

**Input** (``history.py``). Each call has its process, method, full arguments,
outcome and real-time invoke/return stamps; ``a`` precedes ``b`` iff ``a``
returned before ``b`` was invoked. A call that raised ``StoreError`` (or
anything but a conflict) or never returned has an *unknown effect*: it may take
effect at any instant after its invoke -- even after it raised -- or never. A
``ConcurrencyConflict`` from ``save`` is a definite "no effect", valid iff the
task was missing or at another version at the point. A ``create`` or
``submit_command`` that raised is a duplicate (no effect, the id existed) or a
failure (unknown): the union of the two is just "unknown", so the model does not
need to tell them apart. A read that raised constrains nothing and is dropped.

**Objects and partitions** (``partition.py``). The state is split into objects:
each task's snapshot, each task's history rows, each command. A call on one
object (create/save/get/touch on a task, append/history on a history,
submit/complete/release on a command) goes to that object alone. Herlihy and
Wing's locality theorem says a history of single-object calls is linearizable
iff each object's sub-history is, so those are checked independently, and
exactly. The calls that span objects are *projected* onto each object they
touch, and each projection is checked in its object's partition:

* ``claim_commands``: onto each command it returned, which must have been
  claimable at the point (``oracle.claimable``) and come back exactly as stored
  with ``lease_until = now + lease_seconds`` -- and is leased from then on;
* ``query``: onto each task it returned (that snapshot at the point, matching
  the filters: ``oracle.matches``) and onto each task it did not (missing, not
  matching, or -- when the limit cut the answer -- not before the last one
  returned in ``created_at`` order);
* ``prune``: onto each task that may ever be terminal, with its history and its
  commands (these objects form one partition, since a prune changes them in one
  step): a terminal task may be dropped with all its rows, and each of its
  commands may go with it or stay; a non-terminal task is never dropped. A
  prune that returned 0 dropped nothing and is left out;
* ``counts``: onto nothing; see the range checks below.

Projection is an over-approximation: a linearization of the whole history gives
each projection a point inside the call's interval where its condition holds,
so every partition passes (sound). It gives up completeness across objects: two
claims that each fit every command they returned, but only in orders that
contradict each other across commands, are not caught; neither are counts
constraints between tasks (which tasks a prune with ``keep_terminal > 0`` keeps,
whether a claim took the *oldest* commands). What a projection keeps is every
per-object consequence.

**Local and range checks** (``check.py``, ``ranges.py``). What a single answer
shows wrong without any state: a claim over its limit or returning a command
twice, a query out of ``created_at`` order (ties in any order), over its limit
or with a task twice, a prune count that is not a count. Cross-task numbers are
bounded from real-time order: each task's possible values at a call's point are
the values of the writes that may be the last before it (``ranges.py``), so
``counts()[s]`` lies between the number of tasks certainly ``s`` throughout the
call and the number possibly ``s`` at some point of it, and a prune's count
between the certainly- and possibly-terminal tasks beyond ``keep_terminal``.
Both bounds hold in every linearization (sound); they are as precise as the
real-time order of the writes makes them.

**The guide's relaxations are nondeterminism of the model**, never exceptions in
the checker: a claim may skip commands a concurrent transaction holds locked
(SKIP LOCKED), so a command it did not return is left unconstrained -- the
claim "returns at most ``limit`` claimable commands in ``created_at`` order among
those it did not skip", and which ones it skipped is free; a claim's list order
is not checked (the guide fixes which commands, not the order); starvation is
judged by the scenarios' bounded-polls rule, not here. (Optional, stricter:
``check(..., skip="concurrent")`` lets a claim skip only a command some call
concurrent with it may hold locked -- another claim, a prune, a submit, complete or
release of that command; any other command it left out was missing, not claimable
or beyond its limit. Sound for a store whose only row locks on commands are those
calls', which is what SKIP LOCKED skips.) A ``touch`` and a ``save``
that race are two calls whose order is free: whichever is linearized last wins
the progress and heartbeat, and the save keeps the lease either way (the model's
save carries the stored lease). Ties in ``created_at`` are free in query order
and in which tasks a prune drops. A prune's choice of which terminal tasks to
drop, and whether their commands go (PRUNE-COMMANDS is a SHOULD), are free.

**Model** (``projection.py``). Every step loads the objects it touches into an
oracle ``Model``, calls the model's method (``create``, ``save``, ``touch``,
``append``, ``history_of``, ``submit``, ``adopt_claim``, ``complete``,
``release``, ``adopt_prune``) and reads them back; states are tuples of frozen
records, hashable for memoisation. Nothing re-states a rule of the guide.

**Leaving out what cannot matter** (``partition.py``). A read or prune of a task
before its first create could be invoked, or after an unfiltered query that did
not return it once every create of it had ended, sees a missing task whatever
the order; such projections are left out, which changes no decision and keeps the
work proportional to the live tasks, not to every task ever made.

**Search** (``search.py``). Wing & Gong's backtracking search over the invoke
and return events, with Lowe's memoisation of (linearized calls, state) as in
Porcupine and Knossos; nondeterminism by searching over sets of states. Calls
of unknown effect have their return at infinity and a step that may do nothing,
so they never block the search.

**Budget.** A check explores at most ``Budget.max_states`` states over
all partitions (smallest first) and ``max_seconds``; running out makes the
verdict INCONCLUSIVE with the partition it was in and the budget -- never
LINEARIZABLE. A violation found before is still reported (a violation is a
proof whatever happens elsewhere).

**Failures** (``minimise.py``). The failing partition is cut to a minimal core
of calls that still cannot be linearized while every other write may or may not
have taken effect (a dropped read is removed; a dropped write is weakened, never
removed, which is what makes the core a proof), and printed as a timeline
(``stress.timeline``): ``»`` the core, ``~`` context writes, with an explanation:
the furthest any order of the core gets, and the model's reason why the next
call cannot take effect there.
"""

from __future__ import annotations

from .check import Budget, CheckResult, Verdict, Violation, check, check_logs
from .history import Call, Outcome, UnrecordedCalls, calls_from_logs, read_history

__all__ = [
    "Budget",
    "Call",
    "CheckResult",
    "Outcome",
    "UnrecordedCalls",
    "Verdict",
    "Violation",
    "calls_from_logs",
    "check",
    "check_logs",
    "read_history",
]
