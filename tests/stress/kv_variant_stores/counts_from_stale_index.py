"""``CountsFromStaleIndex``: counts() from status index sizes a crash mid-save leaves stale
(a broken variant of ``kv_stores``)."""

from kv_stores import CountsFromStaleIndex, factories

make_store, make_shared_store = factories(CountsFromStaleIndex)
