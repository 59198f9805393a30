"""The aimer's matching, without a network: a real call board written in this process,
chunks fed by hand, the connection's owner resolved to worker 0 (``_owner`` stubbed: the
/proc lookup is ``faults.peers``' job and has its own tests).

What is pinned here is what the aimed crashes of the mixed workload rely on: a
``"between"`` trigger fires only on a request after a call's first one and never on a
method that makes one request, different picks reach different requests, and a call
already under way when the trigger was armed never matches it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chongming_conformance.faults import aim
from chongming_conformance.faults.aim import Aimer, Trigger
from chongming_conformance.faults.proxy import ChunkSeen
from chongming_conformance.stress.board import Board, BoardWriter

PROXY = "db"


def _chunk(direction: str, connection: int = 1) -> ChunkSeen:
    return ChunkSeen(PROXY, connection, ("127.0.0.1", 50000 + connection),
                     ("127.0.0.1", 6000), direction, 10)  # type: ignore[arg-type]


class _Rig:
    """One worker (index 0, this process) and the aimer watching its connection."""

    def __init__(self, tmp_path: Path) -> None:
        self.board = Board(tmp_path / "board", 1)
        self.writer = BoardWriter(tmp_path / "board", 0)
        self.aimer = Aimer()
        self.aimer.attach(self.board)
        self.seq = 0

    def call(self, method: str, requests: int) -> list[object]:
        """One call of ``method`` making ``requests`` round trips; each request's decision."""
        self.seq += 1
        self.writer.invoke(self.seq, method)
        decisions: list[object] = []
        for _ in range(requests):
            decisions.append(self.aimer.on_chunk(_chunk("upstream")))
            self.aimer.on_chunk(_chunk("downstream"))
        self.writer.result(self.seq, ok=True)
        return decisions

    def close(self) -> None:
        self.aimer.detach()
        self.writer.close()


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> _Rig:
    monkeypatch.setattr(aim, "_owner", lambda board, peer, listening: 0)
    r = _Rig(tmp_path)
    yield r  # type: ignore[misc]
    r.close()


def _hold(number: int, pick: int, methods: frozenset[str] = frozenset({"save"})) -> Trigger:
    return Trigger(number, "hold", "hold", "upstream", methods, "between", hold=0.25,
                   pick=pick)


def test_between_never_fires_before_the_method_is_learned_nor_on_one_request(rig: _Rig
                                                                             ) -> None:
    rig.aimer.arm(_hold(1, 0, frozenset({"save", "get"})))
    assert rig.call("save", 5) == [None] * 5  # not learned yet: no call of it had returned
    assert rig.call("get", 1) == [None]  # one request: no "between" in it
    assert rig.call("get", 1) == [None]
    assert rig.aimer.fired(1) == []


def test_between_fires_on_a_later_request_and_picks_spread_over_them(rig: _Rig) -> None:
    rig.call("save", 5)  # learned: save makes 5 requests
    reached: set[int] = set()
    for pick in range(8):  # consecutive picks: consecutive gaps
        rig.aimer.arm(_hold(pick + 1, pick))
        decisions = rig.call("save", 5)
        held = [i + 1 for i, d in enumerate(decisions) if d == 0.25]
        assert len(held) == 1, decisions  # fires once, then is spent
        assert held[0] >= 2  # never the call's first request
        hit = rig.aimer.fired(pick + 1)[0]
        assert (hit.method, hit.round_trip, hit.round_trips) == ("save", held[0], 5)
        reached.add(held[0])
    assert reached == {2, 3, 4, 5}  # every gap between two requests, for some pick


def test_a_call_under_way_when_armed_never_matches(rig: _Rig) -> None:
    rig.call("save", 3)
    rig.seq += 1
    rig.writer.invoke(rig.seq, "save")  # inside a save when the trigger is armed
    assert rig.aimer.on_chunk(_chunk("upstream")) is None
    rig.aimer.on_chunk(_chunk("downstream"))
    rig.aimer.arm(_hold(1, 0))  # would fire on request 2 of a call that starts from now
    for _ in range(2):
        assert rig.aimer.on_chunk(_chunk("upstream")) is None
        rig.aimer.on_chunk(_chunk("downstream"))
    rig.writer.result(rig.seq, ok=True)
    assert rig.aimer.fired(1) == []
    assert rig.call("save", 3).count(0.25) == 1  # the next call is the one it hits


def test_a_freeze_holds_exactly_the_request_it_names(rig: _Rig) -> None:
    """The mixed workload's freezes name a request number: that request of the next call of
    the method is held back (the call stands still after the ones before it), no other."""
    rig.call("save", 4)  # learned: a save makes 4 requests
    rig.aimer.arm(Trigger(1, "freeze", "hold", "upstream", frozenset({"save"}), 3,
                          frozenset({0}), hold=3.0))
    assert rig.call("get", 1) == [None]
    assert rig.call("save", 4) == [None, None, 3.0, None]
    assert rig.call("save", 4) == [None, None, None, None]  # it fired once
    [hit] = rig.aimer.fired(1)
    assert (hit.method, hit.round_trip, hit.round_trips) == ("save", 3, 4)


def test_a_lost_request_may_be_aimed_some_requests_before_the_last(rig: _Rig) -> None:
    """The commit is a call's last request; a duplicate insert fails at its INSERT, before
    it: a cell's later lost requests walk back one request each."""
    rig.call("create", 3)  # learned: 3 requests (BEGIN, INSERT, COMMIT)
    rig.aimer.arm(Trigger(1, "lost-request", "drop", "upstream", frozenset({"create"}), "last",
                          back=1))
    assert rig.call("create", 3) == [None, "drop", None]
    rig.aimer.arm(Trigger(2, "lost-request", "drop", "upstream", frozenset({"create"}), "last",
                          back=5))  # never before the first
    assert rig.call("create", 3) == ["drop", None, None]
