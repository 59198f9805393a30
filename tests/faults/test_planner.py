"""The fault plan's aim (``faults.plan.Planner``): what a run exercises first, and how fast.

Pinned here: the aimed faults go to the cells still short, in a seeded order; instant
ones (a lost reply, a lost request, a reset) come in volleys -- several cells' faults armed
at once, each waiting for its own kind of call -- so a run meets its cells in a fraction
of the time; a cell of another kind (a blackhole, a pause) comes alone; once every cell is
met, the breadth plan goes on. And the aim's "deep" round trip: the commit of the calls
that did something.
"""

from __future__ import annotations

from collections import Counter

from chongming_conformance.faults.aim import DEEP_SHARE, _Learned
from chongming_conformance.faults.plan import INSTANT, VOLLEY, Cell, Planner

KINDS = ("lost-reply", "lost-request", "reset", "blackhole", "latency", "cut", "down", "pause")
REPLY = [Cell(("lost-reply",), (m,), 2) for m in ("save", "create", "append", "touch",
                                                  "prune", "release_command:held")]
HOLE = Cell(("blackhole",), ("get",), 1)
AIMABLE = frozenset({"lost-reply", "lost-request", "reset", "blackhole", "pause"})


def test_a_volley_arms_one_instant_fault_per_short_cell_at_most_volley_of_them() -> None:
    planner = Planner(7, KINDS, REPLY, aimable=AIMABLE)
    volley = planner.volley(Counter())
    assert len(volley) == min(VOLLEY, len(REPLY))
    assert len({f.target for f in volley}) == len(volley)  # each on its own cell
    assert all(f.kind in INSTANT and f.target for f in volley)
    assert len({f.number for f in volley}) == len(volley)


def test_met_cells_leave_the_volley_and_then_the_breadth_plan_goes_on() -> None:
    planner = Planner(7, KINDS, REPLY, aimable=AIMABLE)
    hits = Counter({("lost-reply", c.methods[0]): 2 for c in REPLY[1:]})
    [only] = planner.volley(hits)
    assert only.target == "save"
    hits[("lost-reply", "save")] = 2
    [breadth] = planner.volley(hits)
    assert not breadth.target  # every cell met: the seeded breadth plan


def test_a_cell_that_is_not_instant_comes_alone() -> None:
    planner = Planner(3, KINDS, [HOLE], aimable=AIMABLE)
    [hole] = planner.volley(Counter())
    assert hole.kind == "blackhole" and hole.target == "get"


def test_a_qualified_kind_of_call_is_its_own_target_and_its_method_counts_it() -> None:
    planner = Planner(1, KINDS, REPLY, aimable=AIMABLE)
    targets = {f.target for f in planner.volley(Counter())} | \
        {f.target for f in planner.volley(Counter())}
    assert "release_command:held" in targets
    assert Cell(("lost-reply",), ("release_command",), 1).counts(
        "lost-reply", "release_command:held")
    assert not REPLY[-1].counts("lost-reply", "release_command")  # a no-op release


def test_deep_is_the_commit_of_the_calls_that_did_something() -> None:
    learned = _Learned()
    for _ in range(80):
        learned.add("claim_commands", 3)  # leased nothing: BEGIN, SELECT, COMMIT
    for _ in range(20):
        learned.add("claim_commands", 4)  # leased: and the UPDATE
    learned.add("claim_commands", 9)  # once, an outlier: not a good share of the calls
    assert learned.last("claim_commands") == 3
    assert learned.deep("claim_commands") == 4
    assert 1 / 101 < DEEP_SHARE <= 20 / 101
    assert learned.deep("save") is None


def test_the_lowest_stage_goes_first_and_a_cell_that_keeps_missing_stops_holding_it_up() -> None:
    """A claim or prune that raised may hold any command locked for as long as the checker
    knows, so the cells whose evidence is a later claim's answer come before them. A cell
    that keeps missing lets the next stage begin, and is still aimed at beside it."""
    early = Cell(("lost-request",), ("release_command:held",), 1, stage=1)
    middle = Cell(("lost-reply",), ("claim_commands:all",), 1, stage=2)
    late = Cell(("lost-reply",), ("prune",), 1, stage=3)
    planner = Planner(5, KINDS, [late, middle, early], aimable=AIMABLE)
    assert [f.target for f in planner.volley(Counter())] == ["release_command:held"]
    met = Counter({("lost-request", "release_command:held"): 1})
    assert [f.target for f in planner.volley(met)] == ["claim_commands:all"]
    for fault in planner.volley(met):
        for _ in range(3):
            planner.missed(fault)  # the claim of every claimable command never came
    assert {f.target for f in planner.volley(met)} == {"prune", "claim_commands:all"}


def test_a_rolling_volley_never_arms_a_second_fault_at_a_cell_that_has_one() -> None:
    planner = Planner(7, KINDS, REPLY, aimable=AIMABLE)
    first = planner.volley(Counter(), room=2)
    assert len(first) == 2
    more = planner.volley(Counter(), room=VOLLEY, armed=[(f.kind, f.target) for f in first])
    assert len(more) == len(REPLY) - 2
    assert not {f.target for f in first} & {f.target for f in more}
    everything = [(f.kind, f.target) for f in first + more]
    assert planner.volley(Counter(), armed=everything) == []  # each short cell has one armed
