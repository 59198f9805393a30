"""The smallest sub-history of a failing partition that still cannot be linearized.

Dropping calls from a history is not harmless: drop the save that wrote version 5
and a read of version 5 becomes impossible -- a "violation" the store never made.
So a call is never simply dropped here. It is *weakened*: a read (or a conflict,
which changes nothing) is removed, since removing a read only removes a
constraint; a write becomes a write of unknown outcome in the same interval (it
may or may not have taken effect), which every linearization of the original
still satisfies. A history in which some calls are weakened that still fails
therefore proves the original fails, and the calls left strict -- the *core* --
are the ones the failure is about. Writes invoked after every core call returned
are left out (they can only take effect after every core call).

The search for the core is greedy delta debugging (Zeller's ddmin on the calls
that returned, weakening a chunk at a time and keeping the weakening when the
rest still fails), after two binary searches that cut the history to a window:
the shortest prefix (by invoke time) that fails with everything later weakened,
then the shortest suffix of that. Every trial is a bounded search; a trial that
runs out of budget counts as "passes", so the core only ever shrinks on proof.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .partition import Partition
from .projection import Step
from .search import Exhausted, Meter, SearchResult, search

__all__ = ["Minimised", "minimise", "trial"]


@dataclass(slots=True)
class Minimised:
    """The core (indexes of the partition's projections), the calls before it kept as
    recorded (``background``), the weakened calls kept as context, the failed search
    on it, and whether ddmin finished (1-minimal given the background)."""

    core: list[int]
    background: list[int]
    context: list[int]
    result: SearchResult
    order: list[int]
    complete: bool
    trials: int


def _horizon(part: Partition, core: Sequence[int]) -> float:
    ends = [part.projections[i].t_end for i in core]
    finite = [e for e in ends if e != math.inf]
    return math.inf if len(finite) < len(ends) or not finite else max(finite)


def _build(part: Partition, strict: Sequence[int]
           ) -> tuple[list[int], list[Step], list[float], list[float]]:
    keep = set(strict)
    horizon = _horizon(part, strict)
    order: list[int] = []
    steps: list[Step] = []
    inv: list[float] = []
    end: list[float] = []
    for i, p in enumerate(part.projections):
        if i in keep:
            step: Step | None = part.strict[i]
        elif p.t_invoke > horizon:
            continue
        else:
            step = part.weak[i]
        if step is None:
            continue
        order.append(i)
        steps.append(step)
        inv.append(p.t_invoke)
        end.append(p.t_end)
    return order, steps, inv, end


def trial(part: Partition, strict: Sequence[int], meter: Meter
          ) -> tuple[SearchResult | None, list[int]]:
    """Search the partition with ``strict`` as recorded and everything else weakened.

    Returns (the search result, or None if the meter ran out; the projections the
    trial included, in the search's index order).
    """
    order, steps, inv, end = _build(part, strict)
    try:
        return search(steps, inv, end, part.init, meter), order
    except Exhausted:
        return None, order


def minimise(part: Partition, *, deadline: float, trial_states: int = 10_000,
             window: int = 16, background_ddmin: int = 24) -> Minimised:
    """A small core of a partition whose full history failed.

    1. The shortest prefix (by invoke) of the calls that returned which still fails
       with every later call weakened; its last call is where the failure shows.
    2. ddmin over the last ``window`` calls of that prefix, the calls before them kept
       as recorded (the *background*: weakening a long past makes every trial explore
       every order of it), the window doubled while the core reaches its first call.
    3. The background weakened from its oldest end while the rest still fails (binary
       search), and what is left of it, if at most ``background_ddmin`` calls, ddmin'ed
       into the core: the core is then a proof on its own, every other call weakened.
       Otherwise the rest of the background stays part of the proof, as recorded.

    Every trial may explore ``trial_states`` states: weakening many writes of
    independent fields (touches of lease, progress and heartbeat, saves) multiplies
    the states a trial must carry, and such a trial is cut short and counted as
    passing rather than allowed to eat the time of the others.

    Best effort by ``deadline``: when time runs out, the core found so far (it still
    fails) is returned with ``complete=False``.
    """
    trials = 0
    last: tuple[tuple[int, ...], SearchResult, list[int]] | None = None

    def fails(strict: Sequence[int], *, budget: int = trial_states) -> bool:
        nonlocal trials, last
        if time.monotonic() > deadline:
            raise TimeoutError
        trials += 1
        result, order = trial(part, strict, Meter(budget, deadline))
        if result is not None and not result.ok:
            last = (tuple(strict), result, order)
            return True
        return False

    candidates = [i for i, p in enumerate(part.projections) if p.definite]
    candidates.sort(key=lambda i: part.projections[i].t_invoke)
    core = list(candidates)
    background: list[int] = []
    complete = False
    try:
        lo, hi = 0, len(core)  # the shortest failing prefix (the whole is known to fail)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fails(core[:mid]):
                hi = mid
            else:
                lo = mid
        prefix = core[:hi]
        size = window
        while True:
            background = prefix[:max(len(prefix) - size, 0)]
            core = _ddmin(prefix[len(background):], background, fails)
            if not background or core[0] != prefix[len(background)]:
                break
            size *= 2
        if background:
            # Weaken the background from its oldest end while the rest still fails (a
            # trial that runs out of budget counts as passing), then ddmin what is left.
            lo, hi = 0, len(background) + 1
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if fails([*background[mid:], *core]):
                    lo = mid
                else:
                    hi = mid
            background = background[lo:]
            if background and len(background) <= background_ddmin:
                kept = _ddmin(background, core, fails, allow_empty=True)
                core = sorted([*kept, *core], key=lambda i: part.projections[i].t_invoke)
                background = []
        complete = True
    except TimeoutError:
        pass
    strict = [*background, *core]
    if last is None or last[0] != tuple(strict):
        result, order = trial(part, strict, Meter(trial_states * 4, math.inf))
        last = (tuple(strict), result or SearchResult(ok=False), order)
    _, result, order = last
    proof = set(strict)
    context = [i for i in order if i not in proof]
    return Minimised(core, background, context, result, order, complete, trials)


def _ddmin(items: list[int], fixed: list[int], fails: Callable[[Sequence[int]], bool],
           *, allow_empty: bool = False) -> list[int]:
    """Zeller's ddmin (complements only): weaken chunks of ``items`` while
    ``fixed + rest`` still fails; ``items`` must fail to begin with. ``allow_empty``:
    ``fixed`` may fail on its own, so the rest may go entirely."""
    core = list(items)
    if allow_empty and core and fails(list(fixed)):
        return []
    n = 2
    while len(core) >= 2:
        size = math.ceil(len(core) / n)
        chunks = [core[k:k + size] for k in range(0, len(core), size)]
        for chunk in chunks:
            dropped = set(chunk)
            rest = [i for i in core if i not in dropped]
            if rest and fails([*fixed, *rest]):
                core = rest
                n = max(n - 1, 2)
                break
        else:
            if n >= len(core):
                break
            n = min(2 * n, len(core))
    return core
