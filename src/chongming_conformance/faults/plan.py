"""The fault plan: which fault comes next, from a seed -- aimed first at what the run has
not yet exercised enough.

Two sources, one sequence. :func:`plan` is the *breadth* plan of earlier runs: an endless
seeded sequence of every fault kind at random instants (Toxiproxy's toxics plus Jepsen's
pause and the deployment's own actions). :class:`Planner` puts *aimed* faults before it:
the fault run states which cells -- a fault kind at a kind of call, "a lost reply after a
save committed", "a lost request of a create" -- it must exercise and how often
(:class:`Cell`, ``stress.fault_coverage``), and while a cell is short the planner's next
fault is aimed at it (``Fault.target``: the call kind; the nemesis arms a trigger on the
proxy, ``faults.aim``). Once every cell has its minimum, the breadth plan goes on.

Why aimed first: at random instants, most faults land on an idle pooled connection or on
the read before a write, and a store's mistakes are in its writes' unknown effects. A
gate makes one run, so the faults that decide it must land in that run, every time.

The choice among short cells is a seeded rotation, so a replay with the same seed aims in
the same order; which cells are short depends on what landed, which is the machine's --
each applied fault is logged with what it hit (``nemesis.jsonl``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "DEPLOYMENT_PREFIX",
    "INSTANT",
    "NETWORK_KINDS",
    "PAUSE_KINDS",
    "QUALIFIERS",
    "READS",
    "VOLLEY",
    "WRITES",
    "Cell",
    "Fault",
    "Planner",
    "base_method",
    "call_words",
    "kinds_for",
    "matches_kind",
    "plan",
]

#: The calls that change what the store holds, and the ones that only read.
WRITES = ("create", "save", "append", "touch", "submit_command", "claim_commands",
          "complete_command", "release_command", "prune")
READS = ("get", "query", "counts", "history")

#: What a workload may say of a call beyond its method, as ``method:qualifier`` (a *kind of
#: call*): the code path the call takes, where it differs from the method's usual one and a
#: fault there is what a store gets wrong. ``dup``: an insert of an id that exists (a
#: create or submit retried); ``held``: a complete or release of a command the caller
#: holds (it has an effect; one of a finished command has none); ``all``: a claim of every
#: claimable command while no other command call runs (it leases what is there, and its
#: answer decides).
QUALIFIERS = ("dup", "held", "all")


def base_method(kind: str) -> str:
    """The protocol method of a kind of call (``create:dup`` -> ``create``)."""
    return kind.partition(":")[0]


def matches_kind(kind: str, wanted: Iterable[str]) -> bool:
    """Whether a call of ``kind`` is one of ``wanted``: named as it is (``create:dup``), or
    by its method alone (``create`` takes every create)."""
    wanted = set(wanted)
    return kind in wanted or base_method(kind) in wanted


NETWORK_KINDS = ("lost-reply", "lost-request", "reset", "blackhole", "latency", "cut", "down")
PAUSE_KINDS = ("pause",)
#: A deployment action's fault kind is this prefix and the action's name.
DEPLOYMENT_PREFIX = "deployment:"
#: Relative weights. The faults aimed at calls in flight come first: they are what a store
#: mishandles (an unknown effect taken for a known one), and they cost the run nothing. A
#: blackhole holds every worker for the store's client timeout, so it comes seldom.
_WEIGHTS = {"lost-reply": 8, "lost-request": 4, "reset": 2, "blackhole": 1, "latency": 1,
            "cut": 1, "down": 1, "pause": 1}
#: The weight of each deployment action: a crash is the fault a durability verdict needs,
#: and it is preceded by seconds of health (``plan``), so it may be drawn often.
DEPLOYMENT_WEIGHT = 4


def kinds_for(mode: str, *, network: bool, actions: Sequence[str] = ()) -> tuple[str, ...]:
    """The fault kinds of a ``StressProfile.faults`` mode: ``pause`` only; with ``network``
    (and a network to break) the network kinds too; with ``deployment`` also the store's
    own ``actions`` (their names)."""
    if mode not in ("pause", "network", "deployment"):
        return ()
    kinds: tuple[str, ...] = PAUSE_KINDS
    if mode in ("network", "deployment") and network:
        kinds = (*NETWORK_KINDS, *kinds)
    if mode == "deployment":
        kinds = (*kinds, *(DEPLOYMENT_PREFIX + a for a in actions))
    return kinds


@dataclass(frozen=True, slots=True)
class Fault:
    """One planned fault. ``gap``: seconds of health before it; ``duration``: seconds it
    lasts (0: an instant); ``every``: all connections (or workers) or one, ``pick`` says
    which (an index taken modulo what is live then); ``amount``: milliseconds of latency,
    bytes before a cut; ``target``: the calls an aimed fault waits for (a method, or
    several joined by ``|``; empty: not aimed)."""

    number: int
    kind: str
    gap: float
    duration: float
    every: bool
    pick: int
    amount: float = 0.0
    target: str = ""
    #: An aimed lost request: how many requests before the call's last it is aimed at (the
    #: landings of one cell walk back from the commit to the statements before it).
    back: int = 0

    @property
    def methods(self) -> frozenset[str]:
        """The methods an aimed fault may hit (empty: not aimed)."""
        return frozenset(m for m in self.target.split("|") if m)

    def describe(self) -> str:
        if self.target:
            return self._describe_aimed()
        who = "every connection" if self.every else "one connection"
        if self.kind == "lost-reply":
            return ("lose the next reply on every connection" if self.every
                    else "lose the next reply of one call in flight")
        if self.kind == "lost-request":
            who = "every live connection" if self.every else "the next call of one busy one"
            return f"lose requests on {who} for {self.amount:.0f} ms, then close"
        if self.kind == "reset":
            return f"reset {who}"
        if self.kind == "blackhole":
            return f"blackhole {who} for {self.duration:.1f} s"
        if self.kind == "latency":
            return f"latency {self.amount:.0f}±{self.amount / 4:.0f} ms on {who} for " \
                   f"{self.duration:.1f} s"
        if self.kind == "cut":
            return f"cut replies after {self.amount:.0f} bytes on {who} for {self.duration:.1f} s"
        if self.kind == "down":
            return f"server down for {self.duration:.1f} s"
        return f"pause one worker for {self.duration:.1f} s"

    def _describe_aimed(self) -> str:
        calls = call_words(self.target)
        if self.kind == "lost-reply":
            return f"lose the reply of the next {calls} that committed (its last round trip)"
        if self.kind == "lost-request":
            which = ("its last round trip" if not self.back else
                     f"{self.back} round trip(s) before its last")
            return f"lose the request of the next {calls} ({which})"
        if self.kind == "reset":
            return f"reset the connection inside the next {calls}"
        if self.kind == "blackhole":
            return f"blackhole the connection of the next {calls} for {self.duration:.1f} s"
        if self.kind == "pause":
            return f"pause the next worker inside a {calls} for {self.duration:.1f} s"
        return f"{self.kind} at the next {calls}"


def call_words(target: str) -> str:
    """The calls of a target in words: "save", "save or get", "read", "write", "call"."""
    methods = [_in_words(m) for m in target.split("|") if m]
    if set(methods) == set(READS):
        return "read"
    if set(methods) == set(WRITES):
        return "write"
    return " or ".join(methods) if methods else "call"


_QUALIFIED = {"dup": "{} of an id that exists", "held": "{} of a held command",
              "all": "{} of every claimable command"}


def _in_words(kind: str) -> str:
    method, _, qualifier = kind.partition(":")
    return _QUALIFIED[qualifier].format(method) if qualifier in _QUALIFIED else method


def plan(seed: int, kinds: Sequence[str]) -> Iterator[Fault]:
    """The endless fault sequence of ``seed`` over ``kinds`` (none: an empty sequence).

    Its random stream is its own (not the workers'), so a replay with the same seed and
    kinds plans the same faults in the same order.
    """
    if not kinds:
        return
    rng = random.Random(f"chongming-nemesis-{seed}")
    weights = [_WEIGHTS.get(k, DEPLOYMENT_WEIGHT) for k in kinds]
    number = 0
    while True:
        number += 1
        kind = rng.choices(list(kinds), weights)[0]
        # A lost reply or request on one connection costs the run that connection and one
        # call: it may come often. The others hold every worker up for a while.
        targeted = kind in ("lost-reply", "lost-request")
        gap = rng.uniform(0.02, 0.15) if targeted else rng.uniform(0.1, 0.8)
        # A lost reply on one busy connection usually lands on the call *after* the one in
        # flight (the toxic is in place a moment later): a worker's next call on the same
        # connection, such as the save after its read. On every connection it lands on each
        # one's next call, mostly reads.
        every = rng.random() < {"reset": 0.5, "latency": 0.5, "cut": 0.5, "lost-reply": 0.2,
                                "lost-request": 0.2, "blackhole": 0.25}.get(kind, 1.0)
        pick = rng.randrange(1_000_000)
        if kind == "lost-reply":
            yield Fault(number, kind, gap, 1.0, every, pick)
        elif kind == "lost-request":
            yield Fault(number, kind, gap, 0.0, every, pick, float(rng.randrange(50, 250, 25)))
        elif kind == "reset":
            yield Fault(number, kind, gap, 0.0, every, pick)
        elif kind == "blackhole":
            yield Fault(number, kind, gap, rng.uniform(0.5, 2.0), every, pick)
        elif kind == "latency":
            yield Fault(number, kind, gap, rng.uniform(0.5, 2.0), every, pick,
                        float(rng.randrange(100, 800, 50)))
        elif kind == "cut":
            yield Fault(number, kind, gap, rng.uniform(0.3, 1.0), every, pick,
                        float(rng.randrange(1, 200)))
        elif kind == "down":
            yield Fault(number, kind, gap, rng.uniform(0.3, 1.0), True, pick)
        elif kind.startswith(DEPLOYMENT_PREFIX):
            # Seconds of health first: a store recovering from the last crash is judged on
            # its way back (the workers' check phases and rounds go on), not crashed again
            # before it has reconnected.
            yield Fault(number, kind, rng.uniform(3.0, 6.0), rng.uniform(0.5, 2.0), True, pick)
        else:
            yield Fault(number, "pause", gap, rng.uniform(0.2, 1.5), False, pick)


@dataclass(frozen=True, slots=True)
class Cell:
    """What a fault run must exercise: faults of one of ``kinds`` landed inside calls of
    one of ``methods`` (empty: any call), at least ``minimum`` times. ``reason`` says why
    that many (the report quotes it beside a short cell). ``stage``: the planner aims at
    the short cells of the lowest stage first (see :class:`Planner`)."""

    kinds: tuple[str, ...]
    methods: tuple[str, ...]
    minimum: int
    reason: str = ""
    stage: int = 1

    @property
    def label(self) -> str:
        what = " or ".join(self.kinds)
        calls = call_words("|".join(self.methods)) if self.methods else "call"
        return f"{what} × {calls}"

    def counts(self, kind: str, method: str) -> bool:
        """Whether a fault of ``kind`` landed in a call of ``method`` (a kind of call, maybe
        qualified) counts for this cell."""
        return kind in self.kinds and (not self.methods or matches_kind(method, self.methods))

    def landed(self, hits: Mapping[tuple[str, str], int]) -> int:
        """How many of ``hits`` ((fault kind, method) -> count) count for this cell."""
        return sum(n for (kind, method), n in hits.items() if self.counts(kind, method))


#: How long an aimed fault lasts, by kind: seconds (a blackhole's hold, a pause).
_AIMED_DURATION: dict[str, Callable[[random.Random], float]] = {
    "lost-reply": lambda rng: 0.0,
    "lost-request": lambda rng: 0.0,
    "reset": lambda rng: 0.0,
    "blackhole": lambda rng: rng.uniform(0.5, 2.0),
    "pause": lambda rng: rng.uniform(0.2, 1.0),
}
#: The kinds a cell may aim (a cell of other kinds is counted, never aimed at).
AIMABLE = frozenset(_AIMED_DURATION)
#: The aimed kinds that are over the moment they fire (one chunk dropped, one connection
#: closed or reset): several may wait for their calls at once, a *volley*, each on its own
#: cell -- a run meets its cells in a fraction of the time one at a time would take, the
#: rare kinds of call (an insert retried, a prune) waited for side by side.
INSTANT = frozenset({"lost-reply", "lost-request", "reset"})
#: The most aimed faults a volley arms at once.
VOLLEY = 8
#: An aimed cell whose fault found no such call this many times in a row waits its turn
#: behind the others (the workload makes that call seldom, or not through the proxy).
_PATIENCE = 3


class Planner:
    """The fault sequence of a run: aimed at the short cells first, then :func:`plan`.

    ``cells`` are what the run must exercise; ``aimable`` says which kinds can be aimed
    here (the network kinds need the aim on the proxies; a pause needs the call board).
    :meth:`next` is asked for every fault with what has landed so far; :meth:`missed`
    is told when an aimed fault found no call to land in.

    Cells come in stages, the lowest first: a claim or prune that raised may have locked
    any command row for as long as the checker knows (its effect is unknown), so after one
    every later claim may skip any command, and a claim's answer decides nothing more.
    The faults whose evidence is a later claim's answer (a release that said done and was
    never sent) therefore come before those that leave such a claim or prune behind. A
    cell that keeps finding no call (:data:`_PATIENCE`) no longer holds the later stages
    back.
    """

    def __init__(self, seed: int, kinds: Sequence[str], cells: Sequence[Cell] = (), *,
                 aimable: frozenset[str] = frozenset()) -> None:
        self._kinds = tuple(kinds)
        self._breadth = plan(seed, kinds)
        self._rng = random.Random(f"chongming-aim-{seed}")
        usable = set(kinds) & AIMABLE & aimable
        self.cells = [c for c in cells if set(c.kinds) & usable]
        self._order = list(range(len(self.cells)))
        self._rng.shuffle(self._order)
        self._turn = 0
        self._misses = [0] * len(self.cells)
        self._number = 0

    def short(self, hits: Mapping[tuple[str, str], int]) -> list[Cell]:
        """The aimable cells still below their minimum."""
        return [c for c in self.cells if c.landed(hits) < c.minimum]

    def _turn_of(self, hits: Mapping[tuple[str, str], int]) -> list[int]:
        """The short cells whose turn it is, in the seeded order: those of the current stage
        and below -- the lowest stage with an eager short cell (one that has not missed
        :data:`_PATIENCE` times in a row), else the lowest with any -- the eager ones
        first; a cell that keeps missing is still aimed at when there is room, so a rare
        kind of call is met as the run goes on, never left for its end."""
        short = [i for i in self._order if self.cells[i].landed(hits) < self.cells[i].minimum]
        if not short:
            return []
        eager = [i for i in short if self._misses[i] < _PATIENCE]
        stage = min(self.cells[i].stage for i in (eager or short))
        now = [i for i in short if self.cells[i].stage <= stage]
        return ([i for i in now if self._misses[i] < _PATIENCE]
                + [i for i in now if self._misses[i] >= _PATIENCE])

    def next(self, hits: Mapping[tuple[str, str], int]) -> Fault:
        """The next fault: aimed at a short cell (a seeded rotation, the patient ones
        last), else the breadth plan's next."""
        self._number += 1
        eager = self._turn_of(hits)
        if eager:
            pick = eager[self._turn % len(eager)]
            self._turn += 1
            return self._aimed(self.cells[pick], landed=self.cells[pick].landed(hits))
        try:
            fault = next(self._breadth)
        except StopIteration:
            raise StopIteration from None
        return Fault(self._number, fault.kind, fault.gap, fault.duration, fault.every,
                     fault.pick, fault.amount)

    def volley(self, hits: Mapping[tuple[str, str], int], *,
               armed: Collection[tuple[str, str]] = (), room: int = VOLLEY) -> list[Fault]:
        """The next faults: up to ``room`` instant ones aimed at as many short cells (a
        seeded rotation, the patient ones last) -- none at a cell one of the ``armed``
        faults (their kind and target) already waits for -- when the next short cell's
        fault is instant; else the one :meth:`next` gives (``[]`` when every short cell
        has a fault armed already)."""
        eager = self._turn_of(hits)
        if not eager:
            return [self.next(hits)] if not armed else []
        start = self._turn % len(eager)
        rotated = eager[start:] + eager[:start]
        out: list[Fault] = []
        busy = set(armed)
        for i in rotated:
            cell = self.cells[i]
            if {(k, "|".join(cell.methods or (*WRITES, *READS))) for k in cell.kinds} & busy:
                continue
            if not set(cell.kinds) & INSTANT:
                if not out and not armed:
                    return [self.next(hits)]
                continue
            self._number += 1
            out.append(self._aimed(cell, instant=True, landed=cell.landed(hits)))
            if len(out) >= room:
                break
        self._turn += len(out)
        return out

    def missed(self, fault: Fault) -> None:
        """An aimed fault found no call to land in before it gave up."""
        for i, cell in enumerate(self.cells):
            if fault.kind in cell.kinds and set(cell.methods) == fault.methods:
                self._misses[i] += 1

    def landed(self, fault: Fault) -> None:
        """An aimed fault landed: its cell is eager again."""
        for i, cell in enumerate(self.cells):
            if fault.kind in cell.kinds and set(cell.methods) == fault.methods:
                self._misses[i] = 0

    def _aimed(self, cell: Cell, *, instant: bool = False, landed: int = 0) -> Fault:
        """A fault aimed at ``cell``; ``landed``: how many of its faults have landed (a lost
        request walks back one request each time: the commit, then the statement before it
        -- a duplicate insert that fails at its INSERT never reaches its commit)."""
        usable = [k for k in cell.kinds if k in AIMABLE and k in self._kinds
                  and (not instant or k in INSTANT)]
        kind = usable[self._rng.randrange(len(usable))]
        methods = cell.methods or (*WRITES, *READS)
        return Fault(self._number, kind, self._rng.uniform(0.02, 0.12),
                     _AIMED_DURATION[kind](self._rng), False, self._rng.randrange(1_000_000),
                     target="|".join(methods),
                     back=landed if kind == "lost-request" else 0)
