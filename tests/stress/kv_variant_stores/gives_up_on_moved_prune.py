"""``GivesUpOnMovedPrune``: prune gives up on a terminal task a touch moved
(a broken variant of ``kv_stores``)."""

from kv_stores import GivesUpOnMovedPrune, factories

make_store, make_shared_store = factories(GivesUpOnMovedPrune)
