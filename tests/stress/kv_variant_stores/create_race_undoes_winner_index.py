"""``CreateRaceUndoesWinnerIndex``: a lost create race removes the winner's index entries
(a broken variant of ``kv_stores``)."""

from kv_stores import CreateRaceUndoesWinnerIndex, factories

make_store, make_shared_store = factories(CreateRaceUndoesWinnerIndex)
