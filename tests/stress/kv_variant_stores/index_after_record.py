"""``IndexAfterRecord``: index entries written ~2 ms after the record's compare-and-set
(a broken variant of ``kv_stores``)."""

from kv_stores import IndexAfterRecord, factories

make_store, make_shared_store = factories(IndexAfterRecord)
