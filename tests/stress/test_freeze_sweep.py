"""The freezes' sweep (``stress/scenarios/_aimed.Sweep``): which write, at which request, the
mixed workload freezes next while a round's checker reads.

What the aimed workload relies on: every gap of every method that makes several requests
is frozen once before any is frozen twice; one call per method per round; a method of many
requests does not crowd out the others (``MAX_GAPS``); a gap whose calls seldom make that
many requests stops being picked first; and a store whose every call is one request gets
no freeze at all.
"""

from __future__ import annotations

from collections import Counter

from chongming_conformance.stress.scenarios._aimed import MAX_GAPS, Sweep

LEARNED = {"save": 5, "create": 3, "get": 1, "touch": 1, "claim_commands": 2}
GAPS = {("save", k) for k in range(2, 6)} | {("create", 2), ("create", 3),
                                              ("claim_commands", 2)}


def _rounds(sweep: Sweep, learned: dict[str, int], rounds: int, per_round: int
            ) -> list[list[tuple[str, int]]]:
    out = []
    for _ in range(rounds):
        picks = sweep.picks(learned, per_round)
        for gap in picks:
            sweep.hit(gap)
        out.append(picks)
    return out


def test_every_gap_is_frozen_once_before_any_twice() -> None:
    sweep = Sweep(seed=3)
    seen: list[tuple[str, int]] = []
    for picks in _rounds(sweep, LEARNED, rounds=7, per_round=1):
        seen += picks
    assert set(seen) == GAPS and len(seen) == len(GAPS)  # 7 gaps, 7 freezes, no repeat
    again = _rounds(sweep, LEARNED, rounds=7, per_round=1)
    assert Counter(g for picks in again for g in picks) == Counter(GAPS)  # the next sweep


def test_one_call_per_method_per_round_and_reads_never_frozen() -> None:
    for picks in _rounds(Sweep(seed=1), LEARNED, rounds=10, per_round=3):
        methods = [m for m, _ in picks]
        assert len(methods) == len(set(methods)) == 3
        assert not {"get", "touch"} & set(methods)  # one request each: no gap


def test_a_method_of_many_requests_is_capped() -> None:
    learned = {"prune": 200, "save": 3}
    sweep = Sweep(seed=0)
    seen = {g for picks in _rounds(sweep, learned, rounds=MAX_GAPS + 2, per_round=2)
            for g in picks}
    assert {k for m, k in seen if m == "prune"} == set(range(2, MAX_GAPS + 2))
    assert {("save", 2), ("save", 3)} <= seen


def test_a_gap_that_keeps_missing_waits_behind_the_others() -> None:
    sweep = Sweep(seed=5)
    learned = {"save": 3}
    sweep.miss(("save", 3))
    sweep.miss(("save", 3))
    assert sweep.picks(learned, 1) == [("save", 2)]
    sweep.hit(("save", 2))
    sweep.hit(("save", 2))
    assert sweep.picks(learned, 1) == [("save", 3)]  # its turn comes when the rest are done


def test_nothing_to_freeze_when_every_call_is_one_request() -> None:
    assert Sweep(seed=0).picks({"save": 1, "create": 1, "get": 1}, 3) == []
    assert Sweep(seed=0).picks({}, 3) == []
