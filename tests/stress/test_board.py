"""The call board (``stress/board.py``): what the parent reads of the call each worker is in.

Pinned: a slot names the call in progress by its kind (method and qualifier), and
remembers how its last ``RING`` calls ended -- long enough that a pooled connection's
previous call is still there when the connection is next used, which is when the aim
learns how many requests a kind of call makes.
"""

from __future__ import annotations

from pathlib import Path

from chongming_conformance.stress.board import RING, Board, BoardWriter


def test_a_slot_names_the_kind_of_call_and_remembers_how_its_last_calls_ended(
        tmp_path: Path) -> None:
    board = Board(tmp_path / "board", 2)
    writer = BoardWriter(tmp_path / "board", 1)
    try:
        writer.invoke(1, "submit_command", "dup")
        slot = board.read(1)
        assert slot is not None and slot.in_call and slot.method == "submit_command:dup"
        writer.result(1, ok=False)
        for seq in range(2, RING + 2):
            writer.invoke(seq, "get")
            writer.result(seq, ok=seq % 2 == 0, conflict=False)
        slot = board.read(1)
        assert slot is not None and not slot.in_call and slot.method == "get"
        assert slot.outcome(1) is None  # forgotten: RING calls ended since
        assert slot.outcome(2) == "returned" and slot.outcome(3) == "raised"
        assert [f.seq for f in slot.finished][:3] == [RING + 1, RING, RING - 1]
        assert len(slot.finished) == RING
        assert board.read(0) is None  # never written
    finally:
        writer.close()
        board.close()
