"""``UnboundedCleanup``: stale index entries removed without a revision bound
(a broken variant of ``kv_stores``)."""

from kv_stores import UnboundedCleanup, factories

make_store, make_shared_store = factories(UnboundedCleanup)
