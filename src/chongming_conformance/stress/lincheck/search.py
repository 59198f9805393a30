"""Is one partition's history linearizable? Wing & Gong's search with Lowe's memo.

The calls' invoke and return events are put in one list in time order (an invoke
before a return at the same instant: two calls that touch are concurrent). The
search walks the list from the front. At an invoke it tries to *linearize* the
call -- to let it take effect now, before every call whose invoke comes later --
by applying its step to the current state; if the step accepts, the call and its
return are lifted out of the list, the (call, state) is pushed, and the walk
restarts from the front. At a return whose call is not linearized yet, no order
of what is left can work from here: it pops the last call, puts it back, and tries
the next candidate after it. The list empty means every call took effect in an
order that respects real time and the model: linearizable. Popping from an empty
stack means no such order exists.

Lowe's improvement makes it practical: the configuration (the set of linearized
calls, the state) is memoised, and a configuration seen before is never explored
again -- two orders of concurrent calls that reach the same state are one. The
number of states explored is what the budget caps.

Nondeterminism (several possible next states) is handled by searching over *sets*
of states, as Porcupine does for its nondeterministic models: the state is the set
of every state some choice of the nondeterministic steps so far reaches, a step
maps every member and keeps what is valid, and it fails only when nothing is.
Existence of a good choice commutes with the sequence, so this is exact.

A call whose outcome is unknown has its return at infinity (it may take effect at
any later time) and a step that always accepts (the effect may not happen), so it
never blocks the search; it only adds the states its effect may lead to.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from .projection import State, Step

__all__ = ["Exhausted", "Meter", "SearchResult", "search"]


class Exhausted(Exception):
    """The budget ran out before the search could decide."""


@dataclass(slots=True)
class Meter:
    """Counts explored states against a budget of states and seconds.

    A configuration (linearized calls, set of possible states) counts as many states
    as its set holds: that is the work the search does on it.
    """

    max_states: int
    deadline: float
    states: int = 0
    why: str = ""

    def tick(self, n: int = 1) -> None:
        before = self.states
        self.states += n
        if self.states > self.max_states:
            self.why = f"more than {self.max_states} states explored"
            raise Exhausted(self.why)
        if self.states >> 9 != before >> 9 and time.monotonic() > self.deadline:
            self.why = "out of time"
            raise Exhausted(self.why)


@dataclass(slots=True)
class SearchResult:
    """The verdict on one partition, and where a failed search got furthest."""

    ok: bool
    #: States explored (each configuration counts the size of its set of states).
    states: int = 0
    #: On failure: the longest prefix any order reached (call indexes, in order) ...
    prefix: list[int] = field(default_factory=list)
    #: ... the call whose return came while it could not be linearized ...
    stuck: int | None = None
    #: ... and the states it faced there.
    stuck_states: frozenset[State] | None = None


def _apply(states: frozenset[State], step: Step) -> frozenset[State] | str:
    """The step on every possible state: the set of valid successors, or why none is."""
    reason: str | None = None
    out: set[State] = set()
    unchanged = True
    for s in states:
        r = step(s)
        if r is None:
            out.add(s)
        elif isinstance(r, str):
            unchanged = False
            if reason is None:
                reason = r
        else:
            if unchanged and (len(r) != 1 or r[0] != s):
                unchanged = False
            out.update(r)
    if not out:
        return reason or "no valid state"
    if unchanged:
        return states
    return frozenset(out)


def search(steps: Sequence[Step], invoke: Sequence[float], end: Sequence[float],
           init: State, meter: Meter) -> SearchResult:
    """Linearize the calls ``steps[i]`` with intervals ``[invoke[i], end[i]]``.

    Raises :class:`Exhausted` when ``meter`` runs out.
    """
    n = len(steps)
    start_states = meter.states
    # Events: (time, 0 = invoke / 1 = return, call); positions 1..2n, 0 is the head.
    events = sorted([(invoke[i], 0, i) for i in range(n)] + [(end[i], 1, i) for i in range(n)])
    size = 2 * n
    nxt = list(range(1, size + 2))
    nxt[size] = -1
    prv = list(range(-1, size + 1))
    is_call = [False] * (size + 1)
    which = [0] * (size + 1)
    call_at = [0] * n
    ret_at = [0] * n
    for pos, (_, kind, i) in enumerate(events, start=1):
        which[pos] = i
        if kind == 0:
            is_call[pos] = True
            call_at[i] = pos
        else:
            ret_at[i] = pos

    def lift(i: int) -> None:
        for pos in (call_at[i], ret_at[i]):
            p, q = prv[pos], nxt[pos]
            nxt[p] = q
            if q != -1:
                prv[q] = p

    def unlift(i: int) -> None:
        for pos in (ret_at[i], call_at[i]):
            p, q = prv[pos], nxt[pos]
            nxt[p] = pos
            if q != -1:
                prv[q] = pos

    states: frozenset[State] = frozenset([init])
    bits = 0
    seen: set[tuple[int, frozenset[State]]] = set()
    stack: list[tuple[int, frozenset[State]]] = []
    best = SearchResult(ok=False)
    pos = nxt[0]
    while nxt[0] != -1:
        if is_call[pos]:
            i = which[pos]
            after = _apply(states, steps[i])
            if not isinstance(after, str):
                key = (bits | (1 << i), after)
                if key not in seen:
                    seen.add(key)
                    meter.tick(len(after))
                    stack.append((i, states))
                    states, bits = after, key[0]
                    lift(i)
                    pos = nxt[0]
                    continue
            pos = nxt[pos]
        else:
            if best.stuck is None or len(stack) > len(best.prefix):
                best.prefix = [c for c, _ in stack]
                best.stuck = which[pos]
                best.stuck_states = states
            if not stack:
                best.states = meter.states - start_states
                return best
            i, states = stack.pop()
            bits &= ~(1 << i)
            unlift(i)
            pos = nxt[call_at[i]]
    return SearchResult(ok=True, states=meter.states - start_states,
                        prefix=[c for c, _ in stack])
